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
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pr1_eval.records.run import NOT_MEASURABLE, RunRecord
from pr1_eval.report.completeness import TaskCompleteness, adaptive_rule, check_completeness, samples_per_problem
from pr1_eval.report.efficiency import Efficiency, length_figures
from pr1_eval.report.schema import AtK, Interval, MeanVariance, RunReport, TaskMetrics, TaskReport
from pr1_eval.report.task_arrays import SampleArrays, need, task_rows
from pr1_eval.stats.at_k import at_k_values, problem_classes
from pr1_eval.stats.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    MAJ_TIE_RULE,
    PER_PROBLEM_METRICS,
    bootstrap_cis,
    bootstrap_settings,
    majority_correct_per_problem,
    parallel_ratio,
    problem_values,
)
from pr1_eval.stats.variance import WITHIN_SHARE, required_k, required_k_reason, sampling_interval, variance_split


@dataclass(frozen=True)
class Problems:
    """One entry per problem, in problem-id order: its id, n samples, c correct (math-verify), c_paper
    (the paper's checker) and majority verdict; ``order`` lists the samples sorted by (problem id,
    sample index), so problem ``i`` holds ``n[i]`` consecutive positions of it."""

    ids: np.ndarray
    n: np.ndarray
    c: np.ndarray
    c_paper: np.ndarray
    maj: np.ndarray
    order: np.ndarray

    def select(self, keep: np.ndarray) -> Problems:
        """The problems where ``keep`` (one flag per problem) is set, with their samples' positions."""
        return Problems(self.ids[keep], self.n[keep], self.c[keep], self.c_paper[keep], self.maj[keep],
                        self.order[np.repeat(keep, self.n)])


def problems_of(arrays: SampleArrays) -> Problems:
    """The per-problem counts, in problem-id order so intervals do not depend on row order. One sort
    and array sums over the problems' runs of rows (a group-by per problem cost seconds on a sweep's
    thousands of problems)."""
    order = np.lexsort((arrays.sample_idx, arrays.rank))  # stable: equal keys keep frame order
    if not len(order):
        empty = np.zeros(0, dtype=np.int64)
        return Problems(arrays.problem[:0], empty, empty, empty, np.zeros(0, dtype=bool), order)
    ranks = arrays.rank[order]
    starts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]])
    correct = need(arrays.correct, "correct")[order]
    correct_paper = need(arrays.correct_paper, "correct_paper")[order]
    classes, answered = need(arrays.answer_class, "answer_class")[order], need(arrays.answered, "answer_class")[order]
    return Problems(
        ids=arrays.problem[order[starts]], n=np.diff(np.append(starts, len(order))),
        c=np.add.reduceat(correct.astype(np.int64), starts), c_paper=np.add.reduceat(correct_paper.astype(np.int64), starts),
        maj=majority_correct_per_problem(classes, answered, correct, starts), order=order)


