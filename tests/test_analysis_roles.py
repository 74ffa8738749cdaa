"""Block roles and summary consistency on hand-made blocks (math-equivalent answers agree)."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_fixtures import block, make_record, response, write_run

from analysis.loader import load_runs
from analysis.roles import block_role, equivalence_classes, response_consistency, role_shares
from analysis.summary import analyze, to_json


@pytest.mark.parametrize(("classes", "role"), [
    ([0, 0], "verification"),
    ([0, 0, None], "verification"),
    ([0, 1], "exploration"),
    ([0, 0, 1], "exploration"),
    ([0, None], "undetermined"),
    ([None, None], "undetermined"),
    ([], "undetermined"),
])
def test_block_role(classes: list, role: str) -> None:
    assert block_role(classes) == role


def test_equivalence_without_and_with_math_verify() -> None:
    assert equivalence_classes([None, " 7 ", "7", None]) == [None, 0, 0, None]
    assert equivalence_classes(["\\frac{1}{2}", "0.5", "3"]) == [0, 0, 1]


@pytest.mark.parametrize(("answers", "final", "consistent", "reason"), [
    (["3", "3", "4"], "3", True, None),
    (["3", "3", "4"], "4", False, None),
    (["3", "4"], "3", None, "no majority"),
    (["3", "3"], None, None, "no final answer"),
    ([None, None], "3", None, "no path answer"),
    (["6/2", "3", None], "3.0", True, None),
])
def test_summary_consistency(answers: list, final: str | None, consistent: bool | None, reason: str | None) -> None:
    out = response_consistency(answers, final)
    assert out["consistent"] is consistent and out["reason"] == reason


def test_roles_through_the_loader(tmp_path: Path) -> None:
    verify = block(["so Final Answer: 12", "check: \\boxed{12}"])
    explore = block(["Final Answer: 12", "Final Answer: 13"])
    unknown = block(["maybe 12", "Final Answer: 12"])
    records = [make_record("t", "p0", 0, response(verify, final="12")),
               make_record("t", "p1", 0, response(explore, unknown, final="13")),
               make_record("t", "p2", 0, response("no block", final="1"))]
    write_run(tmp_path, "r", records)
    analysis = analyze(load_runs(tmp_path, tokenizer=None))
    assert analysis.blocks["role"].tolist() == ["verification", "exploration", "undetermined"]
    assert analysis.blocks["n_answering_paths"].tolist() == [2, 2, 1]
    roles = to_json(analysis)["runs"][0]["roles"]
    assert roles == {"verification": pytest.approx(1 / 3), "exploration": pytest.approx(1 / 3),
                     "undetermined": pytest.approx(1 / 3)}
    responses = analysis.responses.set_index("problem_id")
    assert bool(responses.loc["p0", "consistent"]) is True
    # p1: paths answer 12, 13, 12 -> majority 12, final 13
    assert responses.loc["p1", "majority_answer"] == "12" and bool(responses.loc["p1", "consistent"]) is False
    assert "p2" not in responses.index
    assert analysis.runs.iloc[0]["summary_consistency"] == 0.5


def test_role_shares_without_blocks_are_null(tmp_path: Path) -> None:
    write_run(tmp_path, "r", [make_record("t", "p0", 0, response("plain"))])
    analysis = analyze(load_runs(tmp_path, tokenizer=None))
    assert role_shares(analysis.blocks, by=["run"]).empty
    row = to_json(analysis)["runs"][0]
    assert row["roles"] == {"verification": None, "exploration": None, "undetermined": None}
    assert row["paths_per_block"] is None and row["bleu_mean"] is None and row["first_block_rel_pos"] is None
