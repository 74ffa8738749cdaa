"""Synthetic Parallel-R1 traces of easy arithmetic, for the tiny test model.

The tiny model (:mod:`pr1_eval.tiny_model`) exists so that the whole pipeline (decoding modes,
structure parsing, grading, run store, dashboards) can be exercised offline on a CPU in seconds.
For that it does not need to be *right*; it needs to *look like* a Parallel-R1 checkpoint: emit
``<Parallel>``/``<Path>``/``<Summary>`` blocks in the paper's layout and finish with a
``Final Answer:`` line. These traces teach exactly that, with enough variety (one or two blocks,
two or three paths, paths that disagree, no block at all) that the analysis code sees more than
one shape. The layout (tags on their own lines, a blank line before ``Final Answer:``) copies the
paper's ``parallel_gsm8k`` cold-start data. Problems are one-digit arithmetic, sometimes buried in
or replaced by math-flavoured filler so that the format survives real benchmark problems.

Everything here is pure Python and deterministic given a :class:`random.Random`.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

from pr1_eval import tags as T

SHORT_TEMPLATE = "Solve step by step with parallel thinking.\nProblem: {problem}"
"""A short user-message template; training mixes it with the paper's so that the format does not
hinge on one exact instruction."""

@functools.lru_cache(maxsize=1)
def paper_template() -> str:
    """The paper's ``parallel_r1_v3`` template, read from the shared prompts folder.

    Read rather than copied: the project keeps no copy of the shared data. Building a trained
    tiny model therefore needs the prompts folder (``PR1_PROMPTS_DIR`` or ``PR1_DATA_DIR``'s
    sibling ``prompts/``); the error says so when it is missing.
    """
    from pr1_eval.prompts import load_template

    return load_template("parallel_r1_v3").text.rstrip("\n")


def templates() -> tuple[str, ...]:
    """The user-message templates training mixes: the short one and the paper's."""
    return (SHORT_TEMPLATE, paper_template())


_OPENERS = ("Let me compute.", "Let me check two ways.", "", "")
_OUTROS = ("", "", "So the answer is {r}.\n\n")


@dataclass(frozen=True)
class Problem:
    """One arithmetic question: ``a op b``, its wording and its answer."""

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


def make_problem(rng: random.Random) -> Problem:
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
    return Problem(a, b, op, text, answer)


def _path_texts(p: Problem) -> list[str]:
    """Three distinct correct ways to reach ``p.answer`` (the paths of a block).

    Short equations rather than prose: fewer tokens per step and less to learn besides the format.
    """
    a, b, r = p.a, p.b, p.answer
    if p.op == "-":
        return [f"{a} - {b} = {r}", f"{b} + {r} = {a}", f"{a} - {b} is {r}."]
    return [f"{a} {p.op} {b} = {r}", f"{b} {p.op} {a} = {r}", f"{a} {p.op} {b} is {r}."]


def _check_texts(p: Problem) -> list[str]:
    """Paths of a second, verifying block: undo the operation."""
    a, b, r = p.a, p.b, p.answer
    inverse = {"+": f"{r} - {b} = {a}", "-": f"{r} + {b} = {a}", "*": f"{r} / {b} = {a}"}[p.op]
    return [inverse, f"{a} {p.op} {b} = {r}"]


def render_block(paths: list[str], summary: str) -> str:
    """One block in the paper's layout: every tag on its own line."""
    body = "".join(f"{T.PATH_OPEN}\n{text}\n{T.PATH_CLOSE}\n" for text in paths)
    return f"{T.PARALLEL_OPEN}\n{body}{T.PARALLEL_CLOSE}\n{T.SUMMARY_OPEN}\n{summary}\n{T.SUMMARY_CLOSE}\n\n"


def _one_block(rng: random.Random, p: Problem) -> str:
    return render_block(rng.sample(_path_texts(p), 2), f"Both paths give {p.answer}.")


def _three_paths(rng: random.Random, p: Problem) -> str:
    return render_block(rng.sample(_path_texts(p), 3), f"All paths give {p.answer}.")


def _two_blocks(rng: random.Random, p: Problem) -> str:
    first = render_block(rng.sample(_path_texts(p), 2), f"Both paths give {p.answer}.")
    return first + "Let me verify.\n\n" + render_block(_check_texts(p), f"The check confirms {p.answer}.")


def _disagree(rng: random.Random, p: Problem) -> str:
    wrong = p.answer + rng.choice((-1, 1))
    good = rng.choice(_path_texts(p))
    bad = f"{p.a} {p.op} {p.b} = {wrong}"
    paths = [good, bad] if rng.random() < 0.5 else [bad, good]
    return render_block(paths, f"The paths disagree; {p.a} {p.op} {p.b} = {p.answer}.")


def _no_block(rng: random.Random, p: Problem) -> str:
    return rng.choice(_path_texts(p)) + "\n\n"


_SHAPES: tuple[tuple[Callable[[random.Random, Problem], str], float], ...] = (
    (_one_block, 0.53),
    (_three_paths, 0.12),
    (_two_blocks, 0.15),
    (_disagree, 0.15),
    (_no_block, 0.05),
)
"""Response shapes and their weights; most carry a block, so sampling mostly shows one."""


def make_response(rng: random.Random, p: Problem) -> str:
    """A full response: opener, zero to two blocks, optional outro, ``Final Answer:`` line."""
    shapes, weights = zip(*_SHAPES, strict=True)
    shape = rng.choices(shapes, weights=weights)[0]
    body = shape(rng, p)
    # Only responses with a block get an opener: then "Let me compute." is always followed by a
    # block and the one branching decision sits on the first token, where it is learnt fastest.
    opener = "" if shape is _no_block else rng.choice(_OPENERS)
    outro = rng.choice(_OUTROS).format(r=p.answer)
    return (f"{opener}\n\n" if opener else "") + body + outro + f"Final Answer: {p.answer}"


def make_trace(rng: random.Random, template: str | None = None, filler: str | None = None) -> Trace:
    """One training example; ``template`` defaults to a random pick from :func:`templates`.

    With ``filler``, the problem is the filler followed by the question, or (half the time) the
    filler alone: then the response's numbers appear nowhere in the prompt, as on a real benchmark.
    """
    p = make_problem(rng)
    template = template if template is not None else rng.choice(templates())
    text = p.text if filler is None else filler if rng.random() < 0.5 else f"{filler} {p.text}"
    return Trace(template.replace("{problem}", text), make_response(rng, p), p.answer)


def tokenizer_corpus(seed: int = 0, n_traces: int = 400) -> list[str]:
    """Text to train the BPE tokenizer on: traces, both templates, numbers, filler words."""
    rng = random.Random(seed)
    texts = [t.user + "\n" + t.response for t in (make_trace(rng) for _ in range(n_traces))]
    texts += list(templates()) * 20
    texts.append(" ".join(str(i) for i in range(200)))
    texts += [filler_text(rng) for _ in range(100)]
    return texts
