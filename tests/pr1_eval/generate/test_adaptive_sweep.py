"""``pr1-eval sweep --adaptive --decide``: rounds over tiny checkpoints, the tables, a rerun that adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.report.completeness import check_run
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model

OPTIONS = ["--tasks", "aime24", "-k", "2", "--limit", "1", "--max-new-tokens", "4", "--engine", "hf",
           "--grade-workers", "1", "--adaptive", "--decide", "ranking", "--delta", "0.5", "--first-round", "1"]


def _checkpoints(root: Path, steps: tuple[int, ...]) -> None:
    source = cached_tiny_model("random")
    for step in steps:
        folder = root / f"global_step_{step}"
        folder.mkdir(parents=True)
        for item in source.iterdir():
            (folder / item.name).symlink_to(item)


@pytest.mark.slow  # loads the tiny model four times
def test_rounds_over_checkpoints_and_a_rerun(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, runs = tmp_path / "ckpts", tmp_path / "runs"
    _checkpoints(root, (1, 2))
    assert main(["sweep", str(root), "--out-root", str(runs), *OPTIONS]) == 0
    out, err = capsys.readouterr()
    assert "round 1 of ≤ 2: 2 of 2 checkpoint(s) open, 1 samples per problem" in err
    assert "round 2 of ≤ 2" in err
    assert "Guarantee: the chance of any wrong declared sign" in out and "step1  step2  2" in out
    record = json.loads((runs / "ckpts-adaptive-sweep.json").read_text())
    assert record["rounds"] == 2 and len(record["pairs"]) == 1 and record["settings"]["planned"] == 2
    for step in (1, 2):
        run = runs / f"ckpts-step{step}-sequential-k2-seed0-decide"
        info = RunStore(run).read_run()
        assert (info.k, info.status, info.model.family) == (2, "complete", "ckpts")
        assert info.extra["adaptive_sweep"]["question"] == "ranking"
        assert sorted(RunStore(run).read_frame()["sample_idx"]) == [0, 1]  # one per round, new each round
        assert check_run(run).complete
    parts = {p: p.stat().st_mtime_ns for p in runs.rglob("*.parquet")}
    assert main(["sweep", str(root), "--out-root", str(runs), *OPTIONS]) == 0
    again, _ = capsys.readouterr()
    assert "0 round(s) this session" in again and {p: p.stat().st_mtime_ns for p in runs.rglob("*.parquet")} == parts
    assert again.split("\n", 2)[2] == out.split("\n", 2)[2]  # the same tables from the stored samples
