"""The end of a job: rows a killed reward worker left journaled reach their run once no writer is alive,
with the options that worker recorded; a writer still alive is waited for, then left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pr1_eval.store.run_store import RunStore
from repro.cli.main import main
from repro.rollouts.finish import Finished, finish_rollout_runs
from repro.rollouts.journal import JOURNAL_DIR, OPTIONS_SUFFIX, journal_rows, live_writers
from repro.rollouts.runs import options_from_json, options_to_json
from tests.support.deadlines import scaled
from tests.support.rollout_fixtures import keys, options

# the last step of a job: all twelve rollouts scored, five flushed, seven only journaled when Ray kills it
CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.support.rollout_fixtures import options, step_rows
    from repro.rollouts.runs import RolloutRunWriter

    rows = step_rows(8)
    writer = RolloutRunWriter(options(Path(sys.argv[1])), attempt="A", background=False)
    for row in rows[:5]:
        writer.add(row)
    writer.flush(force=False)
    for row in rows[5:]:
        writer.add(row)
    print("ready", flush=True)
    time.sleep(600)
""")


@contextmanager
def killed_worker(root: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A reward worker that scored the step's every rollout and flushed five; SIGKILL-ed on leaving."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        yield child
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=scaled(60))


def _run(root: Path) -> Path:
    return root / "train" / "step-000008"


def test_the_rows_a_killed_worker_left_complete_the_last_step_with_its_own_options(tmp_path: Path) -> None:
    with killed_worker(tmp_path):
        assert len(keys(_run(tmp_path))) == 5 and RunStore(_run(tmp_path)).read_run().status == "running"
    assert journal_rows(tmp_path) == 7
    # the fallback expects sixteen rows a step: were it used, the step could not complete at twelve
    done = finish_rollout_runs(tmp_path, fallback=lambda: options(tmp_path, prompts=4))
    assert done == Finished(7)
    record = RunStore(_run(tmp_path)).read_run()
    assert record.status == "complete" and record.training is not None
    assert record.training.rows_seen == record.training.rows_stored == 12
    assert keys(_run(tmp_path)) == sorted(("dapo", f"p{p}", s) for p in range(3) for s in range(4))
    summary = record.training.summary
    assert summary is not None and summary.reward_mean == pytest.approx(1.5)  # rewards 0..3
    assert not list((tmp_path / JOURNAL_DIR).iterdir()), "no journal, lock or options file is left"
    assert journal_rows(tmp_path) == 0
    assert finish_rollout_runs(tmp_path) == Finished(0), "a second finish finds nothing to store"


def test_the_finish_waits_for_a_worker_that_outlives_the_trainer(tmp_path: Path) -> None:
    with killed_worker(tmp_path) as child:
        assert len(live_writers(tmp_path)) == 1
        threading.Timer(0.5, child.send_signal, (signal.SIGKILL,)).start()
        done = finish_rollout_runs(tmp_path, wait_s=scaled(60), poll_s=0.05)
    assert done == Finished(7)
    assert RunStore(_run(tmp_path)).read_run().status == "complete"


def test_a_writer_alive_past_the_wait_is_named_and_its_rows_left_to_the_next_writer(tmp_path: Path) -> None:
    with killed_worker(tmp_path):
        token = live_writers(tmp_path)
        done = finish_rollout_runs(tmp_path, wait_s=0.3, poll_s=0.05)
        assert done == Finished(0, tuple(token)) and len(keys(_run(tmp_path))) == 5
        assert "1 writer(s) still hold their journal" in done.line(tmp_path)
    assert finish_rollout_runs(tmp_path) == Finished(7), "once it is dead, its rows are stored"


def test_a_journal_without_recorded_options_is_replayed_with_the_fallback_only(tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    with killed_worker(tmp_path):
        pass
    for path in (tmp_path / JOURNAL_DIR).glob(f"*{OPTIONS_SUFFIX}"):
        path.unlink()  # a journal written before the options were recorded
    assert finish_rollout_runs(tmp_path) == Finished(0)
    assert "no writer recorded its options" in caplog.text and len(keys(_run(tmp_path))) == 5
    assert finish_rollout_runs(tmp_path, fallback=lambda: options(tmp_path)) == Finished(7)
    assert RunStore(_run(tmp_path)).read_run().status == "complete"


def test_options_read_back_equal_those_recorded(tmp_path: Path) -> None:
    given = options(tmp_path, prompts=5, every=3, chunk=7)
    assert options_from_json(options_to_json(given)) == given
    assert options_from_json({**options_to_json(given), "from_a_newer_writer": 1}) == given


def test_pr1_repro_run_stores_what_the_workers_left_once_the_trainer_exits(tmp_path: Path, monkeypatch,
                                                                         capsys) -> None:
    root = tmp_path / "runs"
    with killed_worker(root):
        pass
    import repro.cli.run as run_cli

    monkeypatch.setattr(run_cli.subprocess, "call", lambda *a, **k: 3)  # the trainer, failing: rows still go in
    status = main(["run", "rl_gsm8k", "--model", "/m", "--no-path-check", "--rollout-runs", str(root)])
    assert status == 3
    assert f"# rollout runs: 7 rollout(s) the reward workers left in their journals stored in {root}" in \
        capsys.readouterr().out
    assert RunStore(_run(root)).read_run().status == "complete"
