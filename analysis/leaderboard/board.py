"""The checkpoint leaderboard: per-task metrics of many runs, ranked, with honest paired comparisons.

Python API (what ``pr1-eval leaderboard``, the dashboard and the notebooks call)::

    from analysis.leaderboard.board import build_leaderboard, compute_leaderboard
    doc = build_leaderboard(["runs/"], baseline=None, tasks=None, intersect=False,
                            include_incomplete=False)  # the --json document
    board = compute_leaderboard(["runs/"])   # Leaderboard: .document plus .per_problem (for heatmaps)

``runs`` are run directories or folders searched for runs (or an already loaded
:class:`analysis.runs.loader.LoadedRuns`). ``average`` is ``"task_mean"`` (default: the mean of task
means, the paper's convention) or ``"problem_weighted"``; it decides the sort order. Bad input
(mismatched problem sets, data hashes or k without ``intersect``; incomplete runs; an unknown
baseline) raises :class:`pr1_eval.errors.Pr1EvalError` naming the difference.

The document (``leaderboard --json``; K is the k of the run or task, e.g. ``mean@16``; an average
over tasks of different k, as an import with per-task k can have, is named with a literal ``k``),
typed in :mod:`analysis.leaderboard.schema` (version 2: the paper's Pass@K is ``best@K_paper``,
the report's name for it)::

    {"schema_version": 2,
     "runs": [{"name", "model", "family", "step", "decoding", "path", "k" (null when tasks differ in k),
               "answer_policy" (additive: 'paper' or 'lenient', pr1_eval.grading.policy),
               "rank", "tied_with_above", "p_vs_above",
               "complete" (false only for an incomplete run ranked on request), "missing": [lines],
               "limited": [lines] (additive: compared tasks a --limit run cut short; empty for full runs),
               "tasks": {TASK: {"k", "n_problems", "mean@K", "ci95": [lo, hi], "pass@K", "best@K_paper",
                                "maj@K", "parallel_ratio",
                                # additive extras:
                                "n_samples", "pass@1", "pass@K_ci95", "best@K", "mean@K_paper",
                                "first_block_rel_pos", "position_unit",
                                # additive, token latency (the report's fields, pr1_eval.report.efficiency):
                                "length_unit", "response_length_per_sample", "critical_path_per_sample",
                                "speedup", "speedup_ci95", "speedup_problem_median", "speedup_problem_p90",
                                "losing_path_share", "speedup_correct", "speedup_wrong",
                                # additive, the report's split of Var(mean@K) (pr1_eval.stats.variance):
                                "se", "variance_between", "variance_within", "required_k"}},
               "average": {"convention", "k", "n_tasks", "n_problems", "mean@K", "pass@K", "best@K_paper",
                           "maj@K", "parallel_ratio", "speedup" (additive: null across length units),
                           "task_mean": {the six metrics}, "problem_weighted": {the six metrics}}}],
     "comparisons": [{"run", "baseline", "task", "n_problems", "delta", "ci95": [lo, hi],
                      "p_value", "p_holm", "test", "n_nonzero",
                      # additive: SD of the paired differences, minimum detectable effect
                      "diff_sd", "mde"}],
     "excluded": [{"name", "path", "complete": false, "missing": [lines], "advice"}],
     "baseline", "answer_policy" (additive: every run's; runs under different policies are refused as
     not comparable, with the regrade command that aligns them), "average_convention", "tasks", "alpha", "ci95_bootstrap", "maj_tie_rule", "notes", "failures"}

Conventions, and why:

* Per-task metrics are :func:`pr1_eval.report.run_report.run_report`'s (one implementation of every
  number, under the report's names), math-verify verdicts unless named ``_paper``. ``pass@K`` is
  the unbiased estimator. ``best@K_paper`` is the number the paper's "Pass@16" column would print:
  VERL's bootstrap best@K on the paper's string checker; the extras ``best@K`` (the same estimator
  on math-verify) and ``mean@K_paper`` come with it. ``ci95`` is the report's
  bootstrap interval of mean@K (``ci95_bootstrap`` records its resamples and seed; ``maj_tie_rule``
  states how maj@K breaks ties). Parallel ratio and first-block position are
  :func:`analysis.structure.branching.branching_stats`'; ``position_unit`` ('token' or 'char') is the unit of the
  position. The token-latency extras are the report's (one implementation): ``speedup`` = mean
  response length / mean critical path in ``length_unit``, its ``speedup_ci95`` from the same bootstrap
  over problems. Runs whose positions are in different units are not converted (an import can be given
  ``--tokenizer`` to count tokens): the table marks each position with its unit and a note names
  the runs in each unit, so positions are only read against positions of the same unit.
* A run is ranked only when every compared task is complete against its run.json (the loader's
  :func:`pr1_eval.report.completeness.check_completeness`, see :mod:`analysis.common.completeness`). An
  incomplete run is left out of the ranking and the comparisons, listed under ``excluded`` with what
  it lacks, and named in the notes; when every run is incomplete the leaderboard is refused by name.
  ``include_incomplete=True`` (``--include-incomplete``) ranks it anyway on the problems that hold
  all k samples, marked ``"complete": false`` with its ``missing`` lines.
* ``average`` holds both conventions; the top-level metrics are the chosen one (``convention``).
* Rows are sorted by the chosen average mean@K. ``tied_with_above`` is true when a paired
  sign-flip test of the row against the row above, on the same average (per-problem differences
  weighted by the convention), gives p ≥ ``alpha`` (0.05, unadjusted: it only marks rows).
* Comparisons are each run against the baseline (``--baseline``; default the lowest step when all
  runs are steps of one family, else the first run given), per task, on the problems both share:
  delta of mean@K, paired bootstrap 95% interval (10,000 resamples, seed 0), two-sided sign-flip
  p-value (exact up to 20 non-zero differences) and Holm's adjustment across that run's tasks, and
  the minimum detectable effect of that pair (``mde``: 80 % power, two-sided 5 %, from the observed SD
  of its per-problem differences, ``diff_sd``; :mod:`pr1_eval.stats.variance`).
* Runs must share tasks, problem ids, data hashes and k. With ``intersect`` every run is cut to
  the tasks and problems all runs share (so every number in the table is on the same problems)
  and the notes say how many were kept; unknown data hashes (imports) are noted, not refused.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from analysis.common.completeness import run_lines
from analysis.common.defaults import AVERAGES
from analysis.leaderboard.schema import AVERAGED, SCHEMA_VERSION, Averages, RunAverage, TaskCell
from analysis.runs.loader import LoadedRuns, load_runs
from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord
from pr1_eval.report.completeness import (
    LIMIT_MARK,
    LIMIT_WARNING,
    RunCompleteness,
    check_completeness,
    limited_tasks,
)
from pr1_eval.report.efficiency import LENGTH_COLUMNS
from pr1_eval.report.run_report import parallel_mask, run_report
from pr1_eval.report.schema import TaskMetrics
from pr1_eval.report.task_arrays import task_rows
from pr1_eval.stats.metrics import MAJ_TIE_RULE, bootstrap_settings, parallel_ratio
from pr1_eval.stats.paired import holm, paired_comparison, sign_flip_test
from pr1_eval.store.run_store import RunStore

ALPHA = 0.05


class NotComparable(Pr1EvalError):
    """The runs differ in problems, k or data and ``intersect`` was not asked for; ``differences``
    holds one line per difference (the dashboard shows them behind an expander)."""

    def __init__(self, differences: list[str], intersect_helps: bool = True) -> None:
        shown = "; ".join(differences[:4]) + (f"; and {len(differences) - 4} more" if len(differences) > 4 else "")
        hint = ("Pass --intersect to compare on the shared problems" if intersect_helps else
                "--intersect cannot help here (it needs a task and problems every run shares, under one answer "
                "policy): leave out the runs that differ, or run the leaderboard without --intersect on the folder "
                "to rank each group of comparable runs apart")
        super().__init__(f"runs are not comparable: {shown}. {hint}")
        self.differences = differences
        self.intersect_helps = intersect_helps


@dataclass
class RunMeta:
    """What a leaderboard row says about a run besides its numbers."""

    name: str
    path: str
    model: str | None
    family: str
    step: int | None
    decoding: str
    task_k: dict[str, int]  # samples per problem of each task (run.json's task k, else its k)
    data_hashes: dict[str, str | None]
    answer_policy: str = "paper"  # which text was read as the answer (run.json; pr1_eval.grading.policy)
    adaptive: dict[str, Any] | None = None  # run.json's adaptive section: problems may hold fewer than k samples
    not_measured: str | None = None  # why structure and latency were not measured (RunRecord.not_measured), else None

    @property
    def k(self) -> int | None:
        """The run's k when every task has the same, else None."""
        ks = set(self.task_k.values())
        return ks.pop() if len(ks) == 1 else None


