"""Invalid run records are refused alike by every reader; a k below the stored samples is flagged
(issue 48 N11).

Before the fix: ``k: -1`` gave ``complete: true`` with no metrics in ``report`` while the
leaderboard refused; ``status: "weird"`` was incomplete to ``report`` and ranked complete by the
leaderboard; a k edited from 2 to 1 printed mean@1 over 2 samples with no note; a negative
``sample_idx`` in a part was read as it is; a VERL step file named past int64 was imported and
broke the leaderboard later with ``OverflowError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pr1_eval.cli.main import main
from tests.support.analysis_fixtures import make_record, write_run

READERS = [["report", "{run}", "--json"], ["leaderboard", "{run}", "--json"],
           ["analyze", "{run}", "--no-embeddings", "--json", "--out", "{out}"]]


def _run(tmp_path: Path) -> Path:
    """Two problems, two samples each (one right answer in three of four)."""
    records = [make_record("t", p, i, f"Final Answer: {5 if (p, i) != ('b', 1) else 4}", correct=(p, i) != ("b", 1))
               for p in ("a", "b") for i in range(2)]
    return write_run(tmp_path, "r", records)


def _edit(run: Path, change: Any) -> None:
    record = json.loads((run / "run.json").read_text())
    change(record)
    (run / "run.json").write_text(json.dumps(record))


def _read(argv: list[str], run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main([a.format(run=run, out=tmp_path / "o") for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return status, out, err


@pytest.mark.parametrize(("change", "words"), [
    (lambda r: r.update(k=0), ["'k'", "from 1", "found 0"]),
    (lambda r: r.update(k=-1), ["'k'", "from 1", "found -1"]),
    (lambda r: r["tasks"]["t"].update(k=0), ["'tasks.t.k'", "found 0"]),
    (lambda r: r.update(status="weird"), ["'status'", "'weird'", "running, importing, merging, complete"]),
    (lambda r: r["model"].update(step=10**20), ["'model.step'", str(10**20)]),
    (lambda r: r["model"].update(step=-5), ["'model.step'", "found -5"]),
], ids=["k 0", "k -1", "task k 0", "status weird", "step 1e20", "step -5"])
@pytest.mark.parametrize("argv", READERS, ids=["report", "leaderboard", "analyze"])
def test_an_invalid_record_is_refused_by_every_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, change: Any,
                                                        words: list[str], argv: list[str]) -> None:
    monkeypatch.setenv("PR1_CACHE", "off")
    run = _run(tmp_path)
    _edit(run, change)
    status, out, err = _read(argv, run, tmp_path, capsys)
    assert status in (1, 2), (status, out)
    line = next(line for line in err.splitlines() if str(run / "run.json") in line)
    assert all(w in line for w in words), line
    if argv[0] == "leaderboard":
        assert not out.strip() or json.loads(out)["runs"] == []  # not ranked


def test_a_k_lowered_below_the_stored_samples_is_flagged_by_report_and_leaderboard(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    _edit(run, lambda r: (r.update(k=1), r["tasks"]["t"].update(k=1)))
    status, out, _ = _read(["report", "{run}", "--json"], run, tmp_path, capsys)
    report = json.loads(out)
    assert report["complete"] is False, report
    assert "2 problem(s) hold more than k=1 samples (a: 2, b: 2)" in json.dumps(report)
    status, out, err = _read(["leaderboard", "{run}", "--json"], run, tmp_path, capsys)
    assert status != 0 and (not out.strip() or json.loads(out)["runs"] == []), out  # incomplete: not ranked
    assert "hold more than k=1 samples" in err, err


def test_a_negative_sample_idx_in_a_part_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    part = next((run / "samples.parquet").glob("part-*.parquet"))
    table = pq.read_table(part)
    idx = table.column_names.index("sample_idx")
    pq.write_table(table.set_column(idx, "sample_idx", [[-1, 1, 0, 1]]), part)
    status, _, err = _read(["report", "{run}"], run, tmp_path, capsys)
    assert status == 2
    assert f"error: {part}: column 'sample_idx' holds -1; a sample index is a whole number from 0" in err


def test_a_verl_step_file_past_int64_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "rollout"
    dump.mkdir()
    name = "99999999999999999999.jsonl"
    (dump / name).write_text(json.dumps({"input": "Problem: 1+1?", "output": "Final Answer: 2", "score": 1.0}) + "\n")
    status, _, err = _read(["import-verl", str(dump), "--out", str(tmp_path / "runs"), "--final", "--no-benchmarks",
                            "--no-grade"], dump, tmp_path, capsys)
    assert status == 2 and f"error: {dump / name}: step 99999999999999999999 is past the largest step" in err
    assert not list((tmp_path / "runs").rglob("run.json"))
