"""Answer policies: which text of a response is its answer, stated by name and recorded with the run.

Why a choice: the paper's checker reads only a ``Final Answer:`` line, so a response that states
its answer in a sentence ("The answer is $110$.") has none. That is right for a model trained on
the paper's prompt, and a trap for a base model, a sequential baseline or a comparison with
lighteval's or lm-eval's ``math_verify`` number for the same checkpoint, which read the last
boxed expression, else the last math expression. So there are two named readings:

* ``paper`` — today's reading (:func:`pr1_eval.grading.extract.extract_answer`): the last
  non-empty ``Final Answer:`` line, else the last ``\\boxed{}``, else no answer.
* ``lenient`` — the reading other harnesses use: the last ``\\boxed{}`` (with the boxes joined to
  it), else the last ``Final Answer:`` line, else the last value of the final sentence that states
  one ("The answer is $110$." → ``110``); plain-text forms are written as the LaTeX they mean
  (``3 sqrt(5)`` → ``3\\sqrt{5}``, ``137 1/2`` → ``137\\frac{1}{2}``), so they match where the LaTeX
  would; an empty set in words (``no solution``) or as ``\\varnothing`` is ``\\emptyset``, and a gold
  that states a set in words is read the same way (:mod:`pr1_eval.grading.grade`); a bracket that
  nothing closes (``[45 degrees]`` → ``45``) is dropped. Never from inside a ``<Path>`` (as under
  ``paper``).

Both ignore everything after the end of the model's turn and inside paths; only where the
answer is looked for differs. The paper's own string checker (``correct_paper``) is the same
under both: it is the paper's procedure and has no policy.

The names, summaries and defaults live in :mod:`pr1_eval.records.answer_policy` (re-exported
here). Defaults (:func:`default_policy`): ``paper`` for the paper's prompt (``parallel_r1_v3``), whose
models are trained to end on ``Final Answer:``, so the paper's reading is their score; ``lenient``
for every other template (``sequential_baseline``, ``boxed``, a file), whose models are baselines or
base models that box or state their answer in prose, where the paper's reading would score
stated answers as missing.
"""

from __future__ import annotations

import re

from pr1_eval.grading.answer_text import box_chain, last_value, read_answer, read_boxes
from pr1_eval.grading.extract import ExtractedAnswer, answer_region, extract_answer
from pr1_eval.grading.intervals import empty_set_in_words
from pr1_eval.records.answer_policy import (
    ANSWER_POLICIES,
    DEFAULT_POLICY,
    POLICY_SUMMARIES,
    check_policy,
    default_policy,
)

