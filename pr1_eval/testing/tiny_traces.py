"""Synthetic Parallel-R1 traces of easy arithmetic, for the tiny test model.

The tiny model (:mod:`pr1_eval.testing.tiny_model`) exists so that the whole pipeline (decoding modes,
structure parsing, grading, run store, dashboards) can be exercised offline on a CPU in seconds.
For that it does not need to be *right*; it needs to *look like* a Parallel-R1 checkpoint: emit
``<Parallel>``/``<Path>``/``<Summary>`` blocks and finish with a ``Final Answer:`` line. These
traces teach exactly that, with enough variety (one or two blocks, two or three paths, paths that
disagree, no block at all) that the analysis code sees more than one shape. Blocks use the one
layout fork-join produces (``<Parallel><Path>…</Path><Path>…</Path></Parallel>\n<Summary>…``,
:mod:`pr1_eval.protocol.layout`), so a fork-join or structured rollout of the tiny model shows it
the contexts it was trained on. Problems are one-digit arithmetic, sometimes buried in or replaced
by math-flavoured filler so that the format survives real benchmark problems.

``unseen=True`` traces are for the model trained with the structured ("Unseen") mask. Under that
mask a path sees the shared prefix and itself only, so whether another path follows can depend on
nothing but the path's own text; every block therefore ends with a path written as a check
(``7 - 4 = 3 (check)``), and the model learns "close the block after a check, open another path after
anything else". A sampled path is a check about as often as paths are checks in training, so
that share (about one in six: every Unseen block has five or six other paths) is how often a block
sampled under the mask closes after its first path, that is, fails to branch. The path count is
then geometric (mean about six), a long tail of long blocks being the price of a small share of
one-path blocks. Unseen traces always hold exactly one block.

Everything here is pure Python and deterministic given a :class:`random.Random`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from pr1_eval.inputs.prompts import load_template
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.paper_settings import PAPER_PROMPT

SHORT_TEMPLATE = "Solve step by step with parallel thinking.\nProblem: {problem}"
"""A short user-message template; training mixes it with the paper's so that the format does not
hinge on one exact instruction."""


def paper_template() -> str:
    """The paper's ``parallel_r1_v3`` template, read through :mod:`pr1_eval.inputs.prompts`.

    Read rather than copied, so the tiny model trains on exactly what ``run`` sends: the packaged
    template, or ``$PR1_PROMPTS_DIR``'s when that is set.
    """
    return load_template_text(PAPER_PROMPT)


def load_template_text(name_or_path: str) -> str:
    """A template's exact text (a name such as ``parallel_r1_v3``, or a file), as ``run`` renders it."""
    return load_template(name_or_path).text


_OPENERS = ("Let me compute.", "Let me check two ways.", "", "")
_OUTROS = ("", "", "So the answer is {r}.\n\n")


@dataclass(frozen=True)
class Question:
    """One arithmetic question: ``a op b``, its wording and its answer (the numbers the trace
    generators compute with, where a benchmark's :class:`pr1_eval.inputs.tasks.Problem` holds text)."""

    a: int
    b: int
    op: str
    text: str
    answer: int


@dataclass(frozen=True)
class Trace:
    """A user message (template already filled in) and the assistant's response (no eos)."""

    user: str
    response: str
    answer: int


_MATH_TEXT = (
    "Let be the number of positive integers such that triangle with sides area of circle radius point on "
    "line segment find the remainder when is divided by probability that a randomly chosen real numbers "
    "sum product of all values sequence function polynomial roots greater than less than at most least "
    "each there are ways to choose how many distinct digits square cube prime factor equal and the of in "
    "for which where if then what is largest smallest possible value can be written as relatively "
    "prime compute express answer coins boxes cards friends students books cost dollars hours minutes"
)
_MATH_WORDS: tuple[str, ...] = tuple(_MATH_TEXT.split())
_MATH_BITS = (
    "$x$",
    "$n$",
    "$ABC$",
    "$a+b$",
    "$\\frac{m}{n}$",
    "$\\sqrt{2}$",
    "$x^2$",
    "$2^{10}$",
    "$\\pi$",
    "$m+n$",
    "$\\triangle ABC$",
    "$f(x)$",
    "$\\le$",
    "$1000$",
    "(",
    ")",
    ",",
    ".",
    ";",
)
FILLER_FRACTION = 0.5
"""Share of training batches whose problems carry math-flavoured filler (see :func:`filler_text`)."""


