"""Pure pandas functions behind the pages: what a page shows, computed from analysis' frames.

Kept free of Streamlit so each can be tested against a hand count, and so a page is only
layout. Every number comes from an analysis or report function; these only reshape, filter
and bin.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.common.completeness import MARK
from analysis.runs.loader import LoadedRuns
from pr1_eval.records.run import RunRecord
from pr1_eval.report.completeness import LIMIT_MARK
from pr1_eval.report.run_report import run_report
from pr1_eval.report.schema import TaskMetrics, TaskReport

#: Outcomes the trace viewer filters on, from a sample's grade.
OUTCOMES: tuple[str, ...] = ("correct", "wrong", "no answer", "timeout", "error", "ungraded")
#: The report's metrics in the fallback table, as :class:`TaskMetrics` fields (pass@1 is left out:
#: it is mean@K by definition, c/n per problem).
REPORT_METRICS = ("mean", "pass_at_k", "best_at_k", "maj_at_k", "mean_paper", "best_at_k_paper")
#: The report's metric fields (those with a name at k), in the report's order.
METRIC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskMetrics) if TaskMetrics.metric_key(f.name, "K") != f.name)
#: Report values shown beside the @K metrics in the fallback table.
REPORT_EXTRAS = ("parallel_ratio", "n_unscored")
_POSITION = re.compile(r" at character \d+$")
_NUMBER = re.compile(r"\d+")


def outcome(correct: Any, grade_status: Any) -> str:
    """One of :data:`OUTCOMES`: 'no answer' is wrong with no extracted answer; timeout/error could not be scored."""
    status = str(grade_status)
    if status == "no_answer":
        return "no answer"
    if status in ("timeout", "error", "ungraded"):
        return status
    return "correct" if not pd.isna(correct) and bool(correct) else "wrong"


def outcomes(samples: pd.DataFrame) -> pd.Series:
    """:func:`outcome` of every sample."""
    return pd.Series([outcome(c, s) for c, s in zip(samples["correct"], samples["grade_status"], strict=True)],
                     index=samples.index, dtype=object)


def format_error_kind(error: Any) -> str:
    """A format-check message without its offset and counts ('block N has N path(s), …'), so
    failures of one kind group together."""
    text = _POSITION.sub("", str(error))
    return _NUMBER.sub("N", text)


def format_failures(samples: pd.DataFrame) -> pd.DataFrame:
    """Per run: responses failing the strict format check, by kind of first violation."""
    failing = samples[~samples["format_ok"].astype(bool)]
    columns = ["run", "kind", "responses", "share of run"]
    if failing.empty:
        return pd.DataFrame(columns=columns)
    kinds = failing.assign(kind=[format_error_kind(e) for e in failing["format_error"]])
    counts = kinds.groupby(["run", "kind"]).size().rename("responses").reset_index()
    totals = samples.groupby("run").size()
    counts["share of run"] = counts["responses"] / counts["run"].map(totals)
    return counts.sort_values(["run", "responses"], ascending=[True, False])[columns]


def binned(values: Sequence[float] | pd.Series, edges: np.ndarray) -> np.ndarray:
    """Share of ``values`` in each bin of ``edges`` (the last bin includes its right edge)."""
    array = np.asarray(pd.Series(values, dtype="float64").dropna(), dtype=float)
    counts, _ = np.histogram(array, bins=edges)
    return counts / max(array.size, 1)


def task_reports(samples: pd.DataFrame, run: RunRecord | None) -> dict[str, TaskReport]:
    """``pr1-eval report``'s per-task reports of one run's samples (checked against its run.json;
    without a record, against the most samples any problem holds)."""
    return {str(task): report for task, report in run_report(samples, run=run).tasks.items()}


def _report_cells(metrics: TaskMetrics) -> dict[str, Any]:
    """The fallback table's numbers of one complete task, named at a generic K."""
    cells: dict[str, Any] = {}
    for name in REPORT_METRICS:
        key = TaskMetrics.metric_key(name, "K")
        cells[key] = getattr(metrics, name)
        if name == "mean":  # its interval right beside it, as the leaderboard shows it
            interval = metrics.interval(name)
            cells[f"{key} ci95"] = None if interval is None else [interval[0], interval[1]]
    return {**cells, **{name: getattr(metrics, name) for name in REPORT_EXTRAS}}


def metric_names(k: int | str) -> dict[str, str]:
    """Every report metric's name at ``k`` → its name at ``K`` (``mean@16`` → ``mean@K``,
    ``best@16_paper`` → ``best@K_paper``; ``pass@1`` stays itself), named forward from the report's
    fields through :meth:`TaskMetrics.metric_key` (:func:`pr1_eval.stats.names.metric_name`), never
    read back from a string. Interval keys follow their metric (``pass@16_ci95``, ``mean@16 ci95``)."""
    names: dict[str, str] = {}
    for field_name in METRIC_FIELDS:
        at, generic = TaskMetrics.metric_key(field_name, k), TaskMetrics.metric_key(field_name, "K")
        names.update({at: generic, f"{at}_ci95": f"{generic}_ci95", f"{at} ci95": f"{generic} ci95"})
    return names


