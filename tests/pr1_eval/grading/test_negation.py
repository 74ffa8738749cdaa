"""A negated answer sentence states no answer (``pr1_eval.grading.negation``).

``Final Answer: The answer is not 5.`` was graded right against 5: the line fell through to
math-verify whole, and math-verify reads *the answer is … 5* as 5 (its own verdict on the bare
line is pinned below, so the test shows where the false positive came from). Such a line is now
no answer: ``grade_status='no_answer'``, ``correct=False`` — a verdict, not the ``correct=None``
of a grader that could not score. Its neighbours that do state a value keep their verdicts.
"""

from __future__ import annotations

import pytest
from math_verify import parse, verify

from pr1_eval.grading import extract_answer, grade_responses
from pr1_eval.grading.answer_text import read_answer

NO = (None, "negated", "no_answer", False)

# (text after "Final Answer:", gold, (extracted, rule, grade_status, correct))
LINES: list[tuple[str, str, tuple[str | None, str, str, bool]]] = [
    ("The answer is not 5.", "5", NO),
    ("The answer is not $5$.", "5", NO),
    ("It is not 5.", "5", NO),
    ("The answer isn't 5.", "5", NO),
    ("The answer isn’t 5.", "5", NO),
    ("The answer cannot be 5.", "5", NO),
    ("The answer is not equal to 5.", "5", NO),
    ("5 is not possible.", "5", NO),
    ("It is not 5 or 6.", "6", NO),
    ("There is no 5.", "5", NO),
    ("not 5", "5", NO),
    ("La respuesta no es 5.", "5", NO),
    # the value after the negation is stated: these stay right (or wrong) as the value says
    ("The answer is 5, not 6.", "5", ("5", "sentence", "ok", True)),
    ("The answer is 5, not 6.", "6", ("5", "sentence", "ok", False)),
    ("5, not 6", "5", ("5", "trailing_prose", "ok", True)),
    ("5 (not 6)", "5", ("5", "trailing_prose", "ok", True)),
    ("The answer is 5 not 6", "5", ("The answer is 5 not 6", "line", "ok", True)),
    ("The answer is not 6. It is 5.", "5", ("5", "sentence", "ok", True)),
    ("The answer is not 5. It is 6.", "5", ("6", "sentence", "ok", False)),
    # a negation about something else than the answer: the line is read whole, as before
    ("$x=5$ (x is not 0)", "5", ("x=5", "line", "ok", True)),
    ("The answer is not 6 but 5.", "5", ("The answer is not 6 but 5", "line", "ok", False)),
]


def test_math_verify_alone_reads_the_rejected_value_as_the_answer() -> None:
    assert verify(parse("5"), parse("$The answer is not 5$")) is True
    assert verify(parse("5"), parse("$The answer cannot be 5$")) is True


@pytest.mark.parametrize(("line", "gold", "expected"), LINES)
def test_negated_answer_lines(line: str, gold: str, expected: tuple[str | None, str, str, bool]) -> None:
    response = f"Some work.\nFinal Answer: {line}"
    answer = extract_answer(response)
    [result] = grade_responses([(response, gold)], workers=0)
    assert (answer.text, answer.rule, result.grade_status, result.correct) == expected
    if expected[0] is None:
        assert (answer.source, result.answer_source, result.grade_error) == ("none", "none", None)


def test_a_negated_last_line_does_not_fall_back_to_earlier_answers() -> None:
    for earlier in ("\\boxed{5}\n", "Final Answer: 5\nWait.\n"):
        response = f"{earlier}Final Answer: The answer is not 5."
        [result] = grade_responses([(response, "5")], workers=0)
        assert (result.extracted_answer, result.grade_status, result.correct) == (None, "no_answer", False)
    [result] = grade_responses([("Final Answer: 5\nFinal Answer:", "5")], workers=0)  # empty: tries the earlier
    assert (result.extracted_answer, result.correct) == ("5", True)


def test_read_answer_reports_the_negated_rule() -> None:
    assert (read_answer("The answer is not 5.").text, read_answer("The answer is not 5.").rule) == (None, "negated")
    assert read_answer("").rule == "none"
