"""Agreement measured, not assumed: pr1-eval's verdicts beside the references on 1,880 generated
(response, gold) pairs (:mod:`agreement_pairs`: seven answer forms × seven ways of stating them,
each against its own gold and a wrong one).

* Under ``--answer-policy lenient`` pr1-eval agrees with math-verify run as other harnesses run it
  (``verify(parse("$gold$"), parse(response))``, its default configs) on every pair but three kinds,
  and on those pr1-eval's verdict is the true one: an answer stated only inside a ``<Path>``
  (math-verify reads it, pr1-eval never does), plain-text radicals and mixed numbers (``3 sqrt(5)``,
  ``137 1/2``: math-verify reads ``3`` and ``137 · 1/2``), and a plain fraction before a full stop
  (math-verify reads ``5/12.`` as a float division and its comparison then hangs on rounding).
* Under ``--answer-policy paper`` pr1-eval's ``correct`` agrees with the official ``math_dapo``
  checker (``correct_paper``, :mod:`pr1_eval.grading.paper`) on every pair but two kinds: a boxed
  answer with no ``Final Answer:`` line (the official checker reads only that line) and a plain
  fraction on the ``Final Answer:`` line against a LaTeX gold (equal values, different strings).

The counts are pinned (the pairs are seeded), and docs/reference/grading.md lists them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.pr1_eval.grading.agreement_pairs import Pair, generate_pairs

pytestmark = pytest.mark.slow

PLAIN_STATEMENTS = ("sentence_plain", "final_answer_plain")


def lenient_kind(pair: Pair) -> str:
    """Which documented difference from math-verify a pair may show."""
    if pair.kind == "inside_path":
        return "answer only inside a path"
    if pair.kind in PLAIN_STATEMENTS and pair.form in ("radical", "mixed_number"):
        return "plain-text radical or mixed number"
    if pair.kind == "sentence_plain" and pair.form == "fraction":
        return "plain fraction before a full stop"
    return "none"


def paper_kind(pair: Pair) -> str:
    """Which documented difference from the official checker a pair may show."""
    if pair.kind == "boxed":
        return "boxed answer without a Final Answer line"
    if pair.kind == "final_answer_plain" and pair.form == "fraction":
        return "plain fraction on the Final Answer line"
    return "none"


@pytest.fixture(scope="module")
def verdicts() -> dict[str, Any]:
    from math_verify import parse, verify

    from pr1_eval.grading import grade_responses
    from pr1_eval.grading.paper import paper_correct

    pairs = generate_pairs()
    items = [(p.response, p.gold) for p in pairs]
    return {
        "pairs": pairs,
        "math_verify": [bool(verify(parse(f"${p.gold}$"), parse(p.response))) for p in pairs],
        "official": [paper_correct(p.response, p.gold) for p in pairs],
        "lenient": grade_responses(items, policy="lenient"),  # the shared grading pool
        "paper": grade_responses(items, policy="paper"),
    }


def test_the_pairs_cover_every_form_and_statement(verdicts: dict[str, Any]) -> None:
    pairs = verdicts["pairs"]
    assert len(pairs) == 1880
    assert len({p.kind for p in pairs}) == 7 and len({p.form for p in pairs}) == 7
    assert sum(p.right for p in pairs) == len(pairs) // 2
    assert all(r.grade_status in ("ok", "no_answer") for r in verdicts["lenient"] + verdicts["paper"])


def test_lenient_agrees_with_math_verify_but_for_three_kinds_where_it_is_right(verdicts: dict[str, Any]) -> None:
    differences: Counter[str] = Counter()
    for pair, ours, theirs in zip(verdicts["pairs"], verdicts["lenient"], verdicts["math_verify"], strict=True):
        if bool(ours.correct) != theirs:
            differences[lenient_kind(pair)] += 1
            assert bool(ours.correct) == (pair.right and pair.kind != "inside_path"), pair
    assert differences == {"answer only inside a path": 140, "plain-text radical or mixed number": 80,
                           "plain fraction before a full stop": 1}


def test_lenient_is_right_on_every_answer_outside_a_path(verdicts: dict[str, Any]) -> None:
    for pair, ours in zip(verdicts["pairs"], verdicts["lenient"], strict=True):
        assert bool(ours.correct) == (pair.right and pair.kind != "inside_path"), pair


def test_paper_policy_agrees_with_the_official_checker_but_for_two_kinds(verdicts: dict[str, Any]) -> None:
    differences: Counter[str] = Counter()
    for pair, ours, official in zip(verdicts["pairs"], verdicts["paper"], verdicts["official"], strict=True):
        assert ours.correct_paper == official  # the paper column is the official checker itself
        if bool(ours.correct) != official:
            differences[paper_kind(pair)] += 1
            assert ours.correct and pair.right and not official, pair  # math-verify's equality, the checker's strings
    assert differences == {"boxed answer without a Final Answer line": 140,
                           "plain fraction on the Final Answer line": 20}


def test_prose_answers_are_no_answer_under_paper_and_read_under_lenient(verdicts: dict[str, Any]) -> None:
    prose = [i for i, p in enumerate(verdicts["pairs"]) if p.kind.startswith("sentence")]
    assert {verdicts["paper"][i].grade_status for i in prose} == {"no_answer"}
    assert {verdicts["lenient"][i].answer_source for i in prose} == {"sentence"}
