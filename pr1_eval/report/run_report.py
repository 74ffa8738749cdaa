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

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from pr1_eval.records.run import NOT_MEASURABLE, RunRecord
from pr1_eval.records.sample import SCORED_STATUSES
from pr1_eval.report.completeness import TaskCompleteness, check_completeness
from pr1_eval.report.efficiency import Efficiency, efficiency
from pr1_eval.report.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    MAJ_TIE_RULE,
    PER_PROBLEM_METRICS,
    bootstrap_ci,
    bootstrap_settings,
    majority_correct_per_problem,
    parallel_ratio,
    problem_values,
)
from pr1_eval.report.schema import Interval, RunReport, TaskMetrics, TaskReport


def _verdicts(column: pd.Series) -> np.ndarray:
    """None/NaN (could not score) counts as not correct."""
    if column.dtype == bool:
        return column.to_numpy(dtype=bool)
    return np.array([bool(x) if x is not None and not pd.isna(x) else False for x in column], dtype=bool)


def _answer_classes(column: pd.Series, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which samples (in ``order``) gave an answer, and their answer classes as ``int(...)`` reads them (0 where none)."""
    answered = column.notna().to_numpy()[order]
    values = column.to_numpy()
    if values.dtype.kind in "iu":
        return answered, values[order].astype(np.int64)
    classes = np.zeros(len(order), dtype=np.int64)
    classes[answered] = [int(c) for c in column.to_numpy(dtype=object)[order][answered]]
    return answered, classes


def _problem_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per problem, in problem-id order (so intervals do not depend on row order): n samples,
    c correct (math-verify), c_paper (paper's checker), majority verdict. One sort and array sums over
    the problems' runs of rows (a group-by per problem cost seconds on a sweep's thousands of problems)."""
    ids = frame["problem_id"].astype(str)
    order = pd.DataFrame({"pid": ids.to_numpy(), "idx": frame["sample_idx"].to_numpy()}).sort_values(
        ["pid", "idx"], kind="stable").index.to_numpy()
    pids = ids.to_numpy()[order]
    if not len(pids):
        return pd.DataFrame(columns=["problem_id", "n", "c", "c_paper", "maj"])
    correct, correct_paper = _verdicts(frame["correct"])[order], _verdicts(frame["correct_paper"])[order]
    answered, classes = _answer_classes(frame["answer_class"], order)
    starts = np.flatnonzero(np.r_[True, pids[1:] != pids[:-1]])
    return pd.DataFrame({
        "problem_id": [str(p) for p in pids[starts]], "n": np.diff(np.append(starts, len(pids))),
        "c": np.add.reduceat(correct.astype(np.int64), starts), "c_paper": np.add.reduceat(correct_paper.astype(np.int64), starts),
        "maj": majority_correct_per_problem(classes, answered, correct, starts)})


def parallel_mask(frame: pd.DataFrame) -> pd.Series:
    """Which samples of ``frame`` open a ``<Parallel>`` block: the ``has_parallel`` column, the
    count behind every parallel ratio (:func:`pr1_eval.report.metrics.parallel_ratio`)."""
    return frame["has_parallel"].astype(bool)


def _mean_of(frame: pd.DataFrame, column: str) -> float | None:
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return float(values.mean()) if len(values) else None


def metrics_of(frame: pd.DataFrame, k: int, measurable: bool = True) -> TaskMetrics:
    """The metrics of samples in which every problem holds at least ``k`` samples; without
    ``measurable`` (the tags were stripped) the structure figures are None, never a count of
    tags that cannot be there."""
    problems = _problem_table(frame)
    per_problem: dict[str, list[float]] = {name: [] for name in PER_PROBLEM_METRICS}
    seen: dict[tuple[int, int, int, bool], dict[str, float]] = {}  # few distinct problems: n, c ≤ k
    for key in zip(problems["n"].tolist(), problems["c"].tolist(), problems["c_paper"].tolist(),
                   problems["maj"].tolist(), strict=True):
        if key not in seen:
            seen[key] = problem_values(int(key[0]), int(key[1]), int(key[2]), bool(key[3]), k)
        for name, value in seen[key].items():
            per_problem[name].append(value)
    means: dict[str, Any] = {name: float(np.mean(values)) for name, values in per_problem.items()}
    lengths = efficiency(frame, _verdicts(frame["correct"])) if measurable else Efficiency()
    return TaskMetrics(
        k=k, **means,
        parallel_ratio=parallel_ratio(int(parallel_mask(frame).sum()), len(frame)) if measurable else None,
        format_ok_ratio=float(frame["format_ok"].astype(bool).mean()) if measurable else None,
        mean_response_tokens=_mean_of(frame, "n_response_tokens"),
        truncated_ratio=float((frame["finish_reason"] == "length").mean()),
        no_answer_ratio=float((frame["grade_status"] == "no_answer").mean()),
        n_unscored=int((~frame["grade_status"].isin(SCORED_STATUSES)).sum()),
        ci95={name: _ci(per_problem[name]) for name in TaskMetrics.CI_FIELDS},
        ci95_bootstrap=bootstrap_settings(BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
        engine_calls_per_sample=_mean_of(frame, "engine_calls"),
        tokens_per_sample=_mean_of(frame, "n_response_tokens"),
        critical_path_tokens_per_sample=_mean_of(frame, "critical_path_tokens"),
        **dataclasses.asdict(lengths),
    )


def _ci(values: list[float]) -> Interval | None:
    return bootstrap_ci(values, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)


def task_report(frame: pd.DataFrame, check: TaskCompleteness, measurable: bool = True) -> TaskReport:
    """One task's report from its samples and its completeness check (``measurable``: see :func:`metrics_of`)."""
    held = frame.groupby("problem_id", sort=False).size() if len(frame) else pd.Series(dtype=int)
    full = [str(pid) for pid, n in held.items() if n >= check.k and str(pid) not in check.no_gold_problems]
    metrics = None
    if check.k >= 1 and full:
        metrics = metrics_of(frame[frame["problem_id"].astype(str).isin(full)], check.k, measurable)
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
    measurable = run is None or run.structure_measurable
    tasks: dict[str, TaskReport] = {}
    for name, check in completeness.tasks.items():
        group = frame[frame["task"].astype(str) == name] if len(frame) else frame
        tasks[name] = task_report(group, check, measurable)
    ks = {task.k for task in tasks.values()}
    return RunReport(k=ks.pop() if len(ks) == 1 else None, status=completeness.status, complete=completeness.complete,
                     incomplete=completeness.problems(),
                     advice=None if completeness.complete else completeness.advice(),
                     shard=completeness.shard_label(), warnings=completeness.warnings(), maj_tie_rule=MAJ_TIE_RULE,
                     structure_note=None if measurable else _structure_note(run), tasks=tasks,
                     answer_policy=None if run is None else run.policy)


def _structure_note(run: RunRecord | None) -> str:
    """``n/a (tags stripped by VERL 0.9.1)``: the import's own reason."""
    reason = run.training.structure_note if run is not None and run.training is not None else None
    return NOT_MEASURABLE + (f": {reason}" if reason else "")