#: Longest tail of the text the final-sentence reading looks at (a closing sentence is short).
_MAX_TAIL_CHARS = 4000
_SENTENCE_END_RE = re.compile(r"(?<=[.!?。！？])\s+")
_MATH_RE = re.compile(r"\$\$.+?\$\$|(?<!\\)\$[^$\n]+?(?<!\\)\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)
_PLAIN_SQRT_RE = re.compile(r"(?:(?<![\\A-Za-z])sqrt|√)\s*(?:\(([^()]{1,200})\)|\{([^{}]{1,200})\}|(\d+(?:\.\d+)?|[A-Za-z]))")
_MIXED_NUMBER_RE = re.compile(r"^(-?)(\d+)\s+(\d+)\s*/\s*(\d+)$")


def extract_by_policy(response: str, policy: str = DEFAULT_POLICY, end_texts: tuple[str, ...] = ()) -> ExtractedAnswer:
    """The answer of ``response`` under ``policy`` (see the module docstring). Never raises on model
    output: an internal failure reads as no answer, as :func:`extract_answer` does."""
    if policy == "paper":
        return extract_answer(response, end_texts)
    check_policy(policy)
    try:
        return _lenient(response, end_texts)
    except Exception:  # noqa: BLE001 - a scorer must survive any model output
        return ExtractedAnswer(None, "none", "none")


def _lenient(response: str, end_texts: tuple[str, ...]) -> ExtractedAnswer:
    """The ``lenient`` reading (module docstring), on the text outside paths before the turn ends."""
    text = answer_region(response, end_texts)
    boxed = read_boxes(box_chain(text))
    if boxed.text is not None:
        return ExtractedAnswer(lenient_value(boxed.text), "boxed", boxed.rule)
    stated = extract_answer(text)  # a Final Answer: line (no box is left to fall back to)
    if stated.source == "final_answer" or stated.rule != "none":
        return stated if stated.text is None else ExtractedAnswer(lenient_value(stated.text), stated.source,
                                                                    stated.rule)
    sentence = final_sentence(text)
    if sentence is None:
        return ExtractedAnswer(None, "none", "none")
    reading = read_answer(sentence)
    if reading.text is None:
        return ExtractedAnswer(None, "none", reading.rule)
    return ExtractedAnswer(lenient_value(reading.text), "sentence", reading.rule)


def lenient_value(answer: str) -> str:
    """The answer text the shared reading found (:func:`pr1_eval.grading.answer_text.read_answer`,
    which the ``paper`` policy uses unchanged), as the ``lenient`` policy hands it to math-verify:
    an empty set stated in words or as another symbol is ``\\emptyset``
    (:func:`pr1_eval.grading.intervals.empty_set_in_words`); a value left with a bracket that
    nothing closes (``[45 degrees]`` is read as ``[45``: the word splits it) loses that bracket; and
    plain-text math is written as LaTeX (:func:`latex_of_plain`)."""
    empty = empty_set_in_words(answer)
    if empty is not None:
        return empty
    return latex_of_plain(_without_lone_bracket(answer))


def _without_lone_bracket(answer: str) -> str:
    """``answer`` without a ``[`` at its start that nothing in it closes, or a ``]`` at its end that
    nothing opens, around one value (a half-open interval ``[2, 5)`` keeps both of its brackets, and
    a cut-off list ``[1, 2`` is left as it is)."""
    s = answer.strip()
    if "," in s:
        return answer
    if s.startswith("[") and not any(c in s for c in ")]"):
        s = s[1:].strip()
    if s.endswith("]") and not any(c in s for c in "(["):
        s = s[:-1].strip()
    return s or answer


def final_sentence(text: str) -> str | None:
    """The last sentence of ``text`` that states a value (a math span, or a run with a digit or a
    LaTeX command), read from the end: trailing prose without a value ("I hope it helps.") is
    passed over, as the other harnesses take the last math expression. Sentences end at ``.``,
    ``!`` or ``?`` followed by space, outside math, or at a line end."""
    tail = text[-_MAX_TAIL_CHARS:]
    for line in reversed(tail.split("\n")):  # a line ends at \n only (str.splitlines also cuts at \f, \x1c, \u2028)
        if not line.strip():
            continue
        for sentence in reversed(_sentences(line)):
            if last_value(sentence) is not None:
                return sentence.strip()
    return None


def _sentences(line: str) -> list[str]:
    """``line`` split after sentence-ending punctuation that lies outside its math spans."""
    masked = list(line)
    for match in _MATH_RE.finditer(line):
        for i in range(match.start(), match.end()):
            masked[i] = "x" if masked[i] in ".!?" or masked[i].isspace() else masked[i]
    cuts = [m.end() for m in _SENTENCE_END_RE.finditer("".join(masked))]
    bounds = [0, *cuts, len(line)]
    return [line[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if line[a:b].strip()]


def latex_of_plain(answer: str) -> str:
    """``answer`` with plain-text math written as the LaTeX it means: ``sqrt(5)``, ``sqrt 5`` and
    ``√5`` → ``\\sqrt{5}``; a whole answer ``137 1/2`` (a mixed number) → ``137\\frac{1}{2}``.

    Why: math-verify reads its input as LaTeX, where ``sqrt(5)`` is the product s·q·r·t·5 and
    ``137 1/2`` is 137 · 1/2; written as LaTeX, both mean what the model meant, and the gold
    (``3\\sqrt{5}``, ``137\\frac{1}{2}``) matches them as it matches the LaTeX forms. Answers with no
    such form are returned unchanged."""
    mixed = _MIXED_NUMBER_RE.match(answer.strip())
    if mixed:
        sign, whole, num, den = mixed.groups()
        return f"{sign}{whole}\\frac{{{num}}}{{{den}}}"
    if "sqrt" not in answer and "√" not in answer:
        return answer
    return _PLAIN_SQRT_RE.sub(lambda m: "\\sqrt{" + next(g for g in m.groups() if g is not None).strip() + "}", answer)


__all__ = ["ANSWER_POLICIES", "DEFAULT_POLICY", "POLICY_SUMMARIES", "check_policy", "default_policy",
           "extract_by_policy", "final_sentence", "latex_of_plain", "lenient_value"]
