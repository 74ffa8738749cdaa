"""Per-task metrics from a run's samples: the numbers ``pr1-eval report`` prints.

Everything is computed from ``samples.parquet`` plus what ``run.json`` declares (each task's
problems and samples per problem), so anyone holding the two files can recompute a report.

:func:`run_report` returns a :class:`pr1_eval.report.schema.RunReport`; its fields (and their
documentation, :func:`pr1_eval.report.schema.json_schema`) are the ``report --json`` schema. A
task's numbers are in ``metrics`` only when the task is complete against run.json; an incomplete
task has ``partial`` numbers over its problems that hold all k samples, so a reader of
``metrics`` never averages a subset by accident.

Decision: no key is named ``pass@K_paper`` (nor ``mean_paper``). The paper calls its number
"Pass@16", but it is VERL's bootstrap best@K, not the unbiased Pass@K that ``pass@K`` is, so a
``pass@…`` name would invite comparing two different estimators. The paper's Pass@16 is
``best@K_paper`` everywhere (report, leaderboard, dashboard, notebooks, lm-eval tasks).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SCORED_STATUSES
from pr1_eval.report.completeness import TaskCompleteness, check_completeness
from pr1_eval.report.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    MAJ_TIE_RULE,
    PER_PROBLEM_METRICS,
    bootstrap_ci,
    bootstrap_settings,
    majority_correct,
    parallel_ratio,
    problem_values,
)
from pr1_eval.report.schema import Interval, RunReport, TaskMetrics, TaskReport


def _verdicts(column: pd.Series) -> list[bool]:
    """None/NaN (could not score) counts as not correct."""
    return [bool(x) if x is not None and not pd.isna(x) else False for x in column]


def _problem_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per problem, in problem-id order (so intervals do not depend on row order): n samples,
    c correct (math-verify), c_paper (paper's checker), majority verdict. One sort and one pass over
    the rows (a group-by per problem cost seconds on a sweep's thousands of problems)."""
    ids = frame["problem_id"].astype(str)
    order = pd.DataFrame({"pid": ids.to_numpy(), "idx": frame["sample_idx"].to_numpy()}).sort_values(
        ["pid", "idx"], kind="stable").index.to_numpy()
    pids = ids.to_numpy()[order]
    correct = np.array(_verdicts(frame["correct"]), dtype=bool)[order]
    correct_paper = np.array(_verdicts(frame["correct_paper"]), dtype=bool)[order]
    classes = [None if pd.isna(c) else int(c) for c in frame["answer_class"].to_numpy()[order]]
    edges = [0, *(np.flatnonzero(pids[1:] != pids[:-1]) + 1).tolist(), len(pids)] if len(pids) else [0]
    rows = [{"problem_id": str(pids[a]), "n": b - a, "c": int(correct[a:b].sum()), "c_paper": int(correct_paper[a:b].sum()),
             "maj": majority_correct(classes[a:b], correct[a:b].tolist())} for a, b in zip(edges, edges[1:], strict=False)]
    return pd.DataFrame(rows, columns=["problem_id", "n", "c", "c_paper", "maj"])


def parallel_mask(frame: pd.DataFrame) -> pd.Series:
    """Which samples of ``frame`` open a ``<Parallel>`` block: the ``has_parallel`` column, the
    count behind every parallel ratio (:func:`pr1_eval.report.metrics.parallel_ratio`)."""
    return frame["has_parallel"].astype(bool)


def _mean_of(frame: pd.DataFrame, column: str) -> float | None:
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return float(values.mean()) if len(values) else None


def metrics_of(frame: pd.DataFrame, k: int) -> TaskMetrics:
    """The metrics of samples in which every problem holds at least ``k`` samples."""
    problems = _problem_table(frame)
    per_problem: dict[str, list[float]] = {name: [] for name in PER_PROBLEM_METRICS}
    for n, c, c_paper, maj in zip(problems["n"], problems["c"], problems["c_paper"], problems["maj"], strict=True):
        for name, value in problem_values(int(n), int(c), int(c_paper), bool(maj), k).items():
            per_problem[name].append(value)
    means = {name: float(np.mean(values)) for name, values in per_problem.items()}
    return TaskMetrics(
        k=k, **means,
        parallel_ratio=parallel_ratio(int(parallel_mask(frame).sum()), len(frame)),
        format_ok_ratio=float(frame["format_ok"].astype(bool).mean()),
        mean_response_tokens=_mean_of(frame, "n_response_tokens"),
        truncated_ratio=float((frame["finish_reason"] == "length").mean()),
        no_answer_ratio=float((frame["grade_status"] == "no_answer").mean()),
        n_unscored=int((~frame["grade_status"].isin(SCORED_STATUSES)).sum()),
        ci95={name: _ci(per_problem[name]) for name in TaskMetrics.CI_FIELDS},
        ci95_bootstrap=bootstrap_settings(BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
        engine_calls_per_sample=_mean_of(frame, "engine_calls"),
        tokens_per_sample=_mean_of(frame, "n_response_tokens"),
        critical_path_tokens_per_sample=_mean_of(frame, "critical_path_tokens"),
    )


def _ci(values: list[float]) -> Interval | None:
    return bootstrap_ci(values, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)


def task_report(frame: pd.DataFrame, check: TaskCompleteness) -> TaskReport:
    """One task's report from its samples and its completeness check."""
    held = frame.groupby("problem_id", sort=False).size() if len(frame) else pd.Series(dtype=int)
    full = [str(pid) for pid, n in held.items() if n >= check.k]
    metrics = None
    if check.k >= 1 and full:
        metrics = metrics_of(frame[frame["problem_id"].astype(str).isin(full)], check.k)
    return TaskReport(
        complete=check.complete, k=check.k, n_problems=len(full), n_problems_expected=check.n_problems_expected,
        n_samples=int(len(frame)), missing_problems=check.missing_problems, n_missing_problems=check.n_missing_problems,
        short_problems=check.short_problems, undeclared_problems=check.undeclared_problems, part_of=check.part_of,
        incomplete_reason=None if check.complete else check.describe(),
        metrics=metrics if check.complete else None, partial=None if check.complete else metrics)


def run_report(frame: pd.DataFrame, k: int | None = None, *, run: RunRecord | None = None) -> RunReport:
    """The report of a run's samples.

    With ``run`` (the run's record) every task is checked against the problems and k it declares; without it,
    against ``k`` (else the most samples any problem holds) over the problems present.
    """
    completeness = check_completeness(run, frame, k)
    tasks: dict[str, TaskReport] = {}
    for name, check in completeness.tasks.items():
        group = frame[frame["task"].astype(str) == name] if len(frame) else frame
        tasks[name] = task_report(group, check)
    ks = {task.k for task in tasks.values()}
    return RunReport(k=ks.pop() if len(ks) == 1 else None, status=completeness.status, complete=completeness.complete,
                     incomplete=completeness.problems(),
                     advice=None if completeness.complete else completeness.advice(),
                     shard=completeness.shard_label(), warnings=completeness.warnings(), maj_tie_rule=MAJ_TIE_RULE,
                     tasks=tasks)