def metric_cells(metrics: dict[str, Any], k: int | str) -> dict[str, Any]:
    """The numbers of one leaderboard cell or average whose metrics are named at ``k``, in its own
    key order and names: every numeric value, each metric (a null one too), and each interval of
    ``ci95`` as '<metric> ci95'."""
    named = metric_names(k)
    cells: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or key in ("k", "rank"):
            continue
        if isinstance(value, (int, float, np.integer, np.floating)) or (value is None and key in named):
            cells[key] = value
        elif key == "ci95" and isinstance(value, dict):
            cells.update({f"{name} ci95": interval for name, interval in value.items()})
        elif key.endswith("ci95") and (value is None or isinstance(value, list)):
            cells[key] = value
    return cells


def report_rows(loaded: LoadedRuns, runs: Sequence[str], tasks: Sequence[str]) -> pd.DataFrame:
    """Per run × task, the metrics ``pr1-eval report`` gives (the leaderboard's fallback)."""
    rows = []
    for run in runs:
        samples = loaded.samples[(loaded.samples["run"] == run) & loaded.samples["task"].isin(tasks)]
        if samples.empty:
            continue
        for task, report in task_reports(samples, loaded.run_info.get(run)).items():
            if task not in tasks:
                continue
            note = "" if report.complete else str(report.incomplete_reason or "incomplete: no metrics")
            values = report.metrics_or_partial  # an incomplete task: its partial numbers, starred where shown
            shown = _report_cells(values) if values is not None else {}
            if values is not None and values.parallel_ratio is None:  # tags stripped: never a number
                shown["parallel_ratio"] = "n/a"
            rows.append({"run": run, "task": task, "k": report.k or None, "n_problems": report.n_problems, **shown,
                         PARTIAL: report.metrics is None and values is not None, "note": note})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="note") if "note" in frame and not frame["note"].astype(bool).any() else frame


#: The column of :func:`report_rows` that says a row's numbers are partial (an incomplete task's,
#: over its problems holding all k samples): the page stars them, as ``pr1-eval report`` does.
PARTIAL = "partial"


def starred(shown: pd.DataFrame, partial: pd.Series, columns: Sequence[str]) -> pd.DataFrame:
    """``shown`` (text cells) with ``*`` after each number of ``columns`` in the partial rows."""
    out = shown.copy()
    rows = partial.fillna(False).astype(bool).to_numpy()
    for column in columns:
        if column in out:
            out.loc[rows, column] = [v if v == "—" else f"{v}*" for v in out.loc[rows, column]]
    return out


def notes_apart(frame: pd.DataFrame, column: str = "note") -> tuple[pd.DataFrame, list[str]]:
    """Long notes moved out of a table: each note cell becomes ``(1)``, ``(2)`` … and the notes are
    returned in that order to print below, so the table fits the page and its rows stay one line
    high (a long note in a narrow column made an incomplete row hundreds of pixels tall)."""
    if column not in frame:
        return frame, []
    notes: list[str] = []
    cells = []
    for run, task, note in zip(frame["run"], frame["task"], frame[column].fillna(""), strict=True):
        if note:
            notes.append(f"({len(notes) + 1}) {run} · {task}: {note}")
            cells.append(f"({len(notes)})")
        else:
            cells.append("")
    return frame.assign(**{column: cells}), notes


def generic_k(cells: dict[str, Any], k: int | str, run_k: int | None) -> dict[str, Any]:
    """Cells named at ``k`` with their metrics renamed at ``K`` when ``k`` is the run's k (``mean@16``
    → ``mean@K``), so runs with different k share columns; ``k`` is its own column. A run whose
    tasks differ in k (no run k) keeps each task's own names."""
    if not run_k or k != run_k:
        return cells
    named = metric_names(k)
    return {named.get(key, key): value for key, value in cells.items()}


def leaderboard_rows(document: dict[str, Any]) -> pd.DataFrame:
    """The leaderboard document as one row per run × task plus each run's average, raw values."""
    rows = []
    for run in document["runs"]:
        cells = [*run["tasks"].items(), ("average", run["average"])]
        for task, cell in cells:
            k = "k" if cell.get("k") is None else int(cell["k"])  # how the cell names its metrics
            rows.append({"rank": run["rank"], "run": run["name"], "step": run["step"], "task": task, "k": run["k"],
                         **generic_k(metric_cells(cell, k), k, run["k"]),
                         "tied with above": ("yes" if run.get("tied_with_above") else "no") if task == "average" else ""})
    return pd.DataFrame(rows)


def _tasks_by_run(samples: pd.DataFrame) -> dict[str, set[str]]:
    return {str(run): set(map(str, tasks)) for run, tasks in samples.groupby("run", sort=False)["task"]}


def default_b(samples: pd.DataFrame, runs: list[str], run_a: str) -> str:
    """A run sharing a task with A (there is nothing to compare otherwise): the latest other run of
    A's model family (runs are ordered by family, then step), else the next such run; the next run
    when none shares a task."""
    family = samples.groupby("run", sort=False)["model_family"].first()
    tasks = _tasks_by_run(samples)
    comparable = [r for r in runs if r != run_a and tasks.get(r, set()) & tasks.get(run_a, set())]
    same = [r for r in comparable if family.get(r) == family.get(run_a)]
    return same[-1] if same else comparable[0] if comparable else next(r for r in runs if r != run_a)


