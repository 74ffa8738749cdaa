"""Outputs that cannot be written say so in one line (issue 48: N3, N12, N13, N16).

Before the fix: ``--out FILE`` and ``--html FILE/lb.html`` raised ``FileExistsError``, a read-only
disk ``OSError [Errno 30]`` from ``tempfile``, a full disk during ``regrade`` named the working
folder, a killed page write left ``.lb.html.*.tmp`` for good, and an unexpected exception was a
bare traceback.
"""

from __future__ import annotations

import errno
import io
import os
import tempfile
import time
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.store.safe_write import write_atomic
from tests.support.analysis_fixtures import make_record, write_run


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


def test_a_page_under_a_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(Pr1EvalError, match=rf"^cannot write {afile}/lb.html: {afile} is a file, not a folder"):
        write_atomic(afile / "lb.html", "<html></html>")
    assert afile.read_text() == "x"


def test_a_read_only_disk_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / ".lb.html.1-x.tmp"))
    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(Pr1EvalError, match=r"^cannot write .*lb\.html: the file system is read-only; pass a path"):
        write_atomic(tmp_path / "lb.html", "<html></html>")


def test_cli_refuses_unwritable_outputs_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["analyze", str(tmp_path), "--no-embeddings", "--out", str(afile)]) == 2
    assert _one_error(capsys) == f"error: --out {afile} is a file, not a folder; pass a folder for the outputs " \
                                 "(it is created if missing)"
    assert main(["leaderboard", str(tmp_path), "--html", str(afile / "lb.html")]) == 2
    assert f"{afile} is a file, not a folder" in _one_error(capsys)
    assert afile.read_text() == "x"


def test_a_killed_writer_s_temporary_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    dead = subprocess_pid_that_exited()
    leftover = tmp_path / f".lb.html.{dead}-abcd1234.tmp"  # what a SIGKILL mid-write leaves
    old = tmp_path / f".other.csv.{os.getppid()}-zz.tmp"  # a live pid, but far too old to be a write under way
    live = tmp_path / f".other.csv.{os.getppid()}-yy.tmp"  # a live writer's: never touched
    foreign = tmp_path / ".notes.tmp"  # not ours
    for path in (leftover, old, live, foreign):
        path.write_text("partial")
    stale = time.time() - 24 * 3600  # a day: past any stale limit
    os.utime(old, (stale, stale))
    write_atomic(tmp_path / "lb.html", "<html></html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["lb.html", live.name, foreign.name])


def subprocess_pid_that_exited() -> int:
    """The pid of a child that has exited and been reaped: a writer that is gone."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_regrade_on_a_full_disk_names_the_run_s_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.store.run_store import RunStore

    run = write_run(tmp_path, "r", [make_record("t", "p", 0, "Final Answer: 5", correct=True)])

    def full(self: RunStore, records: object, chunk_size: int = 0) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # no file name, as some writers raise it
    monkeypatch.setattr(RunStore, "rewrite", full)
    assert main(["regrade", str(run), "--grade-workers", "1"]) == 2
    line = _one_error(capsys)
    assert line.startswith(f"error: no space left on {run} ("), line
    assert str(Path.cwd()) + " (" not in line


def test_an_unexpected_error_is_one_line_and_a_distinct_status(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import pr1_eval.cli.report as report

    def boom(args: object) -> int:
        raise KeyError("surprise")
    monkeypatch.setattr(report, "_cmd_report", boom)
    assert main(["report", str(tmp_path)]) == 70
    line = _one_error(capsys)
    assert line.startswith("error: internal error in pr1-eval report: KeyError: 'surprise' (at test_output_errors.py:")
    assert "PR1_EVAL_TRACEBACK=1" in line

    def denied(args: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x"))
    monkeypatch.setattr(report, "_cmd_report", denied)
    assert main(["report", str(tmp_path)]) == 2
    assert _one_error(capsys).startswith(f"error: cannot access {tmp_path / 'x'}: permission denied")


def test_a_full_cache_disk_during_analyze_still_answers_and_says_everything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """N16: the cache's writer fails with ENOSPC on every write; the analysis is the cache-off one,
    exit 0, and nothing is left in the cache folders."""
    import json

    write_run(tmp_path / "runs", "r", [make_record("t", "p", i, f"Final Answer: {i}", correct=i == 5)
                                       for i in range(4)])
    monkeypatch.setenv("PR1_CACHE", "off")
    args = ["analyze", str(tmp_path / "runs"), "--no-embeddings", "--json", "--out", str(tmp_path / "o1")]
    assert main(args) == 0
    reference = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("PR1_CACHE", str(tmp_path / "cache"))
    cache_dir = str(tmp_path / "cache")
    real_open = io.open

    def opened(file: object, *args: object, **kwargs: object) -> object:
        """A cache file whose close fails as on a full disk (where the error surfaces)."""
        handle = real_open(file, *args, **kwargs)
        if os.readlink(f"/proc/self/fd/{handle.fileno()}").startswith(cache_dir):
            real_close = handle.close

            def close() -> None:
                real_close()
                raise OSError(errno.ENOSPC, "No space left on device")
            handle.close = close
        return handle
    monkeypatch.setattr(io, "open", opened)  # what os.fdopen and tempfile open with
    assert main([*args[:-1], str(tmp_path / "o2")]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["runs"] == reference["runs"]
    assert "Traceback" not in out.err
    assert [p for p in (tmp_path / "cache").rglob("*.tmp")] == []
