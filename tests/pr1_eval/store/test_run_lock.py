"""One writer per run, with real processes: a second writer is refused naming the holder, two
imports to one folder end with one run and one refusal, a SIGKILLed holder leaves no stale lock,
regrade refuses a run being written, and a reader never reads a half-swapped run.

Rows are counted with pyarrow straight from the part files, not through the store under test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_lock import RunBusy, holder, lock_path, run_lock
from pr1_eval.store.run_store import RunStore
from tests.support.deadlines import scaled

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PR1_EVAL_GRADING_WORKERS": "1"}

#: A process that takes a run's lock, appends one chunk of N samples, says "held" and waits.
HOLDER = """
import sys, time
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore
with run_lock(sys.argv[1], "pr1-eval import"):
    RunStore(sys.argv[1]).append([SampleRecord(task="t", problem_id="held", sample_idx=i, response="r", gold="1")
                                  for i in range(int(sys.argv[2]))])
    print("held", flush=True)
    time.sleep(120)
"""


def _rows_on_disk(run: Path) -> int:
    """Samples stored, counted by pyarrow from the part files themselves."""
    return sum(pq.read_metadata(part).num_rows for part in sorted((run / "samples.parquet").glob("part-*.parquet")))


def _hold(run: Path, samples: int = 3) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run), str(samples)], env=ENV, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _jsonl(path: Path, n_problems: int, tag: str) -> Path:
    path.write_text("".join(json.dumps({"task": "t", "problem_id": f"{tag}{p}", "sample_idx": 0,
                                        "response": "Final Answer: 1", "gold": "1"}) + "\n"
                            for p in range(n_problems)), encoding="utf-8")
    return path


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", *args], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _hold(run)
    try:
        done = _cli("import", str(_jsonl(tmp_path / "a.jsonl", 4, "a")), "--out", str(run)).communicate(timeout=scaled(300))
        err = done[1].strip()
        assert len(err.splitlines()) == 1, err
        assert f"is being written by `pr1-eval import` (pid {proc.pid}, since " in err
        with pytest.raises(RunBusy, match=f"pid {proc.pid}"), run_lock(run, "pr1-eval merge"):
            pass
        assert holder(run) is not None and "pr1-eval import" in str(holder(run))
        assert _rows_on_disk(run) == 3  # the holder's chunk, nothing of the refused import
    finally:
        proc.kill()
        proc.wait()


def test_two_imports_to_one_folder_end_with_one_run_and_one_refusal(tmp_path: Path) -> None:
    out = tmp_path / "run"
    files = {"a": _jsonl(tmp_path / "a.jsonl", 5, "a"), "b": _jsonl(tmp_path / "b.jsonl", 9, "b")}
    procs = {tag: _cli("import", str(path), "--out", str(out)) for tag, path in files.items()}
    results = {tag: (proc.wait(timeout=scaled(300)), proc.communicate()[1]) for tag, proc in procs.items()}
    winners = [tag for tag, (rc, _) in results.items() if rc == 0]
    losers = [tag for tag, (rc, _) in results.items() if rc != 0]
    assert len(winners) == 1 and len(losers) == 1, results
    refusal = results[losers[0]][1]
    # the holder is named once its lock record is written; a refusal in the instant before says so
    assert ("is being written by `pr1-eval import`" in refusal or "already holds a run" in refusal
            or "is being written by another process (it has just started)" in refusal), refusal
    assert _rows_on_disk(out) == {"a": 5, "b": 9}[winners[0]]
    ids = set(pq.read_table(out / "samples.parquet", columns=["problem_id"]).column("problem_id").to_pylist())
    assert all(pid.startswith(winners[0]) for pid in ids)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_a_sigkilled_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _hold(run)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert lock_path(run).exists()  # left behind by the killed holder, but not locked
    assert holder(run) is None
    with run_lock(run, "pr1-eval run"):  # the next writer goes ahead at once
        RunStore(run).append([SampleRecord(task="t", problem_id="next", sample_idx=0, response="r", gold="1")])
    assert _rows_on_disk(run) == 4 and not lock_path(run).exists()


def _complete_run(path: Path, n: int = 4) -> RunStore:
    store = RunStore(path)
    store.write_run(RunRecord(k=1, status="complete", tasks={"t": task_entry([f"p{i}" for i in range(n)], 1,
                                                                            version=None, source="t", data_hash=None)}))
    store.append([SampleRecord(task="t", problem_id=f"p{i}", sample_idx=0, response="Final Answer: 1", gold="1")
                  for i in range(n)])
    return store


def test_regrade_refuses_a_run_being_written_or_not_finished(tmp_path: Path) -> None:
    from pr1_eval.grading.regrade import regrade

    store = _complete_run(tmp_path / "run")
    proc = _hold(store.root)
    try:
        with pytest.raises(RunBusy, match="is being written by `pr1-eval import`"):
            regrade(store.root, workers=1)
    finally:
        proc.kill()
        proc.wait()
    assert _rows_on_disk(store.root) == 7  # 4 + the holder's 3: the regrade changed nothing
    store.write_run(RunRecord(k=1, status="running"))
    with pytest.raises(Pr1EvalError, match="status is 'running', not complete"):
        regrade(store.root, workers=1)


def test_a_reader_never_reads_a_half_swapped_run(tmp_path: Path) -> None:
    store = _complete_run(tmp_path / "run", n=4)
    store.rewrite(store.read_records()[:2])  # what a killed rewrite left between its two renames:
    os.replace(store.samples_dir, store.staging_dir)  # the new parts complete in .new
    store.backup_dir.mkdir()
    (store.backup_dir / "part-00000.parquet").write_bytes(b"old")  # the old ones in .old
    proc = _hold(tmp_path / "run", samples=0)  # a writer holds the run: the reader is told it changed, not "damaged"
    try:
        with pytest.raises(Pr1EvalError, match="the run changed while it was read .*; retry"):
            store.read_table()
    finally:
        proc.kill()
        proc.wait()
    assert store.read_table().num_rows == 2  # no writer: the complete new parts are the run's


#: Holds the run's lock and rewrites it over and over: 2 samples, then 4, then 2 … (as regrades do).
REWRITER = """
import sys
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore
store = RunStore(sys.argv[1])
with run_lock(sys.argv[1], "pr1-eval regrade"):
    print("held", flush=True)
    for i in range(int(sys.argv[2])):
        store.rewrite([SampleRecord(task="t", problem_id=f"p{j}", sample_idx=0, response="r" * 2000, gold="1")
                       for j in range(2 + 2 * (i % 2))])
