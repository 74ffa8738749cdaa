"""Per-task metrics from a run's samples: the numbers ``pr1-eval report`` prints.

Everything is computed from ``samples.parquet`` alone (plus K from ``run.json``), so a report
can be recomputed independently by anyone holding the file. A task whose problems do not all
have the same number of samples is reported as incomplete, naming the problems, never averaged.
Samples that could not be scored (``timeout``/``error``) count as not correct and are reported
as ``n_unscored`` so they are never silently hidden.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pr1_eval.metrics import bootstrap_ci, majority_correct, pass_at_k, pass_at_k_paper
from pr1_eval.records import SCORED_STATUSES


def _problem_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per problem: n samples, c correct, majority verdict."""
    rows = []
    for pid, group in frame.groupby("problem_id", sort=False):
        group = group.sort_values("sample_idx")
        correct = [bool(x) if x is not None and not pd.isna(x) else False for x in group["correct"]]
        classes = [None if pd.isna(c) else int(c) for c in group["answer_class"]]
        rows.append({"problem_id": pid, "n": len(group), "c": int(sum(correct)), "maj": majority_correct(classes, correct)})
    return pd.DataFrame(rows)


def _ci(values: list[float]) -> list[float] | None:
    interval = bootstrap_ci(values)
    return None if interval is None else [interval[0], interval[1]]


def _forkjoin_stats(frame: pd.DataFrame) -> dict[str, float | None]:
    """Mean engine calls, generated tokens and critical-path tokens per sample."""
    def mean_of(column: str) -> float | None:
        values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
        return float(values.mean()) if len(values) else None

    return {
        "engine_calls_per_sample": mean_of("engine_calls"),
        "tokens_per_sample": mean_of("n_response_tokens"),
        "critical_path_tokens_per_sample": mean_of("critical_path_tokens"),
    }


def task_metrics(frame: pd.DataFrame, k: int) -> dict[str, Any]:
    """Metrics of one task's samples; K is the run's k (pass@K, mean@K, maj@K)."""
    problems = _problem_table(frame)
    n_max = int(problems["n"].max()) if len(problems) else 0
    incomplete = problems[problems["n"] != n_max]
    if len(incomplete) or n_max < k:
        expected = max(n_max, k)
        short = problems[problems["n"] < expected]
        return {
            "n_problems": len(problems),
            "n_samples": int(len(frame)),
            "incomplete": {str(pid): int(n) for pid, n in zip(short["problem_id"], short["n"], strict=True)},
            "expected_samples_per_problem": expected,
        }
    n = n_max
    mean_per = (problems["c"] / n).tolist()
    pass_k = [pass_at_k(n, c, k) for c in problems["c"]]
    pass_1 = [pass_at_k(n, c, 1) for c in problems["c"]]
    pass_paper = [pass_at_k_paper(n, c, k) for c in problems["c"]]
    unscored = int((~frame["grade_status"].isin(SCORED_STATUSES)).sum())
    tokens = frame["n_response_tokens"].dropna()
    result: dict[str, Any] = {
        "n_problems": len(problems),
        "n_samples": int(len(frame)),
        f"mean@{k}": float(np.mean(mean_per)),
        "pass@1": float(np.mean(pass_1)),
        f"pass@{k}": float(np.mean(pass_k)),
        f"pass@{k}_paper": float(np.mean(pass_paper)),
        f"maj@{k}": float(problems["maj"].mean()),
        "mean_paper": float(frame["correct_paper"].fillna(False).astype(bool).mean()),
        "parallel_ratio": float(frame["has_parallel"].astype(bool).mean()),
        "format_ok_ratio": float(frame["format_ok"].astype(bool).mean()),
        "mean_response_tokens": float(tokens.mean()) if len(tokens) else None,
        "truncated_ratio": float((frame["finish_reason"] == "length").mean()),
        "no_answer_ratio": float((frame["grade_status"] == "no_answer").mean()),
        "n_unscored": unscored,
        "ci95": {f"mean@{k}": _ci(mean_per), f"pass@{k}": _ci(pass_k)},
    }
    result.update(_forkjoin_stats(frame))
    return result


def run_report(frame: pd.DataFrame, k: int | None = None) -> dict[str, Any]:
    """``{"k": K, "tasks": {task: metrics}}`` for every task in the frame."""
    tasks: dict[str, Any] = {}
    for task, group in frame.groupby("task", sort=False):
        task_k = k or int(group.groupby("problem_id").size().max())
        tasks[str(task)] = task_metrics(group, task_k)
    return {"k": k, "tasks": tasks}


def format_report_table(report: dict[str, Any]) -> str:
    """A fixed-width summary table (one line per task) for the terminal."""
    k = report.get("k")
    head = ["task", "problems", "samples", f"mean@{k}", "pass@1", f"pass@{k}", f"pass@{k}_paper", f"maj@{k}", "parallel", "format_ok", "tokens"]
    lines = ["  ".join(f"{h:>12}" for h in head)]
    for task, m in report["tasks"].items():
        if "incomplete" in m:
            names = ", ".join(list(m["incomplete"])[:5])
            lines.append(f"{task:>12}  INCOMPLETE: {len(m['incomplete'])} problem(s) have fewer than "
                         f"{m['expected_samples_per_problem']} samples ({names}…); rerun the same command to finish")
            continue
        kk = k or m["n_samples"] // max(m["n_problems"], 1)
        cells = [task, m["n_problems"], m["n_samples"], m[f"mean@{kk}"], m["pass@1"], m[f"pass@{kk}"], m[f"pass@{kk}_paper"],
                 m[f"maj@{kk}"], m["parallel_ratio"], m["format_ok_ratio"], m["mean_response_tokens"]]
        lines.append("  ".join(f"{c:>12.4f}" if isinstance(c, float) else f"{c!s:>12}" for c in cells))
    return "\n".join(lines)
