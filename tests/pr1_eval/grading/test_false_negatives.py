"""Grader false negatives fixed, each pinned beside math-verify's own verdict on the bare answer.

For every case the test asks math-verify itself (``verify(parse("$gold$"), parse("$answer$"))``)
and pr1-eval's grader (a response ending ``Final Answer: answer``). Where math-verify is right,
pr1-eval must be right too; the rows where math-verify alone is wrong (``x = 1,000`` read as a
tuple, a set with thousands separators, an answer written as a sentence) are the cases this
project reads better, and rows with a wrong answer must stay wrong (no new false positives).
"""

from __future__ import annotations

import pytest
from math_verify import parse, verify

from pr1_eval.grading import extract_answer, grade_responses
from pr1_eval.grading.verify import join_comma_thousands

# (answer as the model wrote it, gold, math-verify's verdict on "$answer$", pr1-eval's verdict)
CASES: list[tuple[str, str, bool, bool]] = [
    ("x = 1,000", "1000", False, True),
    ("x = 1{,}000", "1000", False, True),
    ("n = 12,345", "12345", False, True),
    ("1,000", "1000", True, True),
    ("x = 1000", "1000", True, True),
    ("12,345.5", "12345.5", True, True),
    ("\\{1,000, 2,000\\}", "\\{1000, 2000\\}", False, True),
    ("\\{1{,}000, 2{,}000\\}", "\\{1000, 2000\\}", False, True),
    ("1,000, 2,000", "1000, 2000", False, True),
    ("(1,000, 2)", "(1000, 2)", False, True),
    # stays as it was: lists, pairs, decimal commas and wrong answers
    ("x = 1,000", "1", False, False),
    ("x = 1,000", "1,000,000", False, False),
    ("1,2", "1,2", True, True),
    ("(3,125)", "3125", False, False),
    ("0,111", "111", False, False),
    ("1,000,2", "10002", False, False),
]

# (the answer text after "Final Answer:", gold, pr1-eval's verdict); sentences and continued math
LINES: list[tuple[str, str, bool]] = [
    ("The answer is 5.", "5", True),
    ("The answer is 6.", "5", False),
    ("La respuesta es 5", "5", True),
    ("La respuesta es 5.", "5", True),
    ("La réponse est 5.", "5", True),
    ("A resposta é 5.", "5", True),
    ("Die Antwort ist 12.", "12", True),
    ("Il y a 12 pommes.", "12", True),
    ("答案是5。", "5", True),
    ("Ответ: 5", "5", True),
    ("La respuesta no es 5.", "5", False),
    ("La respuesta es $\\frac{1}{2}$.", "\\frac12", True),
    ("$\\begin{pmatrix}\n1 \\\\\n2\n\\end{pmatrix}$", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", True),
    ("\\begin{pmatrix}\n1 \\\\\n2\n\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", True),
    ("$\\begin{pmatrix}\n1 \\\\\n3\n\\end{pmatrix}$", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", False),
    ("$\\frac{1}{\n2}$", "\\frac12", True),
]


def _grade(answer_lines: list[tuple[str, str]]) -> list[bool | None]:
    responses = [(f"Work.\nFinal Answer: {a}\n\nThat is all.", g) for a, g in answer_lines]
    return [r.correct for r in grade_responses(responses, timeout_s=30)]


@pytest.mark.parametrize(("answer", "gold", "mv", "ours"), CASES)
def test_math_verify_verdict_is_as_pinned(answer: str, gold: str, mv: bool, ours: bool) -> None:
    assert bool(verify(parse(f"${gold}$"), parse(f"${answer}$"))) is mv


def test_thousands_separators_against_math_verify() -> None:
    got = _grade([(a, g) for a, g, _, _ in CASES])
    for (answer, gold, mv, ours), correct in zip(CASES, got, strict=True):
        assert correct is ours, (answer, gold)
        assert not mv or correct, f"math-verify is right on {answer!r} against {gold!r} and pr1-eval is not"


def test_sentences_and_continued_math() -> None:
    got = _grade([(a, g) for a, g, _ in LINES])
    assert got == [ours for _, _, ours in LINES]


def test_continued_answer_stops_at_its_closing_and_at_tags() -> None:
    text = "Final Answer: $\\begin{pmatrix}\n1 \\\\\n2\n\\end{pmatrix}$\nThanks.\nMore text."
    assert extract_answer(text).text == "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"
    never_closed = "Final Answer: $\\frac{1}{\nand then prose forever"
    assert extract_answer(never_closed).text is not None and "prose" not in str(extract_answer(never_closed).text)
    at_tag = "Final Answer: $\\frac{1}{</Summary>\n2}$"
    assert "2}" not in str(extract_answer(at_tag).text)
    unclosed_dollar = "Final Answer: $5\nThe cost is $3 in total."  # a missing $, not a display
    assert "cost" not in str(extract_answer(unclosed_dollar).text)
    blank_line = "Final Answer: $\\begin{pmatrix}\n1\n\n2 \\end{pmatrix}$"  # math mode holds no blank line
    assert "2" not in str(extract_answer(blank_line).text)


def test_join_comma_thousands_only_where_unambiguous() -> None:
    assert join_comma_thousands("x = 1,000") == "x = 1000"
    assert join_comma_thousands("x = 1{,}000") == "x = 1000"
    assert join_comma_thousands("\\{1,000, 2,000\\}") == "\\{1000, 2000\\}"
    for unchanged in ("(3,125)", "1,2", "1,000,2", "0,111", "2,5", "1,0000"):
        assert join_comma_thousands(unchanged) == unchanged
