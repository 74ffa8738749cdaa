"""What a ``<Path>`` concludes: the value it arrives at, so a block's paths can be compared.

Why not the grader's answer extraction: that one reads only a ``Final Answer:`` line or a
``\\boxed{}`` and, by design, never looks inside a path (a path is a draft, not the answer).
Real Parallel-R1 paths end with a computed value instead (``… so 5 * 15 = 75 berries in
total.``), so with the grader's reading every block of the teacher traces had no answers and
no role. This reader is for block roles and summary consistency only; it never grades.

Rules, first match wins (``Conclusion.source`` names it):

1. ``boxed`` — the last ``\\boxed{}`` (with the boxes joined to it, as the grader reads a set);
2. ``final_answer`` / ``answer_is`` — the last explicit statement: a ``Final Answer:`` line, or
   "the answer is …" / "answer: …", read up to the end of its sentence with the grader's
   answer-line reader;
3. ``last_equals`` — in the path's closing sentence (the last one with a number in it, after a
   trailing parenthesis such as ``(since 18 = 10 + 8)`` is cut), the value after the last ``=``
   when the sentence ends on it;
4. ``last_number`` — else the last number of that sentence (or its last LaTeX value): in
   ``4 × 3 = 12, exactly 3 loads are needed`` the closing clause, not the product, concludes;
5. ``none`` — nothing above: the path states no value.

In the closing sentence ``$`` is currency or a math delimiter and is dropped either way
(``to get $56`` → ``56``). Conclusions are compared by math-verify (:func:`analysis.structure.roles.
equivalence_classes`), so ``0.5`` and ``\\frac{1}{2}`` agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from pr1_eval.grading.answer_text import (
    box_chain,
    clean_value,
    last_value,
    marker_matches,
    read_answer,
    read_boxes,
    values,
)

#: Every ``Conclusion.source``, in the order the rules are tried.
CONCLUSION_SOURCES: tuple[str, ...] = ("boxed", "final_answer", "answer_is", "last_equals", "last_number", "none")

_FINAL_RE = re.compile(r"final answer[ \t*_]*:", re.IGNORECASE)
_ANSWER_IS_RE = re.compile(r"\banswer\s*(?:is|=|:)\s*", re.IGNORECASE)
#: A sentence ends at a line break or at ``.``/``!``/``?`` followed by white space.
_SENTENCE_END_RE = re.compile(r"\n+|[.!?]+(?=\s)")
_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?%?")
_DIGIT_RE = re.compile(r"\d")
_MATH_DELIM_RE = re.compile(r"\\[()\[\]]|\$")
#: A parenthesis closing a sentence: an aside (``… = 44 (since 18 = 10 + 8).``), not the conclusion.
_TRAILING_ASIDE_RE = re.compile(r"\s*\([^()]{0,300}\)[\s.!?]*$")
#: Longest path tail read: conclusions sit at the end, and this bounds the work on huge paths.
_MAX_TAIL = 4000


@dataclass(frozen=True)
class Conclusion:
    """The value a path arrives at (``None`` when it states none) and the rule that found it
    (one of :data:`CONCLUSION_SOURCES`)."""

    text: str | None
    source: str


def path_conclusion(path_text: str, *, strict: bool = False) -> Conclusion:
    """The conclusion of one path's text (see the module docstring). Never raises (an internal
    failure reads as no conclusion) unless ``strict``, which the fuzz tests use."""
    try:
        return _conclude(path_text)
    except Exception:  # noqa: BLE001 - analysis must survive any model output
        if strict:
            raise
        return Conclusion(None, "none")


def _conclude(path_text: str) -> Conclusion:
    """:func:`path_conclusion` without its safety net."""
    text = path_text if isinstance(path_text, str) else ("" if path_text is None else str(path_text))
    text = text[-_MAX_TAIL:]
    boxed = read_boxes(box_chain(text))
    if boxed.text is not None:
        return Conclusion(boxed.text, "boxed")
    explicit = _explicit_answer(text)
    if explicit.text is not None:
        return explicit
    return _closing_value(text)


def _explicit_answer(text: str) -> Conclusion:
    """The last ``Final Answer:`` line or "answer is …" statement, read to its sentence end."""
    best: tuple[int, str] | None = None
    finals = [m.span() for m in marker_matches(_FINAL_RE, text, "final answer")]
    if finals:
        best = (finals[-1][1], "final_answer")
    for match in marker_matches(_ANSWER_IS_RE, text, "answer"):
        inside_final = any(start <= match.start() < end for start, end in finals[-8:])
        if not inside_final and (best is None or match.end() > best[0]):
            best = (match.end(), "answer_is")
    if best is None:
        return Conclusion(None, "none")
    end, source = best
    rest = text[end:].lstrip()
    stop = _SENTENCE_END_RE.search(rest)
    reading = read_answer(rest[: stop.start()] if stop else rest)
    return Conclusion(reading.text, source) if reading.text is not None else Conclusion(None, "none")


def _closing_value(text: str) -> Conclusion:
    """The value after the last ``=`` in the closing sentence, else its last number."""
    sentence = closing_sentence(text)
    if sentence is None:
        return Conclusion(None, "none")
    sentence = _MATH_DELIM_RE.sub(" ", sentence)
    without_aside = _TRAILING_ASIDE_RE.sub("", sentence)
    sentence = without_aside if _DIGIT_RE.search(without_aside) else sentence
    if "=" in sentence:  # two values after it are enough to know it is not one (the rest is not read)
        after = [v for v, _ in islice(values(sentence[sentence.rindex("=") + 1 :]), 2)]
        if len(after) == 1:  # the sentence ends on the computed value
            return _conclusion(after[0], "last_equals")
    latex = _last_latex_value(sentence)
    if latex is not None:
        return _conclusion(latex, "last_number")
    numbers = _NUMBER_RE.findall(sentence)
    return _conclusion(numbers[-1], "last_number") if numbers else Conclusion(None, "none")


def _last_latex_value(sentence: str) -> str | None:
    """The last of the sentence's :func:`values` when it holds a LaTeX backslash, else ``None``.
    Values are pieces of the sentence, so a sentence without a backslash (most closing
    sentences) is answered without reading its values; else only its last value is read
    (:func:`~pr1_eval.grading.answer_text.last_value`)."""
    last = last_value(sentence) if "\\" in sentence else None
    return last if last is not None and "\\" in last else None


def _conclusion(raw: str, source: str) -> Conclusion:
    text = clean_value(raw.strip().rstrip(",.;:"))
    return Conclusion(text, source) if text else Conclusion(None, "none")


def closing_sentence(text: str) -> str | None:
    """The last sentence of ``text`` that holds a digit (``None`` when no sentence does)."""
    bounds = [0, *(m.end() for m in _SENTENCE_END_RE.finditer(text)), len(text)]
    for start, end in zip(reversed(bounds[:-1]), reversed(bounds[1:]), strict=True):
        sentence = text[start:end]
        if _DIGIT_RE.search(sentence):
            return sentence.strip()
    return None


def conclude_all(texts: Sequence[str]) -> list[Conclusion]:
    """:func:`path_conclusion` of each text (the unit a worker process is handed: a chunk of texts)."""
    return [path_conclusion(text) for text in texts]