@dataclass
class Leaderboard:
    """:attr:`document` is the ``--json`` document; :attr:`per_problem` has one row per run × task ×
    problem (``run, task, problem_id, n, c, fraction``) for heatmaps and further paired tests."""

    document: dict[str, Any]
    per_problem: pd.DataFrame
    notes: list[str] = field(default_factory=list)


#: The sample columns the leaderboard reads: what the report's metrics read
#: (:func:`pr1_eval.report.run_report.metrics_of`) and the branching statistics
#: (:func:`analysis.structure.branching.branching_stats`). No text: reading a sweep's responses is most of the
#: time of loading it, and their Python strings most of its memory. No blocks frame either.
LEADERBOARD_COLUMNS = ("correct", "correct_paper", "answer_class", "has_parallel", "format_ok", "n_response_tokens",
                       "finish_reason", "grade_status", "engine_calls", "critical_path_tokens", "n_blocks",
                       "block_rel_starts", "position_unit", *LENGTH_COLUMNS)


def build_leaderboard(runs: Iterable[str | Path] | str | Path | LoadedRuns, baseline: str | None = None,
                      tasks: Sequence[str] | None = None, intersect: bool = False,
                      average: str = "task_mean", include_incomplete: bool = False) -> dict[str, Any]:
    """The ``leaderboard --json`` document (see the module docstring)."""
    return compute_leaderboard(runs, baseline=baseline, tasks=tasks, intersect=intersect, average=average,
                               include_incomplete=include_incomplete).document


