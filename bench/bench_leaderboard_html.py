"""``leaderboard --html`` on many tasks: the page's time against N, beside its floor.

Why: with one subplot and one heatmap per task, plotly's cost grew faster than the tasks (3,000
tasks did not finish in 300 s); the page now draws per-task figures only up to
``MAX_FIGURE_TASKS`` tasks (then their average) and heatmaps for ``MAX_HEATMAPS`` tasks
(:mod:`analysis.leaderboard.page`). This times :func:`leaderboard_html` alone: the leaderboard
document of two small imported runs is widened to ``--tasks`` tasks by copying its task cells
and per-problem rows under new names (the statistics behind a cell are not what is measured).
The floor is the page's tables alone (:func:`analysis.leaderboard.page.html_table` of the ranking and
per-task rows), which every page must write.

Usage: python bench/bench_leaderboard_html.py [--tasks 3000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from analysis.leaderboard.board import Leaderboard, compute_leaderboard
from analysis.leaderboard.page import html_table, leaderboard_html
from analysis.leaderboard.tables import ranking_rows, task_rows
from pr1_eval.ingest.importer import import_jsonl


def _runs(root: Path) -> Path:
    for r, step in enumerate((100, 200)):
        rows = [{"task": "t", "problem_id": f"p{p}", "sample_idx": s, "gold": "1", "model": f"/x/global_step_{step}",
                 "response": "<Parallel><Path>a</Path><Path>b</Path></Parallel> Final Answer: "
                             + ("1" if (p + s + r) % 3 else "2")} for p in range(4) for s in range(2)]
        source = root / f"r{r}.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        import_jsonl(source, root / "runs" / f"step{step}", workers=0)
    return root / "runs"


def widened(board: Leaderboard, n_tasks: int) -> Leaderboard:
    """``board`` with its one task copied to ``n_tasks`` tasks (cells, comparisons, per-problem rows)."""
    doc = board.document
    names = [f"task{i:05d}" for i in range(n_tasks)]
    runs = [{**run, "tasks": {name: next(iter(run["tasks"].values())) for name in names}} for run in doc["runs"]]
    comparisons = [{**c, "task": name} for c in doc["comparisons"] for name in names]
    per_problem = pd.concat([board.per_problem.assign(task=name) for name in names], ignore_index=True)
    return Leaderboard({**doc, "tasks": names, "runs": runs, "comparisons": comparisons}, per_problem, board.notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        board = widened(compute_leaderboard([str(_runs(Path(tmp)))]), args.tasks)
    doc = board.document
    started = time.perf_counter()
    floor = html_table(ranking_rows(doc)) + html_table(task_rows(doc))
    floor_s = time.perf_counter() - started
    started = time.perf_counter()
    page = leaderboard_html(board)
    page_s = time.perf_counter() - started
    print(f"leaderboard --html, {args.tasks} tasks × {len(doc['runs'])} runs: {page_s:.2f} s "
          f"({len(page) / 1e6:.1f} MB); floor (tables alone) {floor_s:.2f} s ({len(floor) / 1e6:.1f} MB); "
          f"{page_s / max(floor_s, 1e-9):.1f}× the floor")


if __name__ == "__main__":
    main()