"""


def test_a_reader_racing_rewrites_reads_whole_snapshots_or_is_told_to_retry(tmp_path: Path) -> None:
    store = _complete_run(tmp_path / "run", n=2)
    proc = subprocess.Popen([sys.executable, "-c", REWRITER, str(store.root), "60"], env=ENV, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    seen: set[int] = set()
    retries = 0
    while proc.poll() is None:
        try:
            table = store.read_table(columns=["problem_id"])
        except Pr1EvalError as exc:  # never "damaged", never a bare FileNotFoundError
            assert "the run changed while it was read" in str(exc), exc
            retries += 1
            continue
        ids = table.column("problem_id").to_pylist()
        assert sorted(ids) in (["p0", "p1"], ["p0", "p1", "p2", "p3"]), ids  # one rewrite's parts, never a mix
        seen.add(len(ids))
    assert proc.returncode == 0 and seen, (seen, retries)


def test_the_writer_itself_sees_a_half_swapped_run_as_its_own_to_recover(tmp_path: Path) -> None:
    store = _complete_run(tmp_path / "run", n=2)
    os.replace(store.samples_dir, store.backup_dir)  # a swap killed between its renames, without a .new
    with run_lock(store.root, "pr1-eval import"):
        assert store.read_table().num_rows == 2  # not "changed while read": this process is the writer
        store.recover_swap()
    assert store.samples_dir.is_dir() and not store.backup_dir.exists() and _rows_on_disk(store.root) == 2


def test_run_is_refused_before_its_model_loads_when_another_writer_holds_the_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from pr1_eval.generate import runner

    monkeypatch.setattr(runner, "_open_source", lambda *a: pytest.fail("the model was loaded"))
    plan = SimpleNamespace(out=tmp_path / "run", record=RunRecord(k=1, status="running"))
    proc = _hold(plan.out, samples=0)
    try:
        with pytest.raises(RunBusy, match=f"is being written by `pr1-eval import` \\(pid {proc.pid}"):
            runner.execute(plan)  # type: ignore[arg-type]
    finally:
        proc.kill()
        proc.wait()


def test_a_forked_child_outliving_a_killed_holder_does_not_keep_the_lock(tmp_path: Path) -> None:
    script = HOLDER.replace('    print("held", flush=True)', '''    if os.fork() == 0:  # an engine's worker process, forked while the lock is held
        time.sleep(120)
        os._exit(0)
    print("held", flush=True)''').replace("import sys, time", "import os, sys, time")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", script, str(run), "0"], env=ENV, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert holder(run) is not None
        proc.send_signal(signal.SIGKILL)  # the writer dies; its forked child lives on
        proc.wait()
        # The child lets go of the lock in its after-fork hook, which runs when the child is first scheduled:
        # under CI's load that came after the parent was killed (holder() still saw the lock once), so the
        # lock must be free within a few seconds, not at this very instant.
        deadline = time.monotonic() + scaled(10)
        while holder(run) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert holder(run) is None
        with run_lock(run, "pr1-eval run"):
            pass
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the orphaned child too
