"""Replaced means gone from view: a run moved aside by ``import --replace`` (and the copies older
versions kept beside a run, or in ``ROOT.superseded``) is counted by no aggregator — the report's
search, the analysis loader, the leaderboard, the dashboard's run list and the notebooks' loader —
while ``report`` names it; and ``import --out`` into a folder of runs is refused naming them.

The current run holds 2 problems × k 2, all wrong; the replaced copy 4 problems × k 2, all right:
any aggregator that counted the copy would show 12 samples, or an accuracy above 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.leaderboard.board import build_leaderboard
from analysis.runs.index import runs_signature
from analysis.runs.loader import load_runs
from analysis.runs.notebooks import load_notebook_runs
from pr1_eval.cli.main import main
from pr1_eval.store.discovery import aside_runs, find_runs
from pr1_eval.store.out_folder import set_aside
from tests.support.leaderboard_fixtures import write_counts_run

TASK = "aime24"


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    old = write_counts_run(runs, "A", {TASK: {f"p{i}": 2 for i in range(4)}}, k=2)
    aside = set_aside(old)  # what import --replace does before it writes the new run
    assert aside is not None and aside.parent == runs.resolve() / ".replaced"
    write_counts_run(runs, "A", {TASK: {f"q{i}": 0 for i in range(2)}}, k=2)
    shutil.copytree(aside, runs / "B.replaced-20250101T000000Z")  # as older versions kept it, beside the run
    shutil.copytree(aside, tmp_path / "runs.superseded" / "train" / "step-000001.replaced-20250101T000000Z")
    return tmp_path


def test_discovery_finds_only_the_current_run_and_names_the_copies(parent: Path) -> None:
    assert find_runs(parent) == [parent / "runs" / "A"]
    assert len(aside_runs(parent)) == 3


def test_every_aggregator_counts_only_the_listed_run(parent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_runs(parent, tokenizer=None)  # what analyze reads
    assert len(loaded.samples) == 4 and set(loaded.samples["run"]) == {"A"}
    assert not loaded.samples["correct"].astype(bool).any()
    board = build_leaderboard(parent)
    assert [row["name"] for row in board["runs"]] == ["A"]
    assert [d for d, _ in runs_signature([str(parent)])] == [str((parent / "runs" / "A").resolve())]  # dashboard
    notebook = load_notebook_runs(parent)
    assert len(notebook.samples) == 4 and notebook.samples["run"].nunique() == 1


def test_report_names_the_replaced_run(parent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (aside,) = (parent / "runs" / ".replaced").iterdir()
    assert main(["report", str(aside)]) == 0
    assert "note: replaced on " in capsys.readouterr().out
    assert main(["report", str(parent / "runs")]) == 2
    err = capsys.readouterr().err
    assert "holds 1 (besides 2 replaced run(s) kept aside, which nothing counts: " in err
    assert f"{aside}, replaced on " in err and "did you mean" in err


def test_a_restored_copy_is_counted_again_and_its_report_says_so(parent: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Restoring (docs/guides/run-safety.md): move the copy out of .replaced/ under a new name.
    Issue 48 N14: the report of the restored copy still said no search counts it."""
    (aside,) = (parent / "runs" / ".replaced").iterdir()
    assert main(["report", str(aside)]) == 0
    assert "this copy is kept where no search finds it" in capsys.readouterr().out
    restored = parent / "runs" / "A-restored"
    shutil.move(aside, restored)
    assert find_runs(parent) == [parent / "runs" / "A", restored]
    assert main(["report", str(restored)]) == 0
    out = capsys.readouterr().out
    assert "no search finds it" not in out
    assert f"this copy was restored to {restored}, outside .replaced/, so a report, leaderboard or analysis" in out


def test_import_into_a_folder_of_runs_is_refused_naming_them(parent: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"task": "t", "problem_id": "1", "sample_idx": 0, "response": "1", "gold": "1"}) + "\n")
    assert main(["import", str(rows), "--out", str(parent / "runs"), "--grade-workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "holds 1 run(s) below it (A)" in err and not (parent / "runs" / "run.json").exists()