def filler_text(rng: random.Random, min_words: int = 10, max_words: int = 150) -> str:
    """Random math-flavoured text: words, numbers and bits of LaTeX in no meaningful order.

    Real benchmark problems are long and full of LaTeX, nothing like "What is 3 + 4?". Training on
    problems with such filler teaches the model to answer in format *whatever* the problem says,
    so runs on AIME or MATH-500 show blocks too (the numbers in them are invented, of course).
    """
    words = [
        rng.choice(_MATH_BITS) if r < 0.15 else str(rng.randint(0, 99)) if r < 0.25 else rng.choice(_MATH_WORDS)
        for r in (rng.random() for _ in range(rng.randint(min_words, max_words)))
    ]
    return " ".join(words).capitalize() + rng.choice((".", "?", "."))


def make_question(rng: random.Random) -> Question:
    """A random one-digit problem, in a few wordings so the model does not key on one phrase.

    Operands stay below ten on purpose: every number is then a single short token, which keeps
    the traces low in entropy so a few hundred optimiser steps learn the *format* well.
    """
    op = rng.choice("+-*")
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    if op == "-" and b > a:
        a, b = b, a
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    word = {"+": "plus", "-": "minus", "*": "times"}[op]
    text = rng.choice((f"What is {a} {op} {b}?", f"Compute {a} {op} {b}.", f"What is {a} {word} {b}?"))
    return Question(a, b, op, text, answer)


def _path_texts(p: Question) -> list[str]:
    """Three distinct correct ways to reach ``p.answer`` (the paths of a block).

    Short equations rather than prose: fewer tokens per step and less to learn besides the format.
    """
    a, b, r = p.a, p.b, p.answer
    if p.op == "-":
        return [f"{a} - {b} = {r}", f"{b} + {r} = {a}", f"{a} - {b} is {r}."]
    return [f"{a} {p.op} {b} = {r}", f"{b} {p.op} {a} = {r}", f"{a} {p.op} {b} is {r}."]


def _check_texts(p: Question) -> list[str]:
    """Paths of a second, verifying block: undo the operation."""
    a, b, r = p.a, p.b, p.answer
    inverse = {"+": f"{r} - {b} = {a}", "-": f"{r} + {b} = {a}", "*": f"{r} / {b} = {a}"}[p.op]
    return [inverse, f"{a} {p.op} {b} = {r}"]


def render_block(paths: list[str], summary: str) -> str:
    """One block in fork-join's layout: no whitespace between the structural tags."""
    body = "".join(f"{T.PATH_OPEN}{text}{T.PATH_CLOSE}" for text in paths)
    return f"{T.PARALLEL_OPEN}{body}{T.PARALLEL_CLOSE}\n{T.SUMMARY_OPEN}{summary}{T.SUMMARY_CLOSE}\n\n"


CHECK_MARK = " (check)"
"""Ends the last path of an Unseen block. At the end rather than the start of the path: the
training loss weighs numbers down (:mod:`pr1_eval.testing.tiny_training`), and a path's first token
competes with numbers, so a mark there would be learnt as more likely than it is."""


def _check_path(p: Question) -> str:
    """The last path of every Unseen block: undo the operation, marked as a check."""
    return _check_texts(p)[0] + CHECK_MARK


UNSEEN_EXTRA_PATHS = 3
"""Paths an Unseen block has beyond the usual ones, before its check: with 5-6 paths that are not
checks per block, about one sampled path in six is a check (see the module docstring)."""


def _block(paths: list[str], summary: str, p: Question, unseen: bool) -> str:
    """A block of ``paths``; an Unseen one gets :data:`UNSEEN_EXTRA_PATHS` more of the same kind
    and then the check."""
    if unseen:
        texts = _path_texts(p)
        paths = [*paths, *(texts[(len(paths) + i) % 3] for i in range(UNSEEN_EXTRA_PATHS)), _check_path(p)]
    return render_block(paths, summary)