def compute_leaderboard(runs: Iterable[str | Path] | str | Path | LoadedRuns, baseline: str | None = None,
                        tasks: Sequence[str] | None = None, intersect: bool = False,
                        average: str = "task_mean", include_incomplete: bool = False) -> Leaderboard:
    """The leaderboard document plus the per-problem table behind it (BLAS on one thread: see
    :func:`one_blas_thread`)."""
    with one_blas_thread():
        return _compute(runs, baseline, tasks, intersect, average, include_incomplete)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS (OpenBLAS under numpy) on one thread while the leaderboard computes.

    Why: the leaderboard already runs its numpy work on two threads of its own (:func:`_threaded`),
    and OpenBLAS's threads on top of them oversubscribe a small machine; the resample counts'
    products and the sign-flip tests' took about 4× the CPU, and longer in wall time, with its two
    threads than with one on the shared 2-core machine (5 products of a 10,000 × 500 matrix: 41 ms
    against 10 ms). The numbers do not change: the exact-count products are exact in any order, and
    each sign-flip sum is one row's dot product, which OpenBLAS computes whole on one thread; the
    leaderboard documents before and after were compared byte for byte (docs/performance.md)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        yield


def _compute(runs: Iterable[str | Path] | str | Path | LoadedRuns, baseline: str | None, tasks: Sequence[str] | None,
             intersect: bool, average: str, include_incomplete: bool) -> Leaderboard:
    """:func:`compute_leaderboard`'s work."""
    if average not in AVERAGES:
        raise Pr1EvalError(f"unknown average {average!r}; choose one of {', '.join(AVERAGES)}")
    loaded = runs if isinstance(runs, LoadedRuns) else load_runs(runs, tokenizer=None, columns=LEADERBOARD_COLUMNS,
                                                                 blocks=False)
    if loaded.samples.empty:
        reasons = "; ".join(f"{p}: {r}" for p, r in loaded.failures) or "nothing given"
        raise Pr1EvalError(f"no run could be loaded ({reasons})")
    metas, infos = _run_metas(loaded)
    wanted = list(tasks) if tasks else _tasks_in_order(loaded.samples)
    missing, status_notes, excluded = _completeness(loaded, metas, infos, wanted, include_incomplete)
    if excluded:
        metas = [m for m in metas if m.name not in {e["name"] for e in excluded}]
        if baseline is not None and baseline in {e["name"] for e in excluded} | {e["path"] for e in excluded}:
            raise Pr1EvalError(f"--baseline {baseline!r} is incomplete and left out of the ranking; pick a complete "
                               "run, or include incomplete runs (--include-incomplete)")
    base = _resolve_baseline(metas, baseline)
    samples, chosen, notes = _select(loaded.samples[loaded.samples["run"].isin([m.name for m in metas])], metas, base,
                                     tasks, intersect)
    notes = [*status_notes, *(_excluded_note(e) for e in excluded), *notes]
    per_problem = problem_table(samples)
    frames = _run_frames(samples, [meta.name for meta in metas])  # each worker its own frame
    rows = _threaded(lambda i: _run_row(metas[i], frames[i], chosen, average, missing[metas[i].name]),
                     range(len(metas)))
    fractions = TaskFractions(per_problem.pivot(index=["task", "problem_id"], columns="run", values="fraction"))
    limited = {meta.name: [line for line in limit_lines_of(loaded, meta.name, infos[meta.name])
                           if line.split(": ", 1)[0] in chosen] for meta in metas}
    for row in rows:
        row["limited"] = limited[row["name"]]
    if any(limited.values()):
        names = ", ".join(name for name, lines in limited.items() if lines)
        notes.append(f"{LIMIT_MARK}: {names} hold(s) only the first problems of some task(s); {LIMIT_WARNING}")
    rows = [_row_json(row) for row in _rank(rows, fractions, chosen, average)]
    comparisons = _comparisons(rows, base, fractions, chosen)
    notes.extend(position_unit_notes(rows))
    notes.extend(f"{m.name}: parallel ratio, first block and token latency {m.not_measured}" for m in metas
                 if m.not_measured)
    document = {
        "schema_version": SCHEMA_VERSION, "runs": rows, "comparisons": comparisons, "excluded": excluded,
        "baseline": base.name, "answer_policy": base.answer_policy,
        "average_convention": _CONVENTION_TEXT[average], "tasks": chosen, "alpha": ALPHA,
        "ci95_bootstrap": bootstrap_settings(), "maj_tie_rule": MAJ_TIE_RULE,
        # token lengths are not used here, so the loader's note about a missing tokenizer is noise
        "notes": [*(n for n in loaded.notes if "no tokenizer" not in n), *notes],
        "failures": [{"path": p, "reason": r} for p, r in loaded.failures],
    }
    return Leaderboard(document=_json_safe(document), per_problem=per_problem, notes=notes)


