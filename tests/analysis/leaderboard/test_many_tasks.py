"""``leaderboard --html`` past MAX_FIGURE_TASKS / MAX_HEATMAPS tasks: the figures draw the average
over tasks, the heatmaps the tasks whose problems change most; numbers here are counted by hand."""

from __future__ import annotations

import json

import pytest

from analysis.leaderboard import page
from analysis.leaderboard.board import compute_leaderboard
from analysis.leaderboard.schema import TaskCell
from pr1_eval.ingest.importer import import_jsonl

#: run → task → problem → right? (k = 1). a: no problem changes; b: p0 changes; c: both change.
RIGHT = {0: {"a": (1, 0), "b": (1, 1), "c": (1, 1)}, 1: {"a": (1, 0), "b": (0, 1), "c": (0, 0)}}


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> page.Leaderboard:
    root = tmp_path_factory.mktemp("many")
    for run, tasks in RIGHT.items():
        rows = [{"task": task, "problem_id": f"p{p}", "sample_idx": 0, "gold": "1", "model": f"/x/global_step_{run + 1}",
                 "response": f"Final Answer: {1 if ok else 2}"} for task, oks in tasks.items() for p, ok in enumerate(oks)]
        source = root / f"{run}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        import_jsonl(source, root / "runs" / f"run{run}", workers=0)
    return compute_leaderboard([str(root / "runs")])


def test_past_the_limit_the_figures_draw_the_average(board: page.Leaderboard, monkeypatch: pytest.MonkeyPatch) -> None:
    assert page.figure_document(board.document)[0] is board.document  # 3 tasks: drawn one by one
    monkeypatch.setattr(page, "MAX_FIGURE_TASKS", 2)
    drawn, note = page.figure_document(board.document)
    assert drawn["tasks"] == ["average of 3 tasks"] and note is not None and note.startswith("3 tasks:")
    means = {run["name"]: TaskCell.from_json(run["tasks"]["average of 3 tasks"]).mean for run in drawn["runs"]}
    assert means == pytest.approx({"run0": (0.5 + 1 + 1) / 3, "run1": (0.5 + 0.5 + 0) / 3})
    html = page.leaderboard_html(board)
    assert "3 tasks: the figures over checkpoints show their average" in html


def test_past_the_limit_the_heatmaps_are_the_tasks_that_change_most(board: page.Leaderboard,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert page.heatmap_tasks(board) == (["a", "b", "c"], None)
    monkeypatch.setattr(page, "MAX_HEATMAPS", 2)
    shown, note = page.heatmap_tasks(board)
    assert shown == ["c", "b"] and note == "heatmaps of 2 of 3 tasks: those with the most problems that change across checkpoints"
    assert note in page.leaderboard_html(board)
