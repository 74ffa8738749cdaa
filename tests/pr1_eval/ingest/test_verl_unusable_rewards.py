"""A VERL score that is no finite number, and an acc that is no verdict, are not stored as the
file wrote them without a word: each is stored as none (could not score) with a warning naming the
file and line. The audit's case: ``"score": NaN`` (and ``Infinity``, ``1e309``) stored as reward
NaN/inf, ``acc: NaN`` and ``acc: 5`` accepted (5 read as right), with exit 0 and no note."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.store.run_store import RunStore
from tests.support.import_input_fixtures import dump_line


def _import(tmp_path: Path, rows: bytes, capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, object]], str]:
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "5.jsonl").write_bytes(rows)
    capsys.readouterr()
    assert main(["import-verl", str(dump), "--out", str(tmp_path / "runs"), "--final", "--no-benchmarks",
                 "--no-grade"]) == 0
    (run_json,) = (tmp_path / "runs").rglob("run.json")
    table = RunStore(run_json.parent).read_table(columns=["reward", "reward_acc"])
    return table.to_pylist(), capsys.readouterr().err


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e309"])
def test_a_score_that_is_no_finite_number_is_stored_as_no_reward_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str) -> None:
    rows, err = _import(tmp_path, dump_line() + dump_line(score=raw), capsys)
    assert rows == [{"reward": 1.0, "reward_acc": True}, {"reward": None, "reward_acc": True}]
    dump = tmp_path / "dump" / "5.jsonl"
    assert f"warning: {dump}:2: score {raw if raw != '1e309' else 'Infinity'} is not a finite number" in err
    assert "could not score" in err
    assert not any(isinstance(r["reward"], float) and not math.isfinite(r["reward"]) for r in rows)


@pytest.mark.parametrize(("raw", "stored"), [("NaN", None), ("5", None), ("-1", None), ("0.5", None),
                                             ("0", False), ("1.0", True), ("false", False)])
def test_an_acc_that_is_no_verdict_is_stored_as_none_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str, stored: bool | None) -> None:
    rows, err = _import(tmp_path, dump_line() + dump_line(acc=raw), capsys)
    assert rows[1]["reward_acc"] is stored and rows[1]["reward"] == 1.0
    assert ("is not a verdict" in err) == (stored is None)


def test_many_such_rows_print_three_lines_and_a_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows, err = _import(tmp_path, dump_line() + dump_line(score="NaN") * 5, capsys)
    assert [r["reward"] for r in rows] == [1.0, None, None, None, None, None]
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 4 and warnings[-1] == "warning: … and 2 more such row(s) in this step"