def _run_frames(samples: pd.DataFrame, names: list[str]) -> list[pd.DataFrame]:
    """Each run's rows of ``samples`` (in frame order, with their labels), a copy each: the frames
    ``samples[samples["run"] == name]`` would give, from one grouping of the column instead of one
    comparison of every row per run (a tenth of a second on a 96,000-sample sweep)."""
    at = samples.groupby("run", sort=False).indices
    none = np.zeros(0, dtype=np.intp)
    return [samples.iloc[at.get(name, none)].copy() for name in names]


_CONVENTION_TEXT = {"task_mean": "mean of task means (the paper's convention)",
                    "problem_weighted": "problem-weighted (every problem counts once)"}


def _run_metas(loaded: LoadedRuns) -> tuple[list[RunMeta], dict[str, RunRecord]]:
    """Run metadata in the order the runs were given, and each run.json (k, tasks, data hashes)."""
    metas, infos = [], {}
    known: dict[str, RunRecord] = getattr(loaded, "run_info", None) or {}
    for name, group in loaded.samples.groupby("run", sort=False):
        first = group.iloc[0]
        info = known.get(str(name)) or RunStore(str(first["run_path"])).read_run()
        held = group.groupby(["task", "problem_id"]).size().groupby(level="task").max()
        task_k = {str(t): int(info.task_k(str(t)) or n) for t, n in held.items()}
        step = first["step"]
        infos[str(name)] = info
        metas.append(RunMeta(
            name=str(name), path=str(first["run_path"]), model=None if pd.isna(first["model"]) else str(first["model"]),
            family=str(first["model_family"]), step=None if pd.isna(step) else int(step), decoding=str(first["decoding"]),
            task_k=task_k, data_hashes={str(t): v.data_hash for t, v in info.tasks.items()},
            answer_policy=info.policy, adaptive=info.adaptive,
            not_measured=None if info.structure_measurable else info.not_measured))
    return metas, infos


def _resolve_baseline(metas: list[RunMeta], wanted: str | None) -> RunMeta:
    """``wanted`` by run name or path; default: lowest step of a one-family sweep, else the first run."""
    if wanted is not None:
        resolved = str(Path(wanted).expanduser().resolve())
        for meta in metas:
            if wanted in (meta.name, meta.path) or resolved == meta.path:
                return meta
        raise Pr1EvalError(f"--baseline {wanted!r} is none of the loaded runs ({', '.join(m.name for m in metas)}); "
                           "pass a run name or directory from the list")
    if all(m.step is not None for m in metas) and len({m.family for m in metas}) == 1:
        return min(metas, key=lambda m: m.step if m.step is not None else 0)
    return metas[0]


def _tasks_in_order(samples: pd.DataFrame) -> list[str]:
    """The tasks of ``samples`` as text, in order of first appearance (``unique`` keeps that order)."""
    return list(dict.fromkeys(str(t) for t in samples["task"].unique()))


def _problem_sets(samples: pd.DataFrame) -> dict[tuple[str, str], set[str]]:
    """(run, task) → its problem ids, from one pass over the rows (a group per run × task cost
    seconds on thousands of tasks)."""
    sets: dict[tuple[str, str], set[str]] = {}
    keys = samples[["run", "task", "problem_id"]].astype(str).drop_duplicates()  # k samples per problem: read once
    for run, task, pid in zip(keys["run"], keys["task"], keys["problem_id"], strict=True):
        sets.setdefault((run, task), set()).add(pid)
    return sets


