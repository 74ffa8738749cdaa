"""``pr1-eval sweep``: checkpoint discovery, step selection, VERL merging, failures, and resuming after a kill."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pr1_eval.cli import sweep as sweep_cli
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate import sweep
from pr1_eval.inputs import checkpoints
from pr1_eval.records.steps import family_name
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.deadlines import scaled

# the smallest sweep that still exercises every stage: 2 problems × 2 samples, one problem per chunk
RUN_OPTIONS = ["--tasks", "aime24", "-k", "2", "--limit", "2", "--max-new-tokens", "6", "--engine", "hf",
               "--problems-per-chunk", "1", "--grade-workers", "1"]


def _hf_checkpoint(folder: Path) -> Path:
    """A loadable checkpoint: the random tiny model's files linked into a real folder."""
    source = cached_tiny_model("random")
    folder.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        (folder / item.name).symlink_to(item)
    return folder


def _verl_shards(folder: Path) -> Path:
    (folder / "actor").mkdir(parents=True)
    (folder / "actor" / "fsdp_config.json").write_text("{}")
    return folder


def test_discovery_of_every_layout(tmp_path: Path) -> None:
    _hf_checkpoint(tmp_path / "global_step_10")
    _hf_checkpoint(tmp_path / "global_step_20" / "hf")
    _verl_shards(tmp_path / "global_step_30")
    (tmp_path / "global_step_40").mkdir()
    _hf_checkpoint(tmp_path / "checkpoint-500")
    _hf_checkpoint(tmp_path / "final")
    (tmp_path / "logs").mkdir()
    found = {c.path.name: c for c in checkpoints.discover_checkpoints(tmp_path)}
    assert list(found) == ["global_step_10", "global_step_20", "global_step_30", "global_step_40", "checkpoint-500", "final"]
    assert found["global_step_10"].model_dir == tmp_path / "global_step_10"
    assert found["global_step_20"].model_dir == tmp_path / "global_step_20" / "hf" and found["global_step_20"].shards is None
    assert found["global_step_30"].shards == tmp_path / "global_step_30" / "actor"
    assert found["global_step_30"].model_dir == tmp_path / "global_step_30" / "hf"
    assert "no config.json" in str(found["global_step_40"].problem)
    assert found["checkpoint-500"].step == 500 and found["final"].step is None
    one = checkpoints.discover_checkpoints(tmp_path / "global_step_10")
    assert [c.step for c in one] == [10] and family_name(tmp_path / "global_step_10") == tmp_path.name
    with pytest.raises(Pr1EvalError, match="no checkpoints under"):
        checkpoints.discover_checkpoints(tmp_path / "logs")


def test_step_selection() -> None:
    cks = [checkpoints.Checkpoint(Path(f"global_step_{s}"), s, Path(".")) for s in (50, 100, 150, 200)]
    cks.append(checkpoints.Checkpoint(Path("final"), None, Path(".")))
    steps = lambda chosen: [c.step for c in chosen]  # noqa: E731
    assert steps(checkpoints.select_steps(cks)) == [50, 100, 150, 200, None]
    assert steps(checkpoints.select_steps(cks, steps="200,50")) == [50, 200]
    assert steps(checkpoints.select_steps(cks, every=100)) == [100, 200]
    assert steps(checkpoints.select_steps(cks, last=2)) == [150, 200]
    with pytest.raises(Pr1EvalError, match=r"no checkpoint for step\(s\) 75; found steps 50, 100, 150, 200"):
        checkpoints.select_steps(cks, steps="75")


