"""An answers-only import (``import --format parallel-probe``) is never read as a model that never
branches: its structure and token-latency figures are absent and stated as not measured on the
report, the leaderboard, analyze's tables (the dashboard's Behaviour and Efficiency pages read the
same functions) and its run is named apart from its task.

Before: ``report`` printed ``parallel 0.000``, ``format_ok 1.000`` and a latency table in characters
with ``speedup 1.00x``; the leaderboard's parallel ratio was 0.0; analyze said "no parallel blocks"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.leaderboard.board import build_leaderboard
from analysis.runs.loader import load_runs
from analysis.structure.branching import mark_unmeasurable, measured_samples, structure_stats
from pr1_eval.cli.main import main
from pr1_eval.records.run import ANSWERS_ONLY
from tests.support.probe_fixtures import write_trajectories


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("answers-only")
    source = write_trajectories(root / "Qwen3-8B__aime24.json", questions=3, branches=8)
    assert main(["import", str(source), "--format", "parallel-probe", "--out", str(root / "qwen3-8b" / "aime24")]) == 0
    return root / "qwen3-8b" / "aime24"


def test_report_says_not_measured(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["report", str(imported), "--json"]) == 0
    task = json.loads(capsys.readouterr().out)["tasks"]["aime24"]
    assert task["parallel_ratio"] is None and task["format_ok_ratio"] is None
    assert task["speedup"] is None and task["critical_path_per_sample"] is None and task["length_unit"] is None
    assert main(["report", str(imported)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("task ") and " parallel " in line)
    shown = dict(zip(lines[at].split()[-4:], lines[at + 1].split()[-4:], strict=True))  # the table's last columns
    shown = {head: value for head, value in shown.items() if head in ("parallel", "format_ok")}
    assert shown == {"parallel": "n/a", "format_ok": "n/a"}  # not 0.000 / 1.000
    assert f"parallel, format_ok {ANSWERS_ONLY}" in text and f"token latency: {ANSWERS_ONLY}" in text
    assert "speedup" not in text and " char" not in text


def test_leaderboard_and_analysis_say_not_measured(imported: Path) -> None:
    doc = build_leaderboard([imported])
    (run,) = doc["runs"]
    assert run["name"] == "qwen3-8b/aime24"  # not "aime24", the task's name
    cell = run["tasks"]["aime24"]
    assert cell["parallel_ratio"] is None and cell["first_block_rel_pos"] is None and cell["speedup"] is None
    assert run["average"]["parallel_ratio"] is None
    assert any(ANSWERS_ONLY in note for note in doc["notes"])
    loaded = load_runs([imported], tokenizer=None)
    stats = mark_unmeasurable(structure_stats(loaded.samples, by=["run", "task"]), loaded.run_info)
    assert stats["parallel_ratio"].tolist() == [None] and stats["format_ok_ratio"].tolist() == [None]
    assert stats["notes"].iat[0].startswith(f"structure {ANSWERS_ONLY}") and "no parallel blocks" not in stats["notes"].iat[0]
    kept, notes = measured_samples(loaded.samples, loaded.run_info)
    assert kept.empty and notes == [f"token latency of qwen3-8b/aime24: {ANSWERS_ONLY}"]