def _differences(metas: list[RunMeta], base: RunMeta, sets: dict[tuple[str, str], set[str]],
                 tasks: list[str]) -> list[str]:
    """Every way a run differs from the baseline in what it was scored on."""
    found = []
    for meta in metas:
        for task in tasks:
            mine, theirs = sets.get((meta.name, task)), sets.get((base.name, task))
            if mine is None or theirs is None:
                missing = meta.name if mine is None else base.name
                if mine is not theirs:
                    found.append(f"task {task}: run {missing} has no samples for it")
                continue
            if meta.task_k[task] != base.task_k[task]:
                found.append(f"task {task}: k differs: {meta.name} has k={meta.task_k[task]}, "
                             f"{base.name} has k={base.task_k[task]}")
            if mine != theirs:
                only_mine, only_theirs = sorted(mine - theirs), sorted(theirs - mine)
                found.append(f"task {task}: run '{meta.name}' has {len(mine)} problems, run '{base.name}' has "
                             f"{len(theirs)} ({len(only_mine)} held only by run '{meta.name}'{_ids(only_mine)}, "
                             f"{len(only_theirs)} only by run '{base.name}'{_ids(only_theirs)})")
            h1, h2 = meta.data_hashes.get(task), base.data_hashes.get(task)
            if h1 and h2 and h1 != h2:
                found.append(f"task {task}: data hash of {meta.name} ({h1[:12]}) differs from {base.name}'s ({h2[:12]})")
    return found


def policy_differences(metas: list[RunMeta], base: RunMeta) -> list[str]:
    """One line per run graded under another answer policy than the baseline (verdicts read from
    other text are not comparable), with the command that regrades it (no generation)."""
    return [f"answer policy differs: {m.name} was graded under {m.answer_policy}, {base.name} under "
            f"{base.answer_policy} (regrade one without generating: pr1-eval regrade {m.path} --answer-policy "
            f"{base.answer_policy})" for m in metas if m.answer_policy != base.answer_policy]


def _ids(ids: list[str]) -> str:
    return "" if not ids else ": " + ", ".join(ids[:3]) + ("…" if len(ids) > 3 else "")


def _select(samples: pd.DataFrame, metas: list[RunMeta], base: RunMeta, tasks: Sequence[str] | None,
            intersect: bool) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The samples every number is computed on, the tasks, and notes; refuses mismatched runs."""
    present = _tasks_in_order(samples)
    chosen = list(tasks) if tasks else present
    unknown = [t for t in chosen if t not in present]
    if unknown:
        raise Pr1EvalError(f"--tasks {', '.join(unknown)}: no loaded run has samples for it (tasks present: {', '.join(present)})")
    samples = samples[samples["task"].isin(chosen)]
    sets = _problem_sets(samples)
    policies = policy_differences(metas, base)
    if policies:  # no cut of problems makes verdicts read under other policies comparable
        raise NotComparable(policies, intersect_helps=False)
    differences = _differences(metas, base, sets, chosen)
    notes = [f"data hash unknown for {m.name} / {t} (imported run): problems matched by id only"
             for m in metas for t in chosen if (m.name, t) in sets and not m.data_hashes.get(t)]
    if not differences:
        return samples, chosen, notes
    if not intersect:
        raise NotComparable(differences, intersect_helps=_intersect_helps(metas, sets, chosen))
    notes.append("--intersect: " + "; ".join(differences))
    shared_tasks = [t for t in chosen if all((m.name, t) in sets for m in metas)]
    if not shared_tasks:
        raise Pr1EvalError("--intersect: the runs share no task; nothing to compare on. Leave out --intersect to rank "
                           "each group of comparable runs apart")
    keep: dict[str, set[str]] = {}
    for task in shared_tasks:
        keep[task] = set.intersection(*(sets[(m.name, task)] for m in metas))
        largest = max(len(sets[(m.name, task)]) for m in metas)
        notes.append(f"--intersect: task {task} compared on {len(keep[task])} shared problems (largest run has {largest})")
        if not keep[task]:
            raise Pr1EvalError(f"--intersect: the runs share no problem of task {task}")
    dropped = [t for t in chosen if t not in shared_tasks]
    if dropped:
        notes.append(f"--intersect: task(s) {', '.join(dropped)} left out: not every run has them")
    return _shared_rows(samples, keep), shared_tasks, notes


def _intersect_helps(metas: list[RunMeta], sets: dict[tuple[str, str], set[str]], tasks: list[str]) -> bool:
    """Whether ``--intersect`` would give a leaderboard: some task every run holds, and every such task
    with a problem every run holds (the error message offers the flag only then)."""
    shared = [t for t in tasks if all((m.name, t) in sets for m in metas)]
    return bool(shared) and all(set.intersection(*(sets[(m.name, t)] for m in metas)) for t in shared)


def _shared_rows(samples: pd.DataFrame, keep: dict[str, set[str]]) -> pd.DataFrame:
    """The rows of ``samples`` whose problem is in ``keep[task]``, task by task in ``keep``'s order (rows
    of a task in frame order), from one pass over the rows rather than one per task."""
    position = {task: i for i, task in enumerate(keep)}
    where = np.array([position[task] if task in keep and pid in keep[task] else -1 for task, pid in
                      zip(samples["task"], samples["problem_id"].astype(str), strict=True)], dtype=np.int64)
    rows = np.flatnonzero(where >= 0)
    return samples.iloc[rows[np.argsort(where[rows], kind="stable")]].reset_index(drop=True)


def problem_table(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per run × task × problem: samples n, correct c (unscored counts as wrong, as in
    the report) and the fraction c/n, i.e. the problem's mean@K term."""
    correct = samples["correct"].astype("boolean").fillna(False).astype(int)
    frame = samples[["run", "task", "problem_id"]].assign(correct=correct, problem_id=samples["problem_id"].astype(str))
    table = frame.groupby(["run", "task", "problem_id"], sort=False)["correct"].agg(n="size", c="sum").reset_index()
    table["fraction"] = table["c"] / table["n"]
    return table