def test_unmerged_verl_shards_without_verl_stop_with_how_to_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _verl_shards(tmp_path / "ckpts" / "global_step_5")
    monkeypatch.setattr(checkpoints, "verl_available", lambda: False)
    assert main(["sweep", str(tmp_path / "ckpts"), "--out-root", str(tmp_path / "runs"), *RUN_OPTIONS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pr1-repro merge" in err and "verl.model_merger" in err
    assert not (tmp_path / "runs").exists()
    assert checkpoints.merge_command(checkpoints.discover_checkpoints(tmp_path / "ckpts")[0])[1:4] == ["-m", "repro.cli", "merge"]


def test_merge_and_failures_do_not_stop_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "ckpts"
    _verl_shards(root / "global_step_1")  # merges fine (a stand-in merger links the tiny model in)
    _verl_shards(root / "global_step_2")  # the merger fails
    (root / "global_step_3").mkdir(parents=True)  # nothing in it
    _hf_checkpoint(root / "global_step_4")
    (root / "global_step_4" / "model.safetensors").unlink()  # weights missing: fails before loading
    model = cached_tiny_model("random")
    fake_merger = textwrap.dedent(f"""
        import os, sys
        step = sys.argv[1]
        if step.endswith("_2"):
            sys.exit(3)
        os.makedirs(os.path.join(step, "hf"))
        for name in os.listdir({str(model)!r}):
            os.symlink(os.path.join({str(model)!r}, name), os.path.join(step, "hf", name))
    """)
    monkeypatch.setattr(checkpoints, "verl_available", lambda: True)
    monkeypatch.setattr(checkpoints, "merge_command", lambda c: [sys.executable, "-c", fake_merger, str(c.path)])
    assert main(["sweep", str(root), "--out-root", str(tmp_path / "runs"), *RUN_OPTIONS]) == 1
    out, err = capsys.readouterr()
    # off a terminal the checkpoint bar is silent: a line says which checkpoint starts, and how it ended
    lines = [line for line in err.splitlines() if line.startswith("[pr1-eval] checkpoint ")]
    assert [line.split(":")[0] for line in lines[::2]] == [f"[pr1-eval] checkpoint {i}/4" for i in range(1, 5)]
    assert str(root / "global_step_1") in lines[0] and lines[1].split()[-4:-2] == ["done", "in"]
    assert lines[-1].split()[-4:-2] == ["failed", "in"] and len(lines) == 8
    table = {line.split()[0]: line for line in out.splitlines()[-4:]}
    # --limit 2: the closing table says its numbers are of a slice, in lm-eval's words
    assert "⚠ --limit 2: every run holds only the first 2 problem(s) of each task; --limit SHOULD ONLY BE USED FOR " \
           "TESTING. REAL METRICS SHOULD NOT BE COMPUTED USING LIMIT." in out.splitlines()
    assert "done" in table["1"] and "ckpts-step1-sequential-k2-seed0" in table["1"]
    assert "failed" in table["2"] and "merging" in table["2"]
    assert "failed" in table["3"] and "no config.json" in table["3"]
    assert "failed" in table["4"] and "no weights" in table["4"]
    info = json.loads((tmp_path / "runs" / "ckpts-step1-sequential-k2-seed0" / "run.json").read_text())
    assert (info["model"]["step"], info["model"]["family"], info["status"]) == (1, "ckpts", "complete")


@pytest.mark.slow  # a real SIGKILL needs its own interpreter (imports torch again)
def test_sweep_resumes_after_a_kill(tmp_path: Path) -> None:
    root = tmp_path / "ckpts"
    for step in (1, 2, 3):
        _hf_checkpoint(root / f"global_step_{step}")
    runs = tmp_path / "runs"
    args = ["sweep", str(root), "--out-root", str(runs), *RUN_OPTIONS]
    # SIGKILL the sweep right after its 3rd durable chunk: step 1 is complete (2 chunks), step 2 holds 1 of 2
    killer = textwrap.dedent(f"""
        import os, signal
        from pr1_eval.store.run_store import RunStore
        original, calls = RunStore.append, [0]
        def append(self, records):
            written = original(self, records)
            calls[0] += 1
            if calls[0] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return written
        RunStore.append = append
        from pr1_eval.cli.main import main
        main({args!r})
    """)
    done = subprocess.run([sys.executable, "-c", killer], capture_output=True, text=True, timeout=scaled(600),
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == -9, done.stderr[-2000:]
    step1, step2, step3 = (runs / f"ckpts-step{s}-sequential-k2-seed0" for s in (1, 2, 3))
    assert RunStore(step1).read_run().status == "complete"
    assert RunStore(step2).read_run().status == "running" and len(RunStore(step2).part_paths()) == 1
    assert not step3.exists()
    kept = RunStore(step2).part_paths()[0].read_bytes()
    step1_parts = [p.stat().st_mtime_ns for p in RunStore(step1).part_paths()]

    assert main(args) == 0
    assert [p.stat().st_mtime_ns for p in RunStore(step1).part_paths()] == step1_parts  # skipped, not redone
    frame = RunStore(step2).read_frame()  # raises on duplicated keys
    assert len(frame) == 4 and RunStore(step2).part_paths()[0].read_bytes() == kept
    for run in (step1, step2, step3):
        info = RunStore(run).read_run()
        assert info.status == "complete" and info.model.family == "ckpts"
        assert len(RunStore(run).read_frame()) == 4
    shutil.rmtree(root)  # the runs stand on their own
    from analysis.leaderboard.board import build_leaderboard

    doc = build_leaderboard([runs])
    assert doc["baseline"] == "ckpts-step1-sequential-k2-seed0" and sorted(r["step"] for r in doc["runs"]) == [1, 2, 3]


def test_the_closing_table_marks_an_incomplete_run(tmp_path: Path) -> None:
    from tests.support.completeness_fixtures import AIME, K, write_killed_run
    from tests.support.leaderboard_fixtures import write_counts_run

    done = write_counts_run(tmp_path, "done", {"aime24": dict.fromkeys(AIME, 3)}, k=K, step=100)
    killed = write_killed_run(tmp_path)
    rows = []
    for step, path in ((100, done), (250, killed)):
        row = sweep.SweepRow(checkpoints.Checkpoint(path=path, step=step, model_dir=path), status="done", run_dir=path)
        row.metrics, row.incomplete = sweep_cli._metrics(path)
        rows.append(row)
    assert rows[0].metrics == {"aime24": 3 / K} and rows[0].incomplete == []
    assert rows[1].metrics == {"aime24": None, "amc23": None}  # the report's check: no mean@K for a killed run
    lines = sweep_cli.format_sweep_table(rows).splitlines()
    assert lines[0].split()[:4] == ["step", "status", "aime24", "mean@k"]
    assert "0.750" in lines[1] and "⚠" not in lines[1]
    assert "done ⚠ incomplete" in lines[2] and lines[2].count("⚠") == 3  # the status and both tasks
    assert lines[3].startswith("⚠ incomplete: step 250: run status is 'running'")
    assert "aime24: 6 of 10 problem(s) have no samples" in lines[3] and "amc23: 4 of 4" in lines[3]
