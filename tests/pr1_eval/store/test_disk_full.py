"""A full disk, simulated where the bytes are written (the parquet writer, the fsync of an output):
every writer says "no space left on DIR (need about N MB)" in one line, what was stored stays
intact (rows counted with pyarrow, run.json byte for byte), and the same command resumes once
there is space again."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store import run_store
from pr1_eval.store.run_store import RunStore


def _rows(run: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in (run / "samples.parquet").glob("part-*.parquet"))


def _records(ids: list[str]) -> list[SampleRecord]:
    return [SampleRecord(task="t", problem_id=pid, sample_idx=0, response="Final Answer: 1", gold="1") for pid in ids]


def _full_parquet(monkeypatch: pytest.MonkeyPatch, *, with_errno: bool = True) -> None:
    """The parquet writer runs out of space half-way through a part (as pyarrow reports it, with
    or without an errno)."""
    def write_part(table: Any, path: Path) -> None:
        path.write_bytes(b"PAR1" + b"\0" * 100)
        if with_errno:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        raise OSError(f"Error writing bytes to file. Detail: [errno 28] No space left on device ({path})")
    monkeypatch.setattr(run_store, "_write_part", write_part)


@pytest.mark.parametrize("with_errno", [True, False])
def test_an_append_on_a_full_disk_keeps_the_stored_chunks_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    with_errno: bool) -> None:
    store = RunStore(tmp_path / "run")
    store.append(_records(["a", "b"]))
    with monkeypatch.context() as patch:
        _full_parquet(patch, with_errno=with_errno)
        with pytest.raises(Pr1EvalError) as caught:
            store.append(_records(["c"]))
    message = str(caught.value)
    assert message.startswith(f"no space left on {store.samples_dir} (need about ") and " MB" in message
    assert "\n" not in message and "rerun the same command" in message
    assert _rows(store.root) == 2 and not list(store.samples_dir.glob(".part-*"))  # intact, no stray file
    store.append(_records(["c"]))  # space again: the same write goes through
    assert _rows(store.root) == 3


def test_a_regrade_on_a_full_disk_leaves_the_run_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.grading.regrade import regrade

    store = RunStore(tmp_path / "run")
    store.write_run(RunRecord(k=1, status="complete",
                              tasks={"t": task_entry(["a", "b"], 1, version=None, source="t", data_hash=None)}))
    store.append(_records(["a", "b"]))
    before = store.run_json_path.read_bytes()
    with monkeypatch.context() as patch:
        _full_parquet(patch)
        with pytest.raises(Pr1EvalError, match=f"^no space left on {store.root} \\(need about "):
            regrade(store.root, workers=1)
    assert _rows(store.root) == 2 and store.run_json_path.read_bytes() == before
    assert not store.staging_dir.exists()
    assert regrade(store.root, workers=1)["samples"] == 2  # and the regrade resumes


def test_run_json_on_a_full_disk_keeps_the_old_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path / "run")
    store.write_run(RunRecord(k=1, status="running"))
    before = store.run_json_path.read_bytes()

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(Pr1EvalError, match=f"^no space left on {store.root} "):
        store.write_run(RunRecord(k=1, status="complete"))
    monkeypatch.undo()
    assert store.run_json_path.read_bytes() == before and [p.name for p in store.root.iterdir()] == ["run.json"]


def test_an_import_on_a_full_disk_says_so_in_one_line_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"task": "t", "problem_id": p, "sample_idx": 0, "response": "Final Answer: 1",
                                        "gold": "1"}) + "\n" for p in "abc"))
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        _full_parquet(patch)
        assert main(["import", str(rows), "--out", str(out), "--grade-workers", "1"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: no space left on {out} (need about "), errors
    assert main(["import", str(rows), "--out", str(out), "--grade-workers", "1"]) == 0  # the same command resumes
    assert _rows(out) == 3 and json.loads((out / "run.json").read_text())["status"] == "complete"


def test_an_output_page_on_a_full_disk_keeps_the_old_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.store.safe_write import write_atomic

    page = tmp_path / "board.html"
    page.write_text("<html>old</html>")

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(Pr1EvalError, match=rf"^no space left on {tmp_path} \(need about 2\.0 MB, .* MB free\)"):
        write_atomic(page, "x" * 2_000_000)
    monkeypatch.undo()
    assert page.read_text() == "<html>old</html>" and [p.name for p in tmp_path.iterdir()] == ["board.html"]


def test_any_command_s_full_disk_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import pr1_eval.cli.report as report

    def full(args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.csv"))
    monkeypatch.setattr(report, "_cmd_report", full)
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: no space left on {tmp_path} (") and len(err.strip().splitlines()) == 1
