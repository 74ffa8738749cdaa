"""Answer lines the grader used to misread, each pinned against math-verify's own verdict on the
bare answer: an answer that runs past the end of its ``Final Answer:`` line (a ``pmatrix`` or
``cases`` block over several lines, a lead-in then display math, a system one equation a line),
an interval or set written as an inequality or in words, a compound unit or a temperature scale
beside the value, and a concluding sentence after a worked one. Read under the ``lenient`` policy
only (the ``paper`` policy reads these lines as before): an empty set in words or as ``\\varnothing``
(``no solution``, the gold ``\\text{no solution}`` too) and a bracketed value with a unit word
(``[45 degrees]``, geometry3k's answer marker).

For every row, pr1-eval grades ``Final Answer: <line>`` against the gold, and math-verify itself
grades the bare answer (``verify(parse("$gold$"), parse("$bare$"))``): the two must agree. The
rows with a wrong gold must stay wrong, and the negated lines stay "no answer" or wrong.
"""

from __future__ import annotations

import pytest
from math_verify import parse, verify

from pr1_eval.grading import grade_responses
from pr1_eval.grading.intervals import empty_set_in_words, gold_in_words, interval_in_words, interval_of_inequality

# (text after "Final Answer:", gold, the bare answer it states)
FORMS: list[tuple[str, str, str]] = [
    # past the end of the line
    ("The matrix is\n$$\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}$$", "\\begin{pmatrix}1\\\\2\\end{pmatrix}",
     "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
    ("The solutions are:\n\\[x = 1, x = 2\\]", "1, 2", "x = 1, x = 2"),
    ("Answer \\[ \n 9 \n \\]", "9", "9"),
    ("$\\left(\n3, \\frac{\\pi}{2}\n\\right)$", "(3, \\frac{\\pi}{2})", "\\left(3, \\frac{\\pi}{2}\\right)"),
    ("\n\\[\n\\begin{cases}\nx = 1 \\\\\ny = 2\n\\end{cases}\n\\]", "x=1, y=2", "x = 1, y = 2"),
    ("\\begin{aligned}\nx &= 1 \\\\\ny &= 2\n\\end{aligned}", "x=1, y=2", "x = 1, y = 2"),
    ("$x = 1$\n$y = 2$", "x=1, y=2", "x = 1, y = 2"),
    ("x = 1,\ny = 2", "x=1, y=2", "x = 1, y = 2"),
    # intervals and sets
    ("$x > 2$", "(2, \\infty)", "(2, \\infty)"),
    ("$x > 2$", "x > 2", "(2, \\infty)"),
    ("$-1 < x \\le 3$", "(-1, 3]", "(-1, 3]"),
    ("$x \\neq 1$", "(-\\infty, 1) \\cup (1, \\infty)", "(-\\infty, 1) \\cup (1, \\infty)"),
    ("all real numbers", "(-\\infty, \\infty)", "(-\\infty, \\infty)"),
    ("all real numbers greater than 2", "(2, \\infty)", "(2, \\infty)"),
    ("all real numbers except $-\\frac{1}{2}$", "(-\\infty,-\\frac12)\\cup(-\\frac12,\\infty)",
     "(-\\infty,-\\frac12)\\cup(-\\frac12,\\infty)"),
    ("all real numbers not equal to 1", "(-\\infty, 1) \\cup (1, \\infty)", "(-\\infty, 1) \\cup (1, \\infty)"),
    ("All real numbers $x$ such that $x > 2$.", "(2, \\infty)", "(2, \\infty)"),
    ("x is greater than or equal to -1", "[-1, \\infty)", "[-1, \\infty)"),
    ("The domain is all real numbers except 1.", "(-\\infty, 1) \\cup (1, \\infty)", "(-\\infty, 1) \\cup (1, \\infty)"),
    ("all real numbers between 1 and 5, inclusive", "[1, 5]", "[1, 5]"),
    # units and degrees beside the value
    ("45^\\circ C", "45", "45"),
    ("5 m/s", "5", "5"),
    ("100 km/h", "100", "100"),
    ("x = 10 ft^2", "10", "10"),
    # a concluding sentence after a worked one
    ("donc 353 g - 79 g = 274 g. Donc, il a déjà 79 g de cire.", "79", "79"),
    ("The answer is 12. So there are 3 more than 9.", "12", "12"),  # a stated answer stays first
]

# (text after "Final Answer:", gold): a wrong answer in each form, and negated lines; all wrong
WRONG: list[tuple[str, str]] = [
    ("The matrix is\n$$\\begin{pmatrix} 1 \\\\ 3 \\end{pmatrix}$$", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    ("$x = 1$\n$y = 3$", "x=1, y=2"),
    ("$\\begin{cases} x = 1 \\\\ y = 3 \\end{cases}$", "x=1, y=2"),
    ("$x > 2$", "[2, \\infty)"),
    ("$x > 2$", "2"),
    ("$-1 < x \\le 3$", "(-1, 3)"),
    ("all real numbers greater than 2", "(3, \\infty)"),
    ("all real numbers less than 4", "(-\\infty, 4]"),
    ("x is not greater than 2", "(2, \\infty)"),
    ("5 m/s", "6"),
    ("5,\nx = 3", "x = 3"),  # a value, then an equation on the next line: the line alone
    ("The answer is not 5.", "5"),
    ("It is not 5. So it is not 6 either.", "6"),
    ("The answer is not 5. So it is 6.", "5"),
]


# Read by the lenient policy only (pr1_eval.grading.policy.lenient_value; the paper policy reads
# these lines as it did): (text after "Final Answer:", gold, the bare answer it states)
LENIENT_FORMS: list[tuple[str, str, str]] = [
    ("[45 degrees]", "45", "45"),  # geometry3k's bracket marker around a value and a unit word
    ("no solution", "\\emptyset", "\\emptyset"),
    ("There are no real solutions.", "\\emptyset", "\\emptyset"),
    ("The equation has no real solutions.", "\\emptyset", "\\emptyset"),
    ("the empty set", "\\emptyset", "\\emptyset"),
    ("$\\varnothing$", "\\emptyset", "\\emptyset"),
    ("\\boxed{\\text{No solution}}", "\\emptyset", "\\emptyset"),
    ("no solution", "\\text{no solution}", "\\emptyset"),  # a gold in words is read as the set too
    ("all real numbers", "\\text{all real numbers}", "(-\\infty, \\infty)"),
]

# (text after "Final Answer:", gold): wrong under the lenient policy
LENIENT_WRONG: list[tuple[str, str]] = [
    ("[45 degrees]", "46"),
    ("[2, 5)", "[2, 5]"),  # a half-open interval keeps its brackets
    ("There is no solution.", "5"),
    ("5", "\\emptyset"),
    ("5", "\\text{no solution}"),
    ("not the empty set", "\\emptyset"),
    ("It is not true that there is no solution.", "\\emptyset"),
    ("x = 2, no other solution", "\\emptyset"),
    ("(3, \\infty)", "\\text{all real numbers greater than 2}"),
]


def _grade(rows: list[tuple[str, str]], policy: str = "paper") -> list[bool | None]:
    pairs = [(f"Work.\nFinal Answer: {a}", g) for a, g in rows]
    return [r.correct for r in grade_responses(pairs, timeout_s=30, policy=policy)]


def test_each_form_agrees_with_math_verify_on_the_bare_answer() -> None:
    got = _grade([(line, gold) for line, gold, _ in FORMS])
    expected = [bool(verify(parse(f"${gold}$"), parse(f"${bare}$"))) for _, gold, bare in FORMS]
    assert all(expected), "every bare answer is right by math-verify itself"
    assert got == expected


def test_wrong_answers_and_negations_stay_wrong() -> None:
    assert _grade(WRONG) == [False] * len(WRONG)
    assert _grade(WRONG, "lenient") == [False] * len(WRONG)


def test_lenient_forms_agree_with_math_verify_and_leave_the_paper_reading_alone() -> None:
    rows = [(line, gold) for line, gold, _ in LENIENT_FORMS]
    expected = [bool(verify(parse(f"${gold}$"), parse(f"${bare}$"))) for _, gold, bare in LENIENT_FORMS]
    assert expected == [True] * 7 + [False] * 2  # math-verify reads a gold in words as symbols
    assert _grade(rows, "lenient") == [True] * len(rows)
    # the paper policy reads these lines as before: "[45", the words, "\\varnothing"; it matches a
    # "no solution" line to the gold in the same words only
    assert _grade(rows) == [False] * 7 + [True, False]


def test_lenient_wrong_forms_stay_wrong() -> None:
    assert _grade(LENIENT_WRONG, "lenient") == [False] * len(LENIENT_WRONG)


@pytest.mark.parametrize(
    ("text", "interval"),
    [
        ("x \\geq 2", "[2, \\infty)"),
        ("2 < x", "(2, \\infty)"),
        ("0 \\le x < 1", "[0, 1)"),
        ("x > y", None),  # a relation between unknowns, not an interval
        ("x = 2", None),
        ("1 < x > 2", None),
    ],
)
def test_interval_of_inequality(text: str, interval: str | None) -> None:
    assert interval_of_inequality(text) == interval


@pytest.mark.parametrize(
    ("text", "interval"),
    [
        ("all reals", "(-\\infty, \\infty)"),
        ("all x at most 3", "(-\\infty, 3]"),
        ("all real numbers between 1 and 5", "(1, 5)"),
        ("All real numbers except x = -2", "(-\\infty, -2) \\cup (-2, \\infty)"),
        ("all real numbers except $x = 3$.", "(-\\infty, 3) \\cup (3, \\infty)"),
        ("all real numbers greater than y", None),
        ("all of them", None),
        ("x is not greater than 2", None),
        ("There are all real numbers greater than 2 apples", None),
    ],
)
def test_interval_in_words(text: str, interval: str | None) -> None:
    assert interval_in_words(text) == interval


@pytest.mark.parametrize(
    ("text", "empty"),
    [
        ("No solution.", "\\emptyset"),
        ("\\text{no real roots}", "\\emptyset"),
        ("there are no values of $x$", "\\emptyset"),
        ("∅", "\\emptyset"),
        ("The solution set is empty", "\\emptyset"),
        ("no", None),
        ("none", None),  # "none of the above" is a choice, not a set
        ("no solution other than 2", None),
        ("not the empty set", None),
    ],
)
def test_empty_set_in_words(text: str, empty: str | None) -> None:
    assert empty_set_in_words(text) == empty


@pytest.mark.parametrize(
    ("gold", "read"),
    [
        ("\\text{No solution}", "\\emptyset"),
        ("$\\varnothing$", "\\emptyset"),
        ("\\text{all real numbers}", "(-\\infty, \\infty)"),
        ("(2, \\infty)", "(2, \\infty)"),
        ("\\text{odd}", "\\text{odd}"),
        ("5", "5"),
    ],
)
def test_gold_in_words(gold: str, read: str) -> None:
    assert gold_in_words(gold) == read