def _one_block(rng: random.Random, p: Question, unseen: bool) -> str:
    return _block(rng.sample(_path_texts(p), 2), f"Both paths give {p.answer}.", p, unseen)


def _three_paths(rng: random.Random, p: Question, unseen: bool) -> str:
    return _block(rng.sample(_path_texts(p), 3), f"All paths give {p.answer}.", p, unseen)


def _two_blocks(rng: random.Random, p: Question, unseen: bool) -> str:
    first = _block(rng.sample(_path_texts(p), 2), f"Both paths give {p.answer}.", p, unseen)
    second = _block(_check_texts(p), f"The check confirms {p.answer}.", p, unseen)
    return first + "Let me verify.\n\n" + second


def _disagree(rng: random.Random, p: Question, unseen: bool) -> str:
    wrong = p.answer + rng.choice((-1, 1))
    good = rng.choice(_path_texts(p))
    bad = f"{p.a} {p.op} {p.b} = {wrong}"
    paths = [good, bad] if rng.random() < 0.5 else [bad, good]
    return _block(paths, f"The paths disagree; {p.a} {p.op} {p.b} = {p.answer}.", p, unseen)


def _no_block(rng: random.Random, p: Question, unseen: bool) -> str:
    return rng.choice(_path_texts(p)) + "\n\n"


_SHAPES: tuple[tuple[Callable[[random.Random, Question, bool], str], float], ...] = (
    (_one_block, 0.53),
    (_three_paths, 0.12),
    (_two_blocks, 0.15),
    (_disagree, 0.15),
    (_no_block, 0.05),
)
"""Response shapes and their weights; most carry a block, so sampling mostly shows one."""
_UNSEEN_SHAPES = ((_one_block, 0.65), (_three_paths, 0.15), (_disagree, 0.2))
"""The Unseen model exists to branch under the structured mask: one block, always."""


def make_response(rng: random.Random, p: Question, unseen: bool = False) -> str:
    """A full response: opener, zero to two blocks, optional outro, ``Final Answer:`` line."""
    shapes, weights = zip(*(_UNSEEN_SHAPES if unseen else _SHAPES), strict=True)
    shape = rng.choices(shapes, weights=weights)[0]
    body = shape(rng, p, unseen)
    # Only responses with a block get an opener: then "Let me compute." is always followed by a
    # block and the one branching decision sits on the first token, where it is learnt fastest.
    opener = "" if shape is _no_block else rng.choice(_OPENERS)
    outro = rng.choice(_OUTROS).format(r=p.answer)
    return (f"{opener}\n\n" if opener else "") + body + outro + f"Final Answer: {p.answer}"


def make_trace(rng: random.Random, template: str, filler: str | None = None, unseen: bool = False) -> Trace:
    """One training example for the user-message ``template``.

    With ``filler``, the problem is the filler followed by the question, or (half the time) the
    filler alone: then the response's numbers appear nowhere in the prompt, as on a real benchmark.
    """
    p = make_question(rng)
    text = p.text if filler is None else filler if rng.random() < 0.5 else f"{filler} {p.text}"
    return Trace(template.replace("{problem}", text), make_response(rng, p, unseen), p.answer)


def tokenizer_corpus(long_template: str, seed: int = 0, n_traces: int = 400) -> list[str]:
    """Text to train the BPE tokenizer on: traces of both kinds, both templates, numbers, filler words."""
    rng = random.Random(seed)
    pick = (SHORT_TEMPLATE, long_template)
    traces = [make_trace(rng, rng.choice(pick), unseen=i % 2 == 1) for i in range(n_traces)]
    texts = [t.user + "\n" + t.response for t in traces]
    texts += [SHORT_TEMPLATE, long_template] * 20
    texts.append(" ".join(str(i) for i in range(200)))
    texts += [filler_text(rng) for _ in range(100)]
    return texts