def limit_lines_of(loaded: LoadedRuns, name: str, info: RunRecord | None) -> list[str]:
    """The tasks a ``--limit`` run cut short (:meth:`RunCompleteness.limit_lines`), from the loader's
    check when it made one, else from the run's record."""
    check = loaded.completeness.get(name)
    if check is not None:
        return check.limit_lines()
    if info is None or info.limit is None:
        return []
    return [f"{task}: {phrase} (--limit {info.limit})" for task, phrase in limited_tasks(info).items()]


def _completeness(loaded: LoadedRuns, metas: list[RunMeta], infos: dict[str, RunRecord], tasks: list[str],
                  include: bool) -> tuple[dict[str, list[str]], list[str], list[dict[str, Any]]]:
    """Per run the lines saying what its compared tasks lack (empty: complete), status notes for
    complete runs whose run.json status is not 'complete', and the runs left out (unless ``include``).
    Refuses when every run is incomplete and none is to be included."""
    missing: dict[str, list[str]] = {}
    notes: list[str] = []
    excluded: list[dict[str, Any]] = []
    checks: dict[str, RunCompleteness] = {}
    for meta in metas:
        check = loaded.completeness.get(meta.name) or check_completeness(
            infos[meta.name], loaded.samples[loaded.samples["run"] == meta.name], meta.k)
        checks[meta.name] = check
        status, other = run_lines(check)
        lines = [f"{task}: {check.tasks[task].describe()}" for task in tasks
                 if task in check.tasks and not check.tasks[task].complete] + other
        missing[meta.name] = lines + (status if lines else [])
        if not lines and not check.status_ok:
            notes.append(f"{meta.name}: run.json status is {check.status!r}, but every compared task holds all its samples")
    incomplete = [m for m in metas if missing[m.name]]
    if include or not incomplete:
        return missing, notes, excluded
    if len(incomplete) == len(metas):
        meta = incomplete[0]
        check = checks[meta.name]
        task = next((t for t in tasks if t in check.tasks and not check.tasks[t].complete), None)
        what = f"on task {task}: {check.tasks[task].describe()}" if task else f"({missing[meta.name][0]})"
        raise Pr1EvalError(f"run {meta.name} is incomplete {what}; {check.advice()}, or leave the run out (no "
                           "complete run is left to rank)")
    for meta in incomplete:
        excluded.append({"name": meta.name, "path": meta.path, "complete": False, "missing": missing[meta.name],
                         "advice": checks[meta.name].advice()})
    return missing, notes, excluded


def _excluded_note(entry: dict[str, Any]) -> str:
    return (f"{entry['name']} left out of the ranking: incomplete ({'; '.join(entry['missing'])}); "
            f"{entry['advice']}, or rank it on what it holds with include_incomplete "
            "(--include-incomplete; on the dashboard the sidebar toggle)")


def _task_cell(metrics: TaskMetrics, n_problems: int, n_samples: int, structure: dict[Any, Any]) -> TaskCell:
    """One task's leaderboard cell from the report's metrics and the structure statistics."""
    return TaskCell(
        k=metrics.k, n_problems=n_problems, mean=metrics.mean, ci95=metrics.interval("mean"),
        pass_at_k=metrics.pass_at_k, best_at_k_paper=metrics.best_at_k_paper, maj_at_k=metrics.maj_at_k,
        parallel_ratio=structure["parallel_ratio"], n_samples=n_samples, pass_at_1=metrics.pass_at_1,
        pass_at_k_ci95=metrics.interval("pass_at_k"), best_at_k=metrics.best_at_k, mean_paper=metrics.mean_paper,
        first_block_rel_pos=structure["first_block_rel_pos"], position_unit=structure["position_unit"],
        **{name: getattr(metrics, name) for name in LATENCY_FIELDS}, **_variance_cells(metrics))


def _variance_cells(metrics: TaskMetrics) -> dict[str, Any]:
    """The cell's view of the report's split of Var(mean@K) (all None when it is not estimable)."""
    v = metrics.variance
    if v is None:
        return {}
    return {"se": v.se, "variance_between": v.between, "variance_within": v.within, "required_k": v.required_k}


