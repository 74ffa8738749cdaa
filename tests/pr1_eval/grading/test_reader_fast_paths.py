"""The answer-line readers' pre-checks skip work, never change a reading: on thousands of varied
texts (markers in every letter case, Unicode case folds such as ``ſ`` and ``K``, LaTeX, paths,
prose) the grader's ``extract_answer`` and the analysis's ``path_conclusion`` give what they give
with every pre-check turned off."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

import analysis.structure.conclusions as conclusions
import pr1_eval.grading.answer_text as answer_text
import pr1_eval.grading.extract as extract
from pr1_eval.grading.answer_text import last_value, marker_matches, read_answer, values

DATA = Path(__file__).resolve().parents[2] / "data"
_PIECES = [
    "Final Answer:", "final answer :", "FINAL ANSWER**:", "Final  Answer:", "ﬁnal answer:", "final anſwer:",
    "the answer is", "ANSWER:", "answer =", "Answer is", "answers", "\\boxed{12}", "\\boxed{\\frac{1}{2}}",
    "\\fbox{3}", "$x$", "$\\frac{3}{4}$", "\\(5\\)", "\\[x^2\\]", "$$7$$", "12", "3.5", "-4", "1,000", "1/2", "=",
    " = ", ".", ". ", "!", "?", "\n", "\n\n", ",", "(since 18 = 10 + 8)", "so", "we get", "total", "pages", "数学",
    "答案是5。", "é", "K", "ſ", "\\sqrt{2}", "\\pi", "x", "and", "or", "not", "<Path>", "</Path>", "<Parallel>",
    "</Parallel>", "<Summary>", "</Summary>", "<|im_end|>", " ", "\t", "{", "}", "\\", "$",
]


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["", " ", "answer", "Final Answer: 5", "FINAL ANSWER: ſ5", "so the anſwer is 7.", "Final Answer: K"]
    cases = json.loads((DATA / "block_role_labels.json").read_text(encoding="utf-8"))["blocks"]
    texts += [path for case in cases for path in case["paths"]]
    for _ in range(n):
        words = [rng.choice(_PIECES) for _ in range(rng.choice([1, 3, 8, 20, 60]))]
        texts.append(rng.choice(["", " "]).join(words))
    return texts


TEXTS = _texts(0, 4000)


def test_texts_reach_every_rule() -> None:
    sources = {conclusions.path_conclusion(t).source for t in TEXTS}
    assert sources == set(conclusions.CONCLUSION_SOURCES)
    assert {extract.extract_answer(t).source for t in TEXTS} == {"final_answer", "boxed", "none"}
    assert sum(not t.isascii() for t in TEXTS) > 500 and sum(t.isascii() for t in TEXTS) > 500


@pytest.mark.parametrize("pattern", [extract._FINAL_RE, conclusions._FINAL_RE, conclusions._ANSWER_IS_RE])
def test_in_ascii_text_the_regex_matches_only_where_the_lowered_text_holds_the_word(pattern: re.Pattern[str]) -> None:
    """What ``marker_matches`` rests on; other text is read with ``finditer`` (a Unicode fold)."""
    word = "final answer" if "final" in pattern.pattern else "answer"
    texts = [*TEXTS, "FINAL ANSWER:", "Final Answer:", "ﬁnal answer:", "final anſwer:", "ANSWER IS", "anſwer is"]
    for text in texts:
        for match in pattern.finditer(text):
            assert not text.isascii() or text.lower().startswith(word, match.start()), repr(text)
    assert pattern.search("final anſwer: is") and list(marker_matches(pattern, "final anſwer: is", word))
    assert not list(marker_matches(pattern, "no marker here", word))


@pytest.mark.parametrize(("pattern", "word"), [(extract._FINAL_RE, "final answer"), (conclusions._FINAL_RE, "final answer"),
                                             (conclusions._ANSWER_IS_RE, "answer")])
def test_marker_matches_are_what_finditer_finds(pattern: re.Pattern[str], word: str) -> None:
    texts = [*TEXTS, "final answer final answer: 5", "Final Answer:: 4 final answer *: 3", "answer answer is 2",
             "theanswer is 1. answer: 2; answer=3", "FINAL ANSWER:answer is", "ﬁnal answer: 1 Final Answer: 2"]
    found = 0
    for text in texts:
        expected = [m.span() for m in pattern.finditer(text)]
        assert [m.span() for m in marker_matches(pattern, text, word)] == expected, repr(text)
        found += len(expected)
    assert found > 1000


def test_fast_readers_equal_the_slow_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = [(extract.extract_answer(t, strict=True), conclusions.path_conclusion(t, strict=True)) for t in TEXTS]

    def every_value(sentence: str) -> str | None:
        found = [v for v, _ in values(sentence)]
        return found[-1] if found and "\\" in found[-1] else None

    monkeypatch.setattr(extract, "marker_matches", lambda pattern, text, word: pattern.finditer(text))
    monkeypatch.setattr(conclusions, "marker_matches", lambda pattern, text, word: pattern.finditer(text))
    monkeypatch.setattr(conclusions, "_last_latex_value", every_value)
    monkeypatch.setattr(answer_text, "_BARE_NUMBER_RE", re.compile(r"(?!)"))
    slow = [(extract.extract_answer(t, strict=True), conclusions.path_conclusion(t, strict=True)) for t in TEXTS]
    for text, a, b in zip(TEXTS, fast, slow, strict=True):
        assert a == b and a[0].rule == b[0].rule, repr(text)


def test_last_value_is_the_last_of_values() -> None:
    rng = random.Random(5)
    sentences = [*TEXTS, *(" ".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40))) for _ in range(3000))]
    sentences += [conclusions._MATH_DELIM_RE.sub(" ", s) for s in sentences[:3000]]  # as _closing_value reads them
    seen = set()
    for sentence in sentences:
        found = [v for v, _ in values(sentence)]
        expected = found[-1] if found else None
        assert last_value(sentence) == expected, repr(sentence)
        seen.add(expected is None)
    assert seen == {True, False}


#: Answer lines around the bare-number fast path of ``read_answer``: numbers it takes, and near
#: misses it must leave to the rules (signs, separators, junk, other digits, emphasis, boxes).
_NUMBER_LINES = ["12", "0", "-4", "3.5", "-0.25", "007", " 12 ", "**7**", "_5_", "12.", "1.5.", "+5", "1e5", "1,000",
                 "1 000", "٣", "１２", "12%", "-", ".5", "5.", "$5$", "\\boxed{5}", "5 since x", "12 apples", "--3",
                 "3.5.6", "12\n", "12;", "-12.000", "99999999999999999999"]


def test_bare_numbers_read_as_the_rules_read_them(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    lines = [*_NUMBER_LINES, *(rng.choice(["", "-"]) + str(rng.randint(0, 10**rng.randint(1, 12)))
                               + rng.choice(["", f".{rng.randint(0, 999)}"]) for _ in range(500))]
    fast = [read_answer(line) for line in lines]
    monkeypatch.setattr(answer_text, "_BARE_NUMBER_RE", re.compile(r"(?!)"))
    slow = [read_answer(line) for line in lines]
    for line, a, b in zip(lines, fast, slow, strict=True):
        assert a == b, repr(line)
    assert sum(r.rule == "line" and r.text == line for r, line in zip(fast, lines, strict=True)) > 500
