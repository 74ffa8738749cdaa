"""Every interrupted write recovers by itself: a rewrite (regrade's swap) killed at each stage, a
merge killed midway or given duplicated keys, an output page killed mid-write, and an output
option that names a run's own record. Rows are counted with pyarrow from the part files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import ModelInfo, RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.scaleout.merge import merge_shards
from pr1_eval.store.run_store import RunStore
from tests.support.deadlines import scaled

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _records(ids: list[str], k: int = 2, answer: str = "1") -> list[SampleRecord]:
    return [SampleRecord(task="t", problem_id=pid, sample_idx=i, response=f"Final Answer: {answer}", gold="1")
            for pid in ids for i in range(k)]


def _run(path: Path, ids: list[str], k: int = 2) -> RunStore:
    store = RunStore(path)
    store.write_run(RunRecord(k=k, status="complete",
                              tasks={"t": task_entry(ids, k, version=None, source="t", data_hash=None)}))
    store.append(_records(ids, k))
    return store


def _rows(run: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in (run / "samples.parquet").glob("part-*.parquet"))


#: Rewrites a 3-problem run to 1 problem, SIGKILLing itself right after the rename named in argv[2].
KILLED_REWRITE = """
import os, signal, sys
from pr1_eval.store import run_store
from pr1_eval.records.sample import SampleRecord
real = os.replace
def replace(src, dst):
    real(src, dst)
    if str(dst).endswith(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
run_store.os.replace = replace
store = run_store.RunStore(sys.argv[1])
store.rewrite([SampleRecord(task="t", problem_id="new", sample_idx=0, response="x", gold="1")])
"""


@pytest.mark.parametrize(("killed_after", "rows_read"), [("samples.parquet.old", 1), ("samples.parquet", 1)])
def test_a_rewrite_killed_during_its_swap_is_read_whole_and_finished_by_the_next(
        tmp_path: Path, killed_after: str, rows_read: int) -> None:
    store = _run(tmp_path / "run", ["a", "b", "c"])
    done = subprocess.run([sys.executable, "-c", KILLED_REWRITE, str(store.root), killed_after], env=ENV, timeout=scaled(120))
    assert done.returncode == -signal.SIGKILL
    assert store.backup_dir.exists()  # what the kill left: the old parts still aside
    assert store.read_table().num_rows == rows_read  # readers see the complete new parts, nothing mixed
    store.rewrite(store.read_records())  # the next rewrite (a regrade) goes ahead: no "Directory not empty"
    assert not store.backup_dir.exists() and not store.staging_dir.exists()
    assert _rows(store.root) == 1


def test_a_rewrite_killed_before_its_swap_keeps_the_old_samples(tmp_path: Path) -> None:
    store = _run(tmp_path / "run", ["a", "b", "c"])
    store.staging_dir.mkdir()
    (store.staging_dir / "part-00000.parquet").write_bytes(b"PAR1 half")  # cut short by the kill
    assert store.read_table().num_rows == 6
    store.rewrite(store.read_records())
    assert _rows(store.root) == 6 and not store.staging_dir.exists()


def test_regrade_goes_ahead_over_a_leftover_old_folder(tmp_path: Path) -> None:
    from pr1_eval.grading.regrade import regrade

    store = _run(tmp_path / "run", ["a", "b"])
    store.backup_dir.mkdir()  # a regrade killed after its swap, before its clean-up
    (store.backup_dir / "part-00000.parquet").write_bytes(b"old")
    summary = regrade(store.root, workers=1)
    assert summary["samples"] == 4 and _rows(store.root) == 4 and not store.backup_dir.exists()


def _shard(path: Path, index: int, ids: list[str], records: list[SampleRecord]) -> Path:
    store = RunStore(path)
    shard = {"index": index, "count": 2, "problem_ids": {"t": ids}, "task_sizes": {"t": 4}}
    store.write_run(RunRecord(k=2, status="complete", model=ModelInfo(path="/m"), shard=shard,
                              tasks={"t": task_entry(ids, 2, version="1", source="t", data_hash="h")}))
    store.append(records)
    return path


def test_merge_refuses_duplicated_keys_before_writing(tmp_path: Path) -> None:
    first = _shard(tmp_path / "s0", 0, ["a", "b"], _records(["a", "b"]))
    doubled = _records(["c", "d"])
    doubled[1].sample_idx = 0  # d's samples are 0 and 1, c's are 0 and 0: the count is right, a key is doubled
    second = _shard(tmp_path / "s1", 1, ["c", "d"], doubled)
    out = tmp_path / "merged"
    with pytest.raises(Pr1EvalError, match=r"sample t/c#0 is stored twice"):
        merge_shards([first, second], out)
    assert not out.exists()  # nothing written


def test_a_killed_merge_is_redone_by_the_same_command(tmp_path: Path) -> None:
    shards = [_shard(tmp_path / "s0", 0, ["a", "b"], _records(["a", "b"])),
              _shard(tmp_path / "s1", 1, ["c", "d"], _records(["c", "d"]))]
    out = tmp_path / "merged"
    killed = RunStore(out)  # what a merge killed after its first shard leaves
    killed.write_run(RunRecord(k=2, status="merging"))
    killed.append(_records(["a", "b"]))
    merge_shards(shards, out)
    assert _rows(out) == 8 and json.loads((out / "run.json").read_text())["status"] == "complete"
    assert len(RunStore(out).read_frame()) == 8  # no key twice


#: Writes a page over argv[1] with write_atomic, SIGKILLed once half of it is on disk.
KILLED_PAGE = """
import os, signal, sys
from pr1_eval.store import safe_write
real = os.fsync
def fsync(fd):
    os.kill(os.getpid(), signal.SIGKILL)
safe_write.os.fsync = fsync
safe_write.write_atomic(sys.argv[1], "<html>" + "x" * 1_000_000 + "</html>")
"""


def test_an_output_page_killed_mid_write_leaves_the_old_page(tmp_path: Path) -> None:
    page = tmp_path / "board.html"
    page.write_text("<html>old</html>")
    done = subprocess.run([sys.executable, "-c", KILLED_PAGE, str(page)], env=ENV, timeout=scaled(120))
    assert done.returncode == -signal.SIGKILL
    assert page.read_text() == "<html>old</html>"  # never a 0-byte or cut-short page
    done = subprocess.run([sys.executable, "-c", KILLED_PAGE, str(tmp_path / "new.html")], env=ENV, timeout=scaled(120))
    assert not (tmp_path / "new.html").exists()


def test_leaderboard_html_refuses_a_run_s_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.cli.main import main

    store = _run(tmp_path / "runs" / "r", ["a"])
    before = store.run_json_path.read_bytes()
    assert main(["leaderboard", str(tmp_path / "runs"), "--html", str(store.run_json_path)]) == 2
    assert "that is a run's own file" in capsys.readouterr().err
    assert store.run_json_path.read_bytes() == before