#: The report's token-latency fields every cell carries under the same names.
LATENCY_FIELDS = ("length_unit", "response_length_per_sample", "critical_path_per_sample", "speedup", "speedup_ci95",
                  "speedup_problem_median", "speedup_problem_p90", "losing_path_share", "speedup_correct",
                  "speedup_wrong")


#: How each position unit is written in labels.
UNIT_LABELS = {"token": "tokens", "char": "characters", "mixed": "mixed units"}


def position_unit_notes(rows: list[dict[str, Any]]) -> list[str]:
    """One note when the first-block positions of the rows are not all in one unit, naming the runs in each."""
    by_unit: dict[str, list[str]] = {}
    for row in rows:
        for task, cell in row["tasks"].items():
            if cell.get("first_block_rel_pos") is not None and cell.get("position_unit"):
                by_unit.setdefault(str(cell["position_unit"]), []).append(f"{row['name']} / {task}")
    if len(by_unit) < 2 and "mixed" not in by_unit:
        return []
    where = "; ".join(f"in {UNIT_LABELS.get(u, u)}: {', '.join(names)}" for u, names in sorted(by_unit.items()))
    return [f"first-block positions are not all in one unit ({where}): compare them only within a unit, "
            "or import the runs with --tokenizer so every position counts tokens"]


def _run_row(meta: RunMeta, samples: pd.DataFrame, tasks: list[str], average: str,
             missing: list[str]) -> dict[str, Any]:
    """One leaderboard row, every metric from the report on exactly the compared samples (for an
    incomplete run ranked on request, the report's ``partial`` metrics: problems holding all k).
    Cells and average are typed here; :func:`_row_json` writes them."""
    reports = run_report(samples, {task: meta.task_k[task] for task in tasks},  # every task in one pass
                         adaptive=meta.adaptive).tasks
    structure = branching_by_task(samples, task_rows(samples))
    cells = {}
    for task in tasks:
        k = meta.task_k[task]
        report = reports.get(task)
        metrics = None if report is None else report.metrics_or_partial
        if report is None or metrics is None:
            raise Pr1EvalError(f"run {meta.name}, task {task}: no problem holds all {k} samples; nothing to rank")
        cells[task] = _task_cell(metrics, report.n_problems, report.n_samples, structure[task])
        if meta.not_measured:  # an answers-only import or stripped tags: absent, never 0.000 ("never branches")
            absent: dict[str, Any] = {name: None for name in LATENCY_FIELDS}
            cells[task] = dataclasses.replace(cells[task], parallel_ratio=None, first_block_rel_pos=None,
                                              position_unit=None, **absent)
    return {"name": meta.name, "model": meta.model, "family": meta.family, "step": meta.step,
            "decoding": meta.decoding, "path": meta.path, "k": meta.k, "answer_policy": meta.answer_policy,
            "complete": not missing, "missing": missing,
            "tasks": cells, "average": _average(cells, meta.k, average)}