def default_a(samples: pd.DataFrame, runs: list[str]) -> str:
    """The first run that shares a task with another run (a runs/ folder of different experiments
    may start with one that shares none), else the first run."""
    tasks = _tasks_by_run(samples)
    return next((r for r in runs if any(tasks.get(r, set()) & tasks.get(o, set()) for o in runs if o != r)), runs[0])


def problem_outcomes(samples: pd.DataFrame) -> pd.DataFrame:
    """Per run × task × problem: samples n, correct c (unscored counts as wrong, as in the report)."""
    correct = samples["correct"].astype("boolean").fillna(False).astype(int)
    frame = samples[["run", "task", "problem_id"]].assign(correct=correct)
    return frame.groupby(["run", "task", "problem_id"], sort=False)["correct"].agg(n="size", c="sum").reset_index()


def flips(samples: pd.DataFrame, run_a: str, run_b: str, task: str, criterion: str = "majority") -> pd.DataFrame:
    """Problems of ``task`` in both runs, with c/n in each and whether each run solved it.

    ``criterion``: 'majority' (more than half the samples correct) or 'any' (at least one). The
    ``change`` column is 'wrong → right', 'right → wrong' or '' (same verdict); ``open_a`` and
    ``open_b`` name the sample to open in each run (one whose verdict matches the run's).
    """
    table = problem_outcomes(samples[(samples["task"] == task) & samples["run"].isin([run_a, run_b])])
    a = table[table["run"] == run_a].set_index("problem_id")
    b = table[table["run"] == run_b].set_index("problem_id")
    shared = [p for p in a.index if p in b.index]
    out = pd.DataFrame({"problem_id": shared, "c_a": a.loc[shared, "c"].to_numpy(), "n_a": a.loc[shared, "n"].to_numpy(),
                        "c_b": b.loc[shared, "c"].to_numpy(), "n_b": b.loc[shared, "n"].to_numpy()})
    solved = (lambda c, n: c * 2 > n) if criterion == "majority" else (lambda c, n: c > 0)
    out["solved_a"] = solved(out["c_a"], out["n_a"])
    out["solved_b"] = solved(out["c_b"], out["n_b"])
    out["change"] = np.select([~out["solved_a"] & out["solved_b"], out["solved_a"] & ~out["solved_b"]],
                              ["wrong → right", "right → wrong"], default="")
    out["open_a"] = _sample_to_open(samples, run_a, task, shared, want_correct=out["solved_a"].to_numpy())
    out["open_b"] = _sample_to_open(samples, run_b, task, shared, want_correct=out["solved_b"].to_numpy())
    return out


def _sample_to_open(samples: pd.DataFrame, run: str, task: str, problems: list[Any], want_correct: Any) -> list[int]:
    """Per problem, the first sample whose verdict is ``want_correct`` (else the first sample):
    the trace that shows why the problem counts as solved or not."""
    rows = samples[(samples["run"] == run) & (samples["task"] == task)]
    correct = rows["correct"].astype("boolean").fillna(False).astype(bool)
    first_right = rows[correct].groupby("problem_id")["sample_idx"].min()
    first_wrong = rows[~correct].groupby("problem_id")["sample_idx"].min()
    first_any = rows.groupby("problem_id")["sample_idx"].min()
    chosen = []
    for problem, right in zip(problems, want_correct, strict=True):
        preferred = first_right if right else first_wrong
        chosen.append(int(preferred.get(problem, first_any[problem])))
    return chosen


def trace_index(samples: pd.DataFrame, chosen_outcomes: Sequence[str], has_block: str, format_ok: str) -> pd.DataFrame:
    """The samples passing the trace viewer's filters, in stored problem order, then by sample.

    ``has_block`` and ``format_ok`` are 'any', 'yes' or 'no'.
    """
    keep = outcomes(samples).isin(list(chosen_outcomes))
    if has_block != "any":
        keep &= samples["n_blocks"].fillna(0).astype(int).gt(0) == (has_block == "yes")
    if format_ok != "any":
        keep &= samples["format_ok"].astype(bool) == (format_ok == "yes")
    chosen = samples[keep]
    order = {p: i for i, p in enumerate(dict.fromkeys(samples["problem_id"]))}
    return chosen.assign(_order=chosen["problem_id"].map(order)).sort_values(
        ["_order", "sample_idx"], kind="stable").drop(columns="_order")


def bar_label(run: str, task: str, complete: str) -> str:
    """A bar's label: the run's short name, the task, and only the marks of its ``complete`` cell
    (incomplete, ``--limit``). The whole cell (``yes ⚠ --limit: the first 6 of 30 problems …``) made
    labels run past the plot's edge; the table under the chart has the words."""
    marks = ([] if complete.startswith("yes") else [MARK]) + ([LIMIT_MARK] if LIMIT_MARK in complete else [])
    return " ".join([f"{run} · {task}", *marks])
