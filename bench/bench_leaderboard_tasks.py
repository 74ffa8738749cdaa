"""``leaderboard`` on many tasks: every cell of a run from one pass over its samples, against one task at a time.

Why: a run of 3,000 tasks (lm-eval subtasks) took minutes to rank, about 30 ms of pandas per run ×
task cell. The leaderboard now reports every task of a run in one pass (``run_report`` over the
run's columns converted once, :mod:`pr1_eval.report.task_arrays`) and takes the branching statistics
of every task from the same conversion (:func:`analysis.leaderboard.board.branching_by_task`).

This builds two imported runs (steps 100 and 200) of ``--tasks`` tasks × 4 problems × k=2 and, in
one process on the same loaded samples, times with ``time.process_time`` (CPU: the machine may be
shared):

1. ``one pass``: :func:`analysis.leaderboard.board.compute_leaderboard` as it is;
2. ``per task``: the same with each row's cells taken one task at a time (``run_report`` of each
   task's frame and :func:`analysis.structure.branching.branching_stats` of it, the route before the one pass).

Both documents must be identical (``json.dumps(sort_keys=True)``), else the bench fails. The per-task
baseline runs today's array code on each task's frame, so it is cheaper than the pandas code it
replaced (the 3,000-task leaderboard document took 93 s CPU on the code before the one pass, 10 s
after, measured on one machine): the ratio understates the gain.

Usage: python bench/bench_leaderboard_tasks.py [--tasks 3000]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

import analysis.leaderboard.board as leaderboard
from analysis.runs.loader import LoadedRuns, load_runs
from analysis.structure.branching import branching_stats
from pr1_eval.ingest.importer import import_jsonl
from pr1_eval.report.run_report import run_report


def build(root: Path, n_tasks: int) -> Path:
    """Two imported runs of ``n_tasks`` tasks × 4 problems × 2 samples; verdicts vary with task and run."""
    for r, step in enumerate((100, 200)):
        rows = [{"task": f"task{t:05d}", "problem_id": f"p{p}", "sample_idx": s, "gold": "1",
                 "model": f"/x/global_step_{step}",
                 "response": "<Parallel><Path>a</Path><Path>b</Path></Parallel> Final Answer: "
                             + ("1" if (p + s + r + t) % 3 else "2")}
                for t in range(n_tasks) for p in range(4) for s in range(2)]
        source = root / f"r{r}.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        with contextlib.redirect_stderr(io.StringIO()):  # one "not a packaged benchmark" note per task
            import_jsonl(source, root / "runs" / f"step{step}", workers=0)
    return root / "runs"


def per_task_row(meta: leaderboard.RunMeta, samples: pd.DataFrame, tasks: list[str], average: str,
                 missing: list[str]) -> dict[str, Any]:
    """:func:`analysis.leaderboard.board._run_row` one task at a time: the baseline."""
    by_task = {str(task): group for task, group in samples.groupby("task", sort=False)}
    cells = {}
    for task in tasks:
        report = run_report(by_task[task], meta.task_k[task]).tasks[task]
        metrics = report.metrics_or_partial
        assert metrics is not None
        cells[task] = leaderboard._task_cell(metrics, report.n_problems, report.n_samples, branching_stats(by_task[task]))
    return {"name": meta.name, "model": meta.model, "family": meta.family, "step": meta.step,
            "decoding": meta.decoding, "path": meta.path, "k": meta.k, "answer_policy": meta.answer_policy,
            "complete": not missing, "missing": missing, "tasks": cells,
            "average": leaderboard._average(cells, meta.k, average)}


def timed(loaded: LoadedRuns) -> tuple[float, str]:
    """CPU seconds of one leaderboard and its document as sorted JSON."""
    started = time.process_time()
    document = leaderboard.compute_leaderboard(loaded).document
    return time.process_time() - started, json.dumps(document, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_runs([str(build(Path(tmp), args.tasks))], tokenizer=None,
                           columns=leaderboard.LEADERBOARD_COLUMNS, blocks=False)
        first = loaded.samples["task"].iloc[0]  # warm both routes' shared caches (resample draws) alike
        timed(dataclasses.replace(loaded, samples=loaded.samples[loaded.samples["task"] == first]))
        one_pass_s, one_pass = timed(loaded)
        batched_row = leaderboard._run_row
        leaderboard._run_row = per_task_row  # type: ignore[assignment]
        try:
            per_task_s, per_task = timed(loaded)
        finally:
            leaderboard._run_row = batched_row  # type: ignore[assignment]
    if one_pass != per_task:
        raise SystemExit("bench_leaderboard_tasks: the one-pass document differs from the per-task one")
    cells = 2 * args.tasks
    print(f"leaderboard, {args.tasks} tasks × 2 runs × 4 problems × k=2 (CPU): one pass {one_pass_s:.2f} s "
          f"({1e3 * one_pass_s / cells:.2f} ms a cell), per task {per_task_s:.2f} s ({1e3 * per_task_s / cells:.2f} ms "
          f"a cell); new/old {one_pass_s / max(per_task_s, 1e-9):.2f}; documents identical")


if __name__ == "__main__":
    main()