def branching_by_task(samples: pd.DataFrame, rows: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """:func:`analysis.structure.branching.branching_stats` of each task's ``rows`` (positions in ``samples``, frame order).

    Why not one call per task: each call converts the task's columns with pandas (milliseconds a task,
    minutes for thousands of tasks); here they are converted once for the run and each task takes its
    rows. Tests hold the two to the same numbers."""
    has_block = parallel_mask(samples).to_numpy()
    blocked = samples["n_blocks"].fillna(0).astype(int).to_numpy() != 0
    units = np.array([str(u) for u in samples["position_unit"]], dtype=object)
    first, has_first = np.zeros(len(samples)), np.zeros(len(samples), dtype=bool)
    for i, starts in enumerate(samples["block_rel_starts"]):
        if starts is not None and len(starts):
            first[i], has_first[i] = starts[0], True
    stats = {}
    for task, at in rows.items():
        firsts = first[at][has_first[at]]
        held = set(units[at][blocked[at]].tolist())
        stats[task] = {"parallel_ratio": parallel_ratio(int(has_block[at].sum()), len(at)),
                       "first_block_rel_pos": float(np.mean(firsts)) if len(firsts) else None,
                       "position_unit": None if not held else (held.pop() if len(held) == 1 else "mixed")}
    return stats


def _row_json(row: dict[str, Any]) -> dict[str, Any]:
    """A ranked row with its typed cells and average written as the document's JSON."""
    return {**row, "tasks": {task: cell.to_json() for task, cell in row["tasks"].items()},
            "average": row["average"].to_json()}


def k_label(k: int | None) -> str:
    """How K is written in metric names: the number, or ``k`` for an average over tasks of different k."""
    return "k" if k is None else str(k)


def _average(cells: dict[str, TaskCell], k: int | None, chosen: str) -> RunAverage:
    """Both averages over tasks. With tasks of different k (an import with per-task k) each task's
    own metric is averaged, named with ``k``."""
    sizes = np.array([cell.n_problems for cell in cells.values()], dtype=float)
    both: dict[str, dict[str, float]] = {"task_mean": {}, "problem_weighted": {}}
    one_unit = len({cell.length_unit for cell in cells.values()}) == 1
    for metric in AVERAGED:
        values = np.array([getattr(cell, metric) for cell in cells.values()], dtype=float)
        if metric == "speedup" and (not one_unit or np.isnan(values).any()):
            both["task_mean"][metric] = both["problem_weighted"][metric] = math.nan
            continue
        both["task_mean"][metric] = float(values.mean())
        both["problem_weighted"][metric] = float((values * sizes).sum() / sizes.sum())
    return RunAverage(convention=chosen, k=k, n_tasks=len(cells), n_problems=int(sizes.sum()),
                      task_mean=Averages(**both["task_mean"]), problem_weighted=Averages(**both["problem_weighted"]))


def _weighted_diffs(fractions: TaskFractions, run: str, other: str, tasks: list[str],
                    average: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem differences run − other over all tasks, with the weights of the average."""
    pairs = [fractions.aligned(run, other, task) for task in tasks]
    total = sum(a.size for a, _ in pairs)
    diffs = [a - b for a, b in pairs]
    weights = [np.full(a.size, 1.0 / (len(tasks) * a.size) if average == "task_mean" else 1.0 / total)
               for a, _ in pairs]
    return np.concatenate(diffs), np.concatenate(weights)


class TaskFractions:
    """Each problem's fraction correct per run (``fractions``: index task × problem_id, one column
    per run), split by task once. Why: the ranking and the comparisons align two runs on every task;
    a pandas ``.loc`` per pair was most of a 3,000-task leaderboard's time, a numpy slice is not."""

    def __init__(self, fractions: pd.DataFrame) -> None:
        self.columns = {str(c): i for i, c in enumerate(fractions.columns)}
        self.by_task = {str(t): g.to_numpy(float) for t, g in fractions.groupby(level="task", sort=False)}

    def aligned(self, run: str, other: str, task: str) -> tuple[np.ndarray, np.ndarray]:
        """Fractions of two runs on the problems of ``task`` they share, in the same (problem id) order."""
        pair = self.by_task[task][:, [self.columns[run], self.columns[other]]]
        pair = pair[~np.isnan(pair).any(axis=1)]
        return pair[:, 0], pair[:, 1]


def _rank(rows: list[dict[str, Any]], fractions: TaskFractions, tasks: list[str], average: str) -> list[dict[str, Any]]:
    """Sort by the average mean@K (stable) and mark rows not significantly below the row above."""
    ordered = sorted(rows, key=lambda r: -r["average"].chosen.mean)
    pairs = [_weighted_diffs(fractions, above["name"], row["name"], tasks, average)
             for above, row in zip(ordered, ordered[1:], strict=False)]
    p_values = _threaded(lambda pair: sign_flip_test(*pair).p_value, pairs)
    for i, row in enumerate(ordered):
        row["rank"], row["tied_with_above"], row["p_vs_above"] = i + 1, False, None
        if i:
            p = p_values[i - 1]
            row["p_vs_above"], row["tied_with_above"] = p, p >= ALPHA
    return ordered


def _comparisons(rows: list[dict[str, Any]], base: RunMeta, fractions: TaskFractions,
                 tasks: list[str]) -> list[dict[str, Any]]:
    """Each run against the baseline, per task, Holm-adjusted across that run's tasks."""
    if not tasks:
        return []
    others = [row["name"] for row in rows if row["name"] != base.name]
    aligned = [(name, task, *fractions.aligned(name, base.name, task)) for name in others for task in tasks]
    tests = _threaded(lambda item: paired_comparison(item[2], item[3]), aligned)
    out = []
    for start in range(0, len(aligned), len(tasks)):
        group = [{"run": name, "baseline": base.name, "task": task, **test}
                 for (name, task, _, _), test in zip(aligned[start:start + len(tasks)],
                                                     tests[start:start + len(tasks)], strict=True)]
        for item, adjusted in zip(group, holm([g["p_value"] for g in group]), strict=True):
            item["p_holm"] = adjusted
        out.extend(group)
    return out


_T = TypeVar("_T")
_R = TypeVar("_R")


def _threaded(function: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
    """``[function(x) for x in items]`` on two threads, in order (the first failure raised first).

    Why: a leaderboard's time is mostly its bootstrap intervals and sign-flip tests, numpy work
    that runs without the GIL, so two threads use both cores of a small machine; every result is
    computed exactly as alone (each call is seeded and reads only its own inputs)."""
    items = list(items)
    if len(items) < 2:
        return [function(item) for item in items]
    with ThreadPoolExecutor(2, thread_name_prefix="pr1-leaderboard") as pool:
        return list(pool.map(function, items))


def _json_safe(value: Any) -> Any:
    """Plain JSON types: numpy scalars to Python, NaN/NA to None."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value
