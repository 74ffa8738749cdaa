"""Held-out agreement: 62 (prediction, gold, expected verdict) cases from nine public grader test
suites other than math-verify's and lighteval's (``heldout_cases.jsonl``; provenance in
``heldout_cases.md``), each graded as the answer a model states on its ``Final Answer:`` line
(``Final Answer: <prediction>``), under both answer policies, beside math-verify as other harnesses
call it (``verify(parse(gold), parse(prediction))``, defaults, a bare gold put in ``$…$``; the
same call as :mod:`test_reference_cases`, from ``tests/support/math_verify_reference.py``).

The cases are of the kinds issue 38 names: prose answer lines around the value (``The answer is
4``, ``Therefore the answer is -3``, ``The angle is [90].``), units, currency and percent beside
the value (``10\\text{ units}``, ``\\$10``, ``[45 degrees]``), and one answer that runs over lines.
The suites hold no interval or set written in words; those forms are pinned in
:mod:`test_answer_line_forms`.

Pinned (docs/reference/grading-agreement.md has the table), against each suite's expected verdict:

* ``lenient``: 61 of 62 (60 before ``[45 degrees]`` was read as 45). The one difference: SkyRL's
  rule reward compares strings, so ``\\boxed{0.5}`` is wrong against ``\\frac{1}{2}`` there; every
  value-equivalence grader (math-verify too) says equal.
* math-verify: 51 of 62. Its 11 differences, by kind (pr1-eval right on all but the string match):
  a value in square brackets (5; geometry3k's answer marker, ``The angle is [90].``), an explicit
  plus sign in prose (2; ``The answer is +7`` reads as a sum), an escaped dollar (2; ``\\$10`` does
  not parse as a bare prediction), an approximation after the value (1; ``… \\approx 0.577`` reads the
  decimal) and the string match above (1).
* ``paper``: 60 of 62, unchanged by the lenient forms: it reads ``[45 degrees]`` as ``[45`` (wrong)
  and shares the string-match difference. Its ``correct_paper`` column is the official checker.

No new false positive: every case the suites expect to be wrong is wrong under both policies.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.math_verify_reference import harness_gold, math_verify

pytestmark = pytest.mark.slow

CASES_PATH = Path(__file__).with_name("heldout_cases.jsonl")
STRING_MATCH = ("The answer is \\boxed{0.5}", "\\frac{1}{2}")


def load_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CASES_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]


def answer_line(prediction: str) -> str:
    """The response a case becomes: the prediction stated on a ``Final Answer:`` line."""
    return f"Final Answer: {prediction}"


def math_verify_kind(case: dict[str, Any]) -> str:
    """Why math-verify's default verdict differs from the suite's on ``case`` (see the docstring)."""
    pred = case["prediction"]
    if (pred, case["gold"]) == STRING_MATCH:
        return "the suite compares strings"
    if "[" in pred:
        return "a value in square brackets"
    if "+7" in pred:
        return "an explicit plus sign in prose"
    if pred.startswith("\\$"):
        return "an escaped dollar"
    if "\\approx" in pred:
        return "an approximation after the value"
    return "unexplained"


@pytest.fixture(scope="module")
def graded() -> dict[str, Any]:
    from pr1_eval.grading import grade_responses
    from pr1_eval.grading.paper import paper_correct

    cases = load_cases()
    items = [(answer_line(c["prediction"]), c["gold"]) for c in cases]
    return {
        "cases": cases,
        "lenient": grade_responses(items, policy="lenient", timeout_s=30),
        "paper": grade_responses(items, policy="paper", timeout_s=30),
        "official": [paper_correct(response, gold) for response, gold in items],
        "math_verify": [math_verify(harness_gold(c["gold"]), c["prediction"]) for c in cases],
    }


def test_the_cases_are_the_suites_cases(graded: dict[str, Any]) -> None:
    cases = graded["cases"]
    assert len(cases) == 62
    assert len({c["source"] for c in cases}) == 8  # verl-project/verl gives two files: nine suites
    assert len({(c["source"], c["file"]) for c in cases}) == 9
    assert all(len(c["commit"]) == 40 for c in cases)
    assert Counter(c["expected"] for c in cases) == {True: 50, False: 12}
    assert Counter(c["kind"] for c in cases) == {"sentence": 50, "unit": 11, "multiline": 1}
    assert all(r.grade_status in ("ok", "no_answer") for r in graded["lenient"] + graded["paper"])


def test_lenient_against_the_suites_expected_verdicts(graded: dict[str, Any]) -> None:
    cases, ours = graded["cases"], graded["lenient"]
    misses = [(c["prediction"], c["gold"]) for c, r in zip(cases, ours, strict=True) if bool(r.correct) != c["expected"]]
    assert misses == [STRING_MATCH]
    assert len(cases) - len(misses) == 61


def test_math_verify_against_the_suites_expected_verdicts(graded: dict[str, Any]) -> None:
    cases, theirs = graded["cases"], graded["math_verify"]
    kinds = Counter(math_verify_kind(c) for c, m in zip(cases, theirs, strict=True) if m != c["expected"])
    assert kinds == {"a value in square brackets": 5, "an explicit plus sign in prose": 2, "an escaped dollar": 2,
                     "an approximation after the value": 1, "the suite compares strings": 1}
    assert sum(m == c["expected"] for c, m in zip(cases, theirs, strict=True)) == 51


def test_lenient_reaches_math_verify_without_a_false_positive(graded: dict[str, Any]) -> None:
    cases, ours, theirs = graded["cases"], graded["lenient"], graded["math_verify"]
    for case, result, mv in zip(cases, ours, theirs, strict=True):
        if mv == case["expected"]:
            assert bool(result.correct) == case["expected"], case  # never worse than math-verify
        if not case["expected"] and (case["prediction"], case["gold"]) != STRING_MATCH:
            assert not result.correct, case


def test_paper_policy_is_unchanged_by_the_lenient_forms(graded: dict[str, Any]) -> None:
    cases, paper = graded["cases"], graded["paper"]
    misses = [(c["prediction"], r.extracted_answer) for c, r in zip(cases, paper, strict=True)
              if bool(r.correct) != c["expected"]]
    assert misses == [("[45 degrees]", "[45"), (STRING_MATCH[0], "0.5")]
    assert [r.correct_paper for r in paper] == graded["official"]  # the paper column is the official checker
    assert not any(r.correct_paper for c, r in zip(cases, paper, strict=True) if not c["expected"])
