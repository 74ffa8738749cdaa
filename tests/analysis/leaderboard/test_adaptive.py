"""The leaderboard ranks an adaptive run on every problem, each over its own samples.

Before the leaderboard passed run.json's adaptive section to the report, the problems an adaptive run
stopped early counted as short, and its row averaged only the problems that drew all k samples
(here 8/12 instead of (1 + 0 + 8/12) / 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.leaderboard.board import build_leaderboard
from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.stats.sequential import StopRule
from pr1_eval.store.run_store import RunStore

VERDICTS = {"easy": [True] * 8, "hard": [False] * 8, "mixed": [True, False, True] * 4}


def _adaptive_run(out: Path) -> Path:
    rule = StopRule(max_k=12, round_size=4)
    store = RunStore(out)
    store.write_run(RunRecord(name=out.name, status="complete", k=12,
                              tasks={"t": task_entry(list(VERDICTS), 12, version="1", source="test", data_hash=None)},
                              engine={"backend": "hf"}, decoding={"mode": "sequential"},
                              adaptive={**rule.to_dict(), "samples_drawn": {"t": {p: len(v) for p, v in VERDICTS.items()}}}))
    store.append([SampleRecord(task="t", problem_id=pid, sample_idx=i, response="Final Answer: 1", gold="1",
                               correct=ok, correct_paper=ok, grade_status="ok", answer_class=0 if ok else 1,
                               n_response_tokens=10) for pid, verdicts in VERDICTS.items() for i, ok in enumerate(verdicts)])
    return out


def test_an_adaptive_run_is_ranked_on_every_problem(tmp_path: Path) -> None:
    _adaptive_run(tmp_path / "runs" / "adaptive")
    (row,) = build_leaderboard([tmp_path / "runs"])["runs"]
    cell = row["tasks"]["t"]
    assert row["complete"] and cell["n_problems"] == 3
    assert cell["mean@12"] == pytest.approx((1 + 0 + 8 / 12) / 3)
