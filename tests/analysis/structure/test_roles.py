"""Block roles and summary consistency: path conclusions, hand-made blocks (math-equivalent
answers agree), and real Parallel-R1 blocks labelled by hand (tests/data/block_role_labels.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.runs.loader import load_runs
from analysis.structure.conclusions import Conclusion, path_conclusion
from analysis.structure.roles import assign_roles, block_role, equivalence_classes, response_consistency, role_shares
from analysis.summary import analyze, to_json
from pr1_eval.protocol.parse import parse_structure
from tests.support.analysis_fixtures import block, make_record, response, write_run

DATA = Path(__file__).resolve().parents[2] / "data"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(("path", "expected"), [
    ("so the pair is \\boxed{(1, 2)} and then 7 = 7", Conclusion("(1, 2)", "boxed")),
    ("x = \\boxed{2} or x = \\boxed{3}. Check: 9 = 9", Conclusion("2, 3", "boxed")),
    ("Both ways: Final Answer: 12\nDone, 13 = 13", Conclusion("12", "final_answer")),
    ("So the answer is $\\frac{3}{4}$. Then 5 + 5 = 10.", Conclusion("\\frac{3}{4}", "answer_is")),
    ("Total: $4000 + $8000 + $6000 = $18000", Conclusion("18000", "last_equals")),
    ("Then L = 12.\nThis matches the count.", Conclusion("12", "last_equals")),
    ("Add 26 + 10 = 36, then 36 + 8 = 44 (since 18 = 10 + 8).", Conclusion("44", "last_equals")),
    ("Subtract $40 from $100 to get $60, then subtract $4 to get $56 (since 44 = 40 + 4).",
     Conclusion("56", "last_number")),
    ("Since each load holds 4, and 4 × 3 = 12, exactly 3 loads are needed.", Conclusion("3", "last_number")),
    ("so the novel has 300 / 2 = 150 pages.", Conclusion("150", "last_equals")),
    ("0.3 multiplied by 300 equals 90 pages.", Conclusion("90", "last_number")),
    ("The remaining fraction is \\(\\frac{1}{4}\\) of the amount.", Conclusion("\\frac{1}{4}", "last_number")),
    ("Same as above, no need to recompute.", Conclusion(None, "none")),
    ("", Conclusion(None, "none")),
])
def test_path_conclusion(path: str, expected: Conclusion) -> None:
    assert path_conclusion(path) == expected


LABELS = json.loads((DATA / "block_role_labels.json").read_text(encoding="utf-8"))["blocks"]
#: Blocks where the automatic role differs from the hand label, and why (read from the paths).
KNOWN_MISSES = {
    ("parallel-gsm8k-v2-222", 0): "path 1 lists three amounts; its closing sentence ends on Fred's $44, path 0 on Greg's $28",
    ("parallel-gsm8k-v2-325", 0): "path 2 says 'same as above' and states no number: undetermined",
    ("parallel-gsm8k-v2-363", 0): "1/4 x and 1/4 are the same fraction of the cookies, not the same expression",
    ("parallel-gsm8k-v2-242", 1): "path 2 defers to path 1 without a number: undetermined",
    ("parallel-gsm8k-v2-234", 0): "path 2 ends with the new total (10) after finding the same original count (8)",
    ("parallel-gsm8k-v2-127", 0): "'it takes 3 weeks to reach 6 sodas per week': the last number is not the conclusion",
    ("parallel-gsm8k-v2-290", 1): "path 2 rejects the other reading without a number: undetermined",
}


def test_hand_labelled_real_blocks() -> None:
    """At least 30 real blocks, labelled by reading their paths, agree with the automatic role on
    at least 85% (and on every random sample on its own)."""
    frame = pd.DataFrame([{"path_texts": b["paths"]} for b in LABELS])
    roles = assign_roles(frame)["role"].tolist()
    misses = {(b["row_id"], b["block_idx"]) for b, role in zip(LABELS, roles, strict=True) if role != b["label"]}
    assert len(LABELS) >= 30 and misses == set(KNOWN_MISSES)
    assert 1 - len(misses) / len(LABELS) >= 0.85  # 78 of 85
    for sample in ("random-1", "random-2", "random-3"):
        pairs = [(b["label"], role) for b, role in zip(LABELS, roles, strict=True) if b["sample"] == sample]
        assert sum(label == role for label, role in pairs) / len(pairs) >= 0.85, sample


def test_labelled_texts_are_the_real_paths() -> None:
    """The stored path texts are those the structure parser finds in the real traces (checked on the
    rows of the committed slice of parallel_gsm8k.jsonl)."""
    rows = {}
    with (FIXTURES / "parallel_gsm8k.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                rows[row["id"]] = row["response"]
    checked = 0
    for b in LABELS:
        if b["row_id"] in rows:
            text = rows[b["row_id"]]
            structure = parse_structure(text)
            assert b["paths"] == [text[p.start:p.end].strip() for p in structure.blocks[b["block_idx"]].paths]
            checked += 1
    assert checked >= 3


def test_real_traces_leave_few_blocks_undetermined() -> None:
    rows = []
    with (FIXTURES / "parallel_gsm8k.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                text = json.loads(line)["response"]
                rows += [{"path_texts": [text[p.start:p.end].strip() for p in b.paths]}
                         for b in parse_structure(text).blocks]
    roles = assign_roles(pd.DataFrame(rows))["role"]
    assert len(rows) >= 30
    assert (roles == "undetermined").mean() <= 0.2


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
    unknown = block(["maybe so", "Final Answer: 12"])
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


def test_the_overlapped_analysis_equals_the_sequential_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``analyze`` classes the conclusions on a background thread while it builds other tables;
    its blocks and responses tables carry what assign_roles and summary_consistency give run one
    after the other (math-equal forms included)."""
    from analysis.structure.roles import summary_consistency
    from analysis.summary import analyze

    monkeypatch.setenv("PR1_CACHE", "off")
    records = [make_record("t", "p0", 0, response(block(["so x = 0.5", "Final Answer: \\frac{1}{2}"]), final="1/2")),
               make_record("t", "p1", 0, response(block(["we get 12.", "we get 13."]),
                                                  block(["Final Answer: 12", "nothing"]), final="13")),
               make_record("t", "p2", 0, response(block(["\\boxed{x^2}", "\\boxed{x \\cdot x}"]), final="x^2")),
               make_record("t", "p3", 0, response("no block", final="1"))]
    write_run(tmp_path, "r", records)
    loaded = load_runs(tmp_path, tokenizer=None)
    expected_blocks = assign_roles(loaded.blocks)
    expected_responses = summary_consistency(loaded.samples, expected_blocks)
    analysis = analyze(loaded)
    pd.testing.assert_frame_equal(analysis.blocks[list(expected_blocks.columns)], expected_blocks)
    pd.testing.assert_frame_equal(analysis.responses, expected_responses)
    assert expected_blocks["role"].tolist() == ["verification", "exploration", "undetermined", "verification"]
    assert expected_responses["consistent"].tolist() == [True, False, True]
    empty = summary_consistency(loaded.samples, loaded.blocks.iloc[:0])
    assert empty.empty and list(empty.columns) == list(expected_responses.columns)
