"""``--log-to wandb`` / ``--log-to mlflow``: a sweep's checkpoints logged at their step, with the
report's numbers and the samples as a table; refused in one line when the package is missing.

W&B runs offline (``WANDB_MODE=offline``, nothing leaves the machine): the test reads back what the
run wrote (its summary file and the history records in its ``.wandb`` log). MLflow is checked with
its local file store when it is installed (it is not a dev dependency: it pulls Flask, SQLAlchemy,
alembic and matplotlib, and moves pyarrow), else that test is skipped with that reason.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import time
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.report.load import load_report
from pr1_eval.report.tracking import step_metrics
from tests.support.analysis_fixtures import make_record, response, write_run
from tests.support.deadlines import scaled


def _sweep(root: Path) -> list[Path]:
    """Two checkpoints (steps 100 and 200) of one job: aime24 with 2 problems × 2 samples; step
    200 solves 3 of 4 where step 100 solves 1 of 4; every sample of step 200 branches."""
    runs = []
    for step, right in ((100, 1), (200, 3)):
        records = []
        for i, (p, s) in enumerate((p, s) for p in ("a", "b") for s in range(2)):
            text = (response("<Parallel><Path>x</Path><Path>y</Path></Parallel><Summary>z</Summary>",
                             "Final Answer: 5") if step == 200 else "Final Answer: 5")
            records.append(make_record("aime24", p, s, text, correct=i < right))
        runs.append(write_run(root, f"job-step{step}", records, step=step))
    return runs


def test_the_metrics_of_a_step_are_the_reports(tmp_path: Path) -> None:
    first, second = (load_report(r) for r in _sweep(tmp_path))
    m1, skipped = step_metrics(first)
    m2, _ = step_metrics(second)
    assert skipped == []
    assert m1["eval/aime24/mean_at_2"] == 0.25 and m2["eval/aime24/mean_at_2"] == 0.75  # c/n averaged by hand
    assert m1["eval/aime24/pass_at_2"] == 0.5 and m2["eval/aime24/pass_at_2"] == 1.0  # 1 - C(n-c,2)/C(n,2)
    assert m1["eval/aime24/parallel_ratio"] == 0.0 and m2["eval/aime24/parallel_ratio"] == 1.0
    low, high = m2["eval/aime24/mean_at_2_ci_low"], m2["eval/aime24/mean_at_2_ci_high"]
    assert low <= 0.75 <= high and (low, high) == tuple(second.tasks["aime24"].metrics.ci95["mean"])
    assert "eval/aime24/speedup" in m2 and m2["eval/aime24/speedup"] > 1.0  # the block's paths run side by side
    assert all("@" not in key for key in m1)  # MLflow refuses '@' in a metric name


def test_a_missing_package_is_refused_in_one_line_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    runs = _sweep(tmp_path)
    for argv in (["leaderboard", str(runs[0]), "--log-to", "wandb"],
                 ["run", "--model", str(tmp_path / "no-model"), "--tasks", "aime24", "--log-to", "wandb"],
                 ["sweep", str(tmp_path / "no-ckpts"), "--tasks", "aime24", "--log-to", "wandb"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].endswith("--log-to wandb: the wandb package is not installed; install it with pip install "
                                "'pr1-eval[wandb]' (or pip install wandb), or leave out --log-to"), argv


def _records(log: bytes) -> list[bytes]:
    """The records of an offline run's ``.wandb`` file: a 7-byte file header, then LevelDB's log
    format (32 KiB blocks; each fragment a 7-byte header: checksum, length, type 1 full / 2 first /
    3 middle / 4 last), so a record that crosses a block boundary is joined back first."""
    block, records, pending, pos = 32768, [], b"", 7
    while pos + 7 <= len(log):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", log[pos:pos + 7])
        data, pos = log[pos + 7:pos + 7 + length], pos + 7 + length
        pending = data if kind in (1, 2) else pending + data
        if kind in (1, 4):
            records.append(pending)
    return records


def _logged(log: bytes, key: str) -> list[float]:
    """The values logged under ``key``, in order: in a record, each history item is the key's bytes,
    then its JSON value as protobuf field 16 (tag 0x82 0x01, a length)."""
    values = []
    for record in _records(log):
        for match in re.finditer(re.escape(key.encode()) + rb"\x82\x01(.)", record, re.S):
            start = match.end()
            values.append(json.loads(record[start:start + match.group(1)[0]]))
    return list(dict.fromkeys(values))  # a value is written again in the run's summary


def test_a_sweep_lands_in_wandb_at_its_steps_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("wandb", reason="wandb is the [wandb] extra (and in [dev]); not installed here")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    runs = _sweep(tmp_path / "runs")
    assert main(["leaderboard", str(tmp_path / "runs"), "--log-to", "wandb", "--log-project", "p",
                 "--log-name", "job-eval"]) == 0
    assert "[pr1-eval] logged 2 run(s) to " in capsys.readouterr().err
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    (table,) = (run_dir / "files" / "media" / "table" / "eval").glob("samples_*.table.json")
    samples = json.loads(table.read_text().replace("NaN", "null"))
    assert samples["columns"][:4] == ["step", "task", "problem_id", "sample_idx"]
    assert [row[0] for row in samples["data"]] == [100] * 4 + [200] * 4
    assert [row[4] for row in samples["data"]] == [True, False, False, False, True, True, True, False]
    log_file = next(run_dir.glob("*.wandb"))
    deadline = time.monotonic() + scaled(60)  # wandb's service process writes the log after finish() returns
    while _logged(log_file.read_bytes(), "eval/aime24/parallel_ratio") != [0.0, 1.0] and time.monotonic() < deadline:
        time.sleep(0.5)
    log = log_file.read_bytes()
    assert _logged(log, "checkpoint_step") == [100, 200]
    assert _logged(log, "eval/aime24/mean_at_2") == [0.25, 0.75]
    assert _logged(log, "eval/aime24/parallel_ratio") == [0.0, 1.0]
    assert b"job-eval" in log
    assert len(runs) == 2


def test_a_sweep_lands_in_mlflow_at_its_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow", reason="mlflow is an optional extra ([mlflow]), not installed here: "
                                                  "it pulls Flask, SQLAlchemy, alembic and matplotlib")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)  # its artifacts (the samples table) go to ./mlruns
    _sweep(tmp_path / "runs")
    assert main(["leaderboard", str(tmp_path / "runs"), "--log-to", "mlflow", "--log-project", "p"]) == 0
    client = mlflow.tracking.MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("p").experiment_id])
    history = client.get_metric_history(run.info.run_id, "eval/aime24/mean_at_2")
    assert sorted((m.step, m.value) for m in history) == [(100, 0.25), (200, 0.75)]


def test_a_tracker_that_cannot_start_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A library that refuses to start (wrong settings, a retired store) is one error line."""
    from pr1_eval.report import tracking

    def refuse(self: object, *args: object) -> None:
        raise RuntimeError("The filesystem tracking backend is in\nmaintenance mode")

    monkeypatch.setattr(tracking._Mlflow, "__init__", refuse)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "mlflow" else real(name, *a))
    runs = _sweep(tmp_path / "runs")
    assert main(["leaderboard", str(runs[0]), "--log-to", "mlflow"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("error: --log-to mlflow: could not start a tracker run (RuntimeError: The filesystem tracking "
                   "backend is in maintenance mode); fix its settings (MLFLOW_TRACKING_URI) or leave out --log-to; "
                   "the runs themselves are stored")
