"""Structure statistics against hand counts (string searches, not the parser)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.runs.loader import load_runs
from analysis.structure.branching import STRUCTURE_COLUMNS, structure_stats
from tests.support.analysis_fixtures import block, make_record, response, write_run

S0 = response("Intro.", block(["a", "b"]), "Done.")
S1 = response("Longer intro text here.", block(["c", "d"]), "Mid.", block(["e", "f", "g"]), "End.", final="6")
S2 = response("No branching at all.")
S3 = "<Path>\nstray path\n</Path>\nFinal Answer: 5"  # malformed: a path outside a block


def _spans(text: str) -> list[tuple[int, int]]:
    """(start of <Parallel>, end of </Parallel>) by plain string search."""
    spans, pos = [], 0
    while (start := text.find("<Parallel>", pos)) >= 0:
        end = text.index("</Parallel>", start) + len("</Parallel>")
        spans.append((start, end))
        pos = end
    return spans


def _stats(tmp_path: Path, records: list, **kwargs: object) -> dict:
    write_run(tmp_path, "r", records, **kwargs)  # type: ignore[arg-type]
    table = structure_stats(load_runs(tmp_path, tokenizer=None).samples)
    assert list(table.columns) == ["run", "task", *STRUCTURE_COLUMNS]
    assert len(table) == 1
    return table.iloc[0].to_dict()


def test_hand_counted_run(tmp_path: Path) -> None:
    records = [make_record("t", "p0", 0, S0, correct=True), make_record("t", "p0", 1, S1, correct=False),
               make_record("t", "p1", 0, S2, correct=True), make_record("t", "p1", 1, S3, correct=None)]
    row = _stats(tmp_path, records)
    assert row["n_samples"] == 4 and row["n_parallel"] == 2
    assert row["parallel_ratio"] == 0.5
    assert row["blocks_per_response"] == 0.75 and row["blocks_per_parallel_response"] == 1.5
    assert row["paths_per_block"] == pytest.approx(7 / 3)
    assert row["format_ok_ratio"] == 0.75
    assert row["n_scored"] == 3 and row["accuracy"] == pytest.approx(2 / 3)
    assert row["accuracy_with_block"] == 0.5 and row["accuracy_without_block"] == 1.0
    rel = [s / len(t) for t in (S0, S1) for s, _ in _spans(t)]
    assert row["first_block_rel_pos"] == pytest.approx((rel[0] + rel[1]) / 2)
    assert row["block_rel_pos"] == pytest.approx(sum(rel) / 3)
    inside = sum(e - s for t in (S0, S1) for s, e in _spans(t))
    assert row["in_block_share"] == pytest.approx(inside / sum(len(t) for t in (S0, S1, S2, S3)))
    assert row["position_unit"] == "char" and row["in_block_unit"] == "char"
    assert row["notes"] == ""


def test_token_units(tmp_path: Path) -> None:
    records = [make_record("t", "p0", 0, S0, tokens=True), make_record("t", "p1", 0, S2, tokens=True)]
    row = _stats(tmp_path, records)
    words = S0.split()
    start, end = words.index("<Parallel>"), words.index("</Parallel>") + 1
    assert row["first_block_rel_pos"] == pytest.approx(start / len(words))
    assert row["in_block_share"] == pytest.approx((end - start) / (len(words) + len(S2.split())))
    assert row["position_unit"] == "token" and row["in_block_unit"] == "token"


def test_no_blocks_and_nothing_graded_give_nulls_and_notes(tmp_path: Path) -> None:
    row = _stats(tmp_path, [make_record("t", "p0", 0, S2), make_record("t", "p0", 1, S2)])
    assert row["parallel_ratio"] == 0.0 and row["blocks_per_response"] == 0.0
    for key in ("paths_per_block", "first_block_rel_pos", "block_rel_pos", "blocks_per_parallel_response",
                "accuracy", "accuracy_with_block", "accuracy_without_block", "position_unit"):
        assert row[key] is None, key
    assert row["in_block_share"] == 0.0
    assert "no parallel blocks" in row["notes"] and "no graded responses" in row["notes"]


def test_single_sample_and_empty_response(tmp_path: Path) -> None:
    row = _stats(tmp_path, [make_record("t", "p0", 0, "", correct=False)])
    assert row["n_samples"] == 1 and row["accuracy"] == 0.0 and row["accuracy_with_block"] is None
    assert row["in_block_share"] is None
    assert "single sample" in row["notes"] and "no scored response has a block" in row["notes"]


def test_groups_by_any_keys(tmp_path: Path) -> None:
    write_run(tmp_path, "a", [make_record("t", "p0", 0, S0), make_record("u", "p0", 0, S2)], step=1)
    write_run(tmp_path, "b", [make_record("t", "p0", 0, S2)], step=2)
    samples = load_runs(tmp_path, tokenizer=None).samples
    by_run_task = structure_stats(samples)
    assert list(zip(by_run_task["run"], by_run_task["task"], by_run_task["parallel_ratio"], strict=True)) == [
        ("a", "t", 1.0), ("a", "u", 0.0), ("b", "t", 0.0)]
    by_task = structure_stats(samples, by=["task"])
    assert dict(zip(by_task["task"], by_task["parallel_ratio"], strict=True)) == {"t": 0.5, "u": 0.0}


def test_inside_length_over_arrays_equals_the_pairwise_sum() -> None:
    """The flat-array sum of (end - start) equals the per-response pairwise one, and where a response's
    lists differ in length (the pairing cuts the longer), the per-response sum is what is given."""
    import random

    from analysis.structure.branching import _inside_length

    rng = random.Random(5)

    def pairwise(starts_of: list, ends_of: list) -> int:
        return sum(sum(int(e) - int(s) for s, e in zip(st or [], en or [], strict=False))
                   for st, en in zip(starts_of, ends_of, strict=True))

    for _ in range(300):
        n = rng.randint(0, 30)
        starts = [None if rng.random() < 0.2 else [rng.randint(0, 500) for _ in range(rng.randint(0, 4))]
                  for _ in range(n)]
        ends = [None if s is None else [x + rng.randint(0, 90) for x in s] for s in starts]
        assert _inside_length(starts, ends) == pairwise(starts, ends)
        if n and rng.random() < 0.3:
            ends[0] = (ends[0] or []) + [7]  # one more end than starts: the pairwise rule cuts it
            assert _inside_length(starts, ends) == pairwise(starts, ends)
    assert _inside_length([[np.int64(3), 10]], [[5.0, np.int64(12)]]) == 4
