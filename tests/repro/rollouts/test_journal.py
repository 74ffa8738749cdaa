"""A rollout writer killed mid-step loses nothing and duplicates nothing: its journal is replayed
by the next writer, and a part it wrote without recording it in the ledger is not kept twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import repro.rollouts.runs as rollout_runs
from pr1_eval.store.run_store import RunStore
from repro.rollouts.journal import JOURNAL_DIR, dead_journals
from repro.rollouts.runs import LEDGER, RolloutRunWriter
from tests.support.deadlines import scaled
from tests.support.rollout_fixtures import keys, options, rollout, step_rows

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.support.rollout_fixtures import options, step_rows
    from repro.rollouts.runs import RolloutRunWriter

    rows = step_rows(4)
    writer = RolloutRunWriter(options(Path(sys.argv[1])), attempt="A", background=False)
    for row in rows[:5]:
        writer.add(row)
    writer.flush(force=False)  # a full chunk: these five are in the run
    for row in rows[5:8]:
        writer.add(row)        # these three are only journaled when the kill comes
    print("ready", flush=True)
    time.sleep(600)
""")


def _all_twelve(run: Path) -> None:
    record = RunStore(run).read_run()
    assert record.status == "complete" and record.training is not None
    assert record.training.rows_seen == record.training.rows_stored == 12
    stored = keys(run)
    assert stored == sorted(("dapo", f"p{p}", s) for p in range(3) for s in range(4))
    rewards = {(r.problem_id, r.sample_idx): r.reward for r in RunStore(run).read_records()}
    assert all(rewards[(f"p{p}", s)] == float(s) for p in range(3) for s in range(4))


def test_a_writer_killed_with_sigkill_loses_no_row_and_the_next_one_completes_the_step(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        run = tmp_path / "train" / "step-000004"
        assert len(keys(run)) == 5, "the first chunk is in the run before the kill"
        journaled = [json.loads(line) for p in (tmp_path / JOURNAL_DIR).glob("*.jsonl") for line in p.read_bytes()
                     .splitlines()]
        assert sorted((r["uid"], r["session"]) for r in journaled) == [("s4-u1", 1), ("s4-u1", 2), ("s4-u1", 3)]
        assert dead_journals(tmp_path, None) == [], "a live writer's journal is not replayed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=scaled(60))
    assert child.returncode == -signal.SIGKILL
    rows = step_rows(4)
    writer = RolloutRunWriter(options(tmp_path), attempt="A", background=False)  # the restarted worker
    run = writer.run_dir("train", 4)
    assert len(keys(run)) == 8, "the new writer replays the dead one's journal when it starts"
    for row in rows[3:]:  # it gets two of the first chunk and the three journaled rows again, and the rest
        writer.add(row)
    writer.close()
    _all_twelve(run)
    assert not list((tmp_path / JOURNAL_DIR).iterdir()), "journals of finished writers are gone"


def test_a_part_written_without_its_ledger_entry_is_not_kept_twice(tmp_path: Path, monkeypatch) -> None:
    """The writer dies between ``store.append`` and the ledger write: the part is dropped and
    its rows come back once, from the journal."""
    rows = step_rows(2)
    real = rollout_runs.write_json_atomic

    def no_ledger(path: Path, data: dict) -> None:
        if path.name == LEDGER and len(data["seen"]) > 1:
            raise OSError("killed here")
        real(path, data)

    first = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    for row in rows[:4]:
        first.add(row)
    first.flush()
    monkeypatch.setattr(rollout_runs, "write_json_atomic", no_ledger)
    for row in rows[4:9]:
        first.add(row)
    first.flush()  # the part lands, its ledger entry does not
    monkeypatch.setattr(rollout_runs, "write_json_atomic", real)
    first.close()  # its journal keeps the failed chunk
    run = first.run_dir("train", 2)
    assert len(RunStore(run).part_paths()) == 2 and len(keys(run)) == 9
    second = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    assert len(RunStore(run).part_paths()) == 2 and len(keys(run)) == 9  # the orphan went, the replay came
    for row in rows[9:]:
        second.add(row)
    second.close()
    _all_twelve(run)


def test_an_earlier_attempts_journal_never_moves_a_later_run_aside(tmp_path: Path) -> None:
    later = RolloutRunWriter(options(tmp_path), attempt="B", background=False)
    for row in step_rows(3)[:4]:
        later.add(row)
    later.flush()
    earlier = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    earlier.add(rollout(3, 2, 0, uid="old", reward=9.0))
    earlier._journal.close()  # noqa: SLF001 - dies with the row only journaled
    earlier._journal = None  # noqa: SLF001
    earlier._buffers.clear()  # noqa: SLF001 - and with nothing left to flush at exit
    assert later.recover() == 1
    run = later.run_dir("train", 3)
    record = RunStore(run).read_run()
    assert record.training is not None and record.training.attempt == "B" and len(keys(run)) == 4
    assert not Path(str(tmp_path.resolve()) + ".superseded").exists()
    later.close()


@pytest.mark.parametrize("kind", ["train", "validation"])
def test_the_journal_holds_only_rows_not_yet_in_a_run(tmp_path: Path, kind: str) -> None:
    writer = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    for s in range(3):
        writer.add(rollout(7, 0, s, kind=kind))
    segments = list((tmp_path / JOURNAL_DIR).glob("*.jsonl"))
    assert len(segments) == 1 and len(segments[0].read_bytes().splitlines()) == 3
    writer.flush()
    assert not list((tmp_path / JOURNAL_DIR).glob("*.jsonl"))
    writer.close()
    assert not list((tmp_path / JOURNAL_DIR).iterdir())