def _problem_table(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`problems_of` of a frame as a table (``problem_id, n, c, c_paper, maj``)."""
    if not len(frame):
        return pd.DataFrame(columns=["problem_id", "n", "c", "c_paper", "maj"])
    problems = problems_of(SampleArrays.of(frame))
    return pd.DataFrame({"problem_id": [str(p) for p in problems.ids], "n": problems.n, "c": problems.c,
                         "c_paper": problems.c_paper, "maj": problems.maj})


def parallel_mask(frame: pd.DataFrame) -> pd.Series:
    """Which samples of ``frame`` open a ``<Parallel>`` block: the ``has_parallel`` column, the
    count behind every parallel ratio (:func:`pr1_eval.stats.metrics.parallel_ratio`)."""
    return frame["has_parallel"].astype(bool)


def _mean_of(arrays: SampleArrays, column: str) -> float | None:
    """The mean of a column over the samples that have a value (None: no value, or no such column)."""
    values = arrays.means.get(column)
    if values is None:
        return None
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else None


def _per_problem_values(problems: Problems, k: int, adaptive: bool = False) -> dict[str, np.ndarray]:
    """Each of :data:`PER_PROBLEM_METRICS` per problem (problem-id order), from one
    :func:`problem_values` call per distinct (n, c, c_paper, maj): few distinct, since n, c ≤ k."""
    base = int(problems.n.max(initial=0)) + 1  # c, c_paper ≤ n < base: one integer names each distinct problem
    keys = ((problems.n * base + problems.c) * base + problems.c_paper) * 2 + problems.maj
    distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    table = np.array([[values[name] for name in PER_PROBLEM_METRICS] for values in
                      (problem_values(int(problems.n[i]), int(problems.c[i]), int(problems.c_paper[i]),
                                      bool(problems.maj[i]), k, adaptive=adaptive) for i in first)],
                     dtype=float).reshape(len(distinct), len(PER_PROBLEM_METRICS))
    columns = np.ascontiguousarray(table[inverse.ravel()].T)
    return {name: columns[i] for i, name in enumerate(PER_PROBLEM_METRICS)}


def metrics_of(frame: pd.DataFrame, k: int, measurable: bool = True, at: Sequence[int] = ()) -> TaskMetrics:
    """The metrics of samples in which every problem holds at least ``k`` samples; without
    ``measurable`` (the tags were stripped) the structure figures are None, never a count of
    tags that cannot be there. ``at``: the Ks of :attr:`TaskMetrics.at` (those ≤ k are kept)."""
    arrays = SampleArrays.of(frame)
    return task_metrics(arrays, problems_of(arrays), k, measurable, at)


def mean_variance(problems: Problems) -> MeanVariance | None:
    """The between/within split of Var(mean@K) (:func:`pr1_eval.stats.variance.variance_split`) with
    its required k; None when it is not estimable (fewer than 2 problems or samples)."""
    parts = variance_split(problems.c, problems.n)
    if parts is None:
        return None
    return MeanVariance(between_problem=parts.between_problem, within_problem=parts.within_problem,
                        between=parts.between, within=parts.within, total=parts.total, se=parts.se,
                        within_share=parts.within_share, required_k=required_k(parts),
                        required_k_share=WITHIN_SHARE, required_k_reason=required_k_reason(parts),
                        ci95_these_problems=sampling_interval(problems.c, problems.n))


def at_k_metrics(arrays: SampleArrays, problems: Problems, ks: Sequence[int], k: int) -> list[AtK]:
    """pass@K, best@K and maj@K (:mod:`pr1_eval.stats.at_k`) at each K of ``ks`` that is ≤ ``k``,
    ascending, with the report's intervals; over all of each problem's samples, as the report's other
    numbers are (pass@K's estimator holds for any n ≥ K)."""
    wanted = sorted({K for K in ks if 1 <= K <= k})
    if not wanted:
        return []
    classes = need(arrays.answer_class, "answer_class")[problems.order]
    answered = need(arrays.answered, "answer_class")[problems.order]
    correct = need(arrays.correct, "correct")[problems.order]
    starts = np.concatenate([[0], np.cumsum(problems.n)[:-1]])
    held = [slice(int(s), int(s + n)) for s, n in zip(starts, problems.n, strict=True)]
    parts = variance_split(problems.c, problems.n)
    per_problem = [(int(n), int(c), problem_classes(classes[h], answered[h], correct[h]))
                   for h, n, c in zip(held, problems.n, problems.c, strict=True)]
    out = []
    for K in wanted:
        values = [at_k_values(n, c, cls, K) for n, c, cls in per_problem]
        columns = {name: np.array([v[name] for v in values]) for name in AtK.FIELDS}
        out.append(AtK(k=K, **{name: float(column.mean()) for name, column in columns.items()},
                       mean_se=None if parts is None else parts.se_at(K),
                       ci95={name: _ci(column) for name, column in columns.items()}))
    return out


def task_metrics(arrays: SampleArrays, problems: Problems, k: int, measurable: bool = True,
                 at: Sequence[int] = (), adaptive: bool = False) -> TaskMetrics:
    """:func:`metrics_of` from a task's arrays and its per-problem counts (:func:`problems_of`);
    ``adaptive``: problems may hold fewer than k samples (:func:`pr1_eval.stats.metrics.problem_values`)."""
    per_problem = _per_problem_values(problems, k, adaptive)
    means: dict[str, Any] = {name: float(np.mean(values)) for name, values in per_problem.items()}
    lengths = Efficiency()
    if measurable and arrays.lengths is not None and len(arrays):
        lengths = length_figures(arrays.rank, arrays.lengths, need(arrays.correct, "correct"))
    return TaskMetrics(
        k=k, **means,
        parallel_ratio=parallel_ratio(int(need(arrays.has_parallel, "has_parallel").sum()), len(arrays))
        if measurable else None,
        format_ok_ratio=float(need(arrays.format_ok, "format_ok").mean()) if measurable else None,
        mean_response_tokens=_mean_of(arrays, "n_response_tokens"),
        truncated_ratio=float(need(arrays.truncated, "finish_reason").mean()),
        no_answer_ratio=float(need(arrays.no_answer, "grade_status").mean()),
        n_unscored=int(need(arrays.unscored, "grade_status").sum()),
        ci95=dict(zip(TaskMetrics.CI_FIELDS, _cis([per_problem[name] for name in TaskMetrics.CI_FIELDS]), strict=True)),
        ci95_bootstrap=bootstrap_settings(BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
        engine_calls_per_sample=_mean_of(arrays, "engine_calls"),
        tokens_per_sample=_mean_of(arrays, "n_response_tokens"),
        critical_path_tokens_per_sample=_mean_of(arrays, "critical_path_tokens"),
        **dataclasses.asdict(lengths),
        variance=mean_variance(problems),
        at=at_k_metrics(arrays, problems, at, k),
    )


def _ci(values: np.ndarray) -> Interval | None:
    return _cis([values])[0]


#: Intervals kept by their values (see :func:`_cis`), the oldest dropped beyond :data:`_KEPT_MAX`.
_KEPT: dict[bytes, Interval | None] = {}
_KEPT_MAX = 4096
_KEPT_LOCK = threading.Lock()


def _cis(columns: Sequence[np.ndarray]) -> list[Interval | None]:
    """:func:`bootstrap_ci` of each column, kept: an interval is a function of the values alone (fixed
    resamples and seed: the same bits in, the same bits out), and many repeat. mean@K_paper's values
    are mean@K's wherever the two checkers agree, and a suite of small tasks holds few distinct vectors
    (4 problems at k=2 allow 81 for mean@K). Those not kept are computed together
    (:func:`pr1_eval.stats.metrics.bootstrap_cis`: one pass over the resample counts for all of a task's)."""
    keys = [np.ascontiguousarray(values, dtype=float).tobytes() for values in columns]
    with _KEPT_LOCK:
        known = {key: _KEPT[key] for key in dict.fromkeys(keys) if key in _KEPT}
    missing = [key for key in dict.fromkeys(keys) if key not in known]
    if missing:
        found = bootstrap_cis([np.frombuffer(key) for key in missing], n_resamples=BOOTSTRAP_RESAMPLES,
                              seed=BOOTSTRAP_SEED)
        known.update(zip(missing, found, strict=True))
        with _KEPT_LOCK:
            _KEPT.update(zip(missing, found, strict=True))
            while len(_KEPT) > _KEPT_MAX:
                del _KEPT[next(iter(_KEPT))]
    return [known[key] for key in keys]


def task_report(frame: pd.DataFrame, check: TaskCompleteness, measurable: bool = True) -> TaskReport:
    """One task's report from its samples and its completeness check (``measurable``: see :func:`metrics_of`)."""
    return report_of(SampleArrays.of(frame) if len(frame) else None, check, measurable)


def report_of(arrays: SampleArrays | None, check: TaskCompleteness, measurable: bool = True,
              at: Sequence[int] = (), adaptive: bool = False) -> TaskReport:
    """:func:`task_report` from the task's arrays (None: no sample). The metrics are over the problems
    holding k samples that have a gold (``full``); an incomplete task's are its ``partial`` ones. In an
    ``adaptive`` run a problem is full when it holds what its stopping rule asks for (not short)."""
    metrics, n_full = None, 0
    if arrays is not None and len(arrays):
        problems = problems_of(arrays)
        short = np.array(list(check.short_problems), dtype=object)
        full = (problems.n >= check.k) if not adaptive else ~np.isin(problems.ids, short)
        full &= ~np.isin(problems.ids, np.array(list(check.no_gold_problems), dtype=object))
        n_full = int(full.sum())
        if check.k >= 1 and n_full:
            keep = np.zeros(len(arrays), dtype=bool)
            keep[problems.order] = np.repeat(full, problems.n)
            metrics = task_metrics(arrays.take(keep), problems.select(full), check.k, measurable, at, adaptive)
    return TaskReport(
        complete=check.complete, k=check.k, n_problems=n_full, n_problems_expected=check.n_problems_expected,
        n_samples=0 if arrays is None else len(arrays), missing_problems=check.missing_problems,
        n_missing_problems=check.n_missing_problems, short_problems=check.short_problems,
        undeclared_problems=check.undeclared_problems, part_of=check.part_of,
        incomplete_reason=None if check.complete else check.describe(),
        metrics=metrics if check.complete else None, partial=None if check.complete else metrics)


def run_report(frame: pd.DataFrame, k: int | Mapping[str, int] | None = None, *,
               run: RunRecord | None = None, adaptive: Mapping[str, Any] | None = None,
               at: Sequence[int] = ()) -> RunReport:
    """The report of a run's samples.

    With ``run`` (the run's record) every task is checked against the problems and k it declares; without it,
    against ``k`` (one for every task, or a mapping task → k; else the most samples any problem holds) over
    the problems present. Every task comes from one conversion of the run's columns and one split by task
    (:mod:`pr1_eval.report.task_arrays`), not one pass over the run per task. ``adaptive`` (run.json's
    section) reports an adaptive run checked against ``k`` without its record. ``at``: the Ks at which
    each task also gets pass@K, best@K and maj@K (:attr:`TaskMetrics.at`; those above a task's k are
    left out of that task, and the table says so).
    """
    completeness = check_completeness(run, frame, k, adaptive)
    is_adaptive = bool(run.adaptive if run is not None and run.adaptive else adaptive)
    measurable = run is None or run.structure_measurable
    arrays = SampleArrays.of(frame) if len(frame) else None
    rows = task_rows(frame)
    tasks: dict[str, TaskReport] = {}
    for name, check in completeness.tasks.items():
        held = arrays.take(rows[name]) if arrays is not None and name in rows else None
        tasks[name] = report_of(held, check, measurable, at, adaptive=is_adaptive)
    ks = {task.k for task in tasks.values()}
    return RunReport(k=ks.pop() if len(ks) == 1 else None, status=completeness.status, complete=completeness.complete,
                     incomplete=completeness.problems(),
                     advice=None if completeness.complete else completeness.advice(),
                     shard=completeness.shard_label(), warnings=completeness.warnings(), maj_tie_rule=MAJ_TIE_RULE,
                     limit=completeness.limit, limited=completeness.limit_lines(),
                     structure_note=None if measurable else _structure_note(run), tasks=tasks,
                     answer_policy=None if run is None else run.policy,
                     adaptive_note=adaptive_note(run, frame, tasks))


def adaptive_note(run: RunRecord | None, frame: pd.DataFrame, tasks: Mapping[str, TaskReport]) -> str | None:
    """What an adaptive run's numbers are (None for a fixed-k run): the rule, the problems that stopped
    before k, the samples drawn against fixed k's, and how the metrics read problems with n < k."""
    rule = adaptive_rule(run)
    if rule is None:
        return None
    held = samples_per_problem(frame)
    counts = [n for task in tasks for n in held.get(task, {}).values()]
    fixed = sum(tasks[task].k * len(held.get(task, {})) for task in tasks)
    stopped = sum(1 for task in tasks for n in held.get(task, {}).values() if n < tasks[task].k)
    saved = f" ({1 - sum(counts) / fixed:.0%} fewer)" if fixed else ""
    return (f"adaptive run: rounds of {rule.round_size}, a problem stopped once a {1 - rule.alpha:.0%} confidence "
            f"sequence put its p (estimand: that problem's own chance of being solved) below {rule.margin:g} or above "
            f"{1 - rule.margin:g}; {stopped} of {len(counts)} "
            f"problems stopped before k, {sum(counts):,} samples drawn where fixed k draws {fixed:,}{saved}"
            f"{_token_saving(run, frame, tasks)}{_sides(run, rule.margin)}. "
            "mean@K is the mean over problems of c/n, each over its own n; for a problem stopped at n < K, pass@K "
            "is the plug-in 1 - (1 - c/n)^K and maj@K the vote of its n samples.")


def _token_saving(run: RunRecord | None, frame: pd.DataFrame, tasks: Mapping[str, TaskReport]) -> str:
    """``; 12,400 tokens drawn, about 9,100 fewer than fixed k (42 %), about 31 s of generation saved``:
    the saving in what a GPU budget is paid in. Fixed k's tokens are estimated (the samples never drawn
    cannot be counted): each stopped problem's mean tokens per sample × its samples not drawn; the time,
    as this run's generation seconds per token × those tokens (run.json's ``generation``, when recorded)."""
    if "n_response_tokens" not in frame or frame.empty or frame["n_response_tokens"].isna().all():
        return ""
    per = frame.groupby(["task", "problem_id"], sort=False)["n_response_tokens"].agg(["sum", "size"])
    drawn = float(per["sum"].sum())
    k = {task: t.k for task, t in tasks.items()}
    ks = np.array([k.get(str(task), 0) for task in per.index.get_level_values(0)], dtype=float)
    avoided = float((per["sum"] / per["size"] * np.maximum(ks - per["size"], 0)).sum())
    if drawn <= 0 or avoided <= 0:
        return f"; {drawn:,.0f} tokens drawn, none saved"
    text = f"; {drawn:,.0f} tokens drawn, about {avoided:,.0f} fewer than fixed k ({avoided / (drawn + avoided):.0%})"
    wall = (run.generation or {}).get("wall_s") if run is not None else None
    if isinstance(wall, (int, float)) and wall > 0:
        text += f", about {wall * avoided / drawn:,.0f} s of generation saved ({wall:,.0f} s spent)"
    return text


def _sides(run: RunRecord | None, margin: float) -> str:
    """``; sides: 20 problems solved more often than 1 - margin, 6 less often than margin, 4 open`` from
    run.json's ``settled`` (every problem's own side is there, task → problem id → ±1)."""
    section = run.adaptive if run is not None and run.adaptive else {}
    settled = section.get("settled") or {}
    drawn = section.get("samples_drawn") or {}
    values = [v for task in settled.values() for v in task.values()]
    total = sum(len(task) for task in drawn.values())
    if not total:
        return ""
    above, below = sum(1 for v in values if v > 0), sum(1 for v in values if v < 0)
    return (f"; decided: {above} problem(s) with p above {1 - margin:g}, {below} below {margin:g}, "
            f"{total - above - below} not settled (each problem's side: run.json adaptive.settled)")


def _structure_note(run: RunRecord | None) -> str:
    """``n/a (tags stripped by VERL 0.9.1)``: the import's own reason; for an answers-only import,
    ``not measured (answers-only import …)``."""
    if run is not None and run.answers_only:
        return run.not_measured
    reason = run.training.structure_note if run is not None and run.training is not None else None
    return NOT_MEASURABLE + (f": {reason}" if reason else "")
