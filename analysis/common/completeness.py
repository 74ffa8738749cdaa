"""Which (run, task) cells hold every sample their ``run.json`` promises: the one table every surface reads.

Why one table: ``report`` refuses to average a killed run, and ``analyze``, the dashboard, the
notebooks and the sweep must say the same thing about the same run. So the loader calls
:func:`pr1_eval.report.completeness.check_completeness` once per run (on every stored sample,
before anything is dropped), keeps the result in :attr:`analysis.runs.loader.LoadedRuns.completeness`,
and :func:`completeness_frame` lays it out as one row per (run, task) with the columns of
:data:`COMPLETENESS_COLUMN_DOCS`. Nobody re-implements the rule: they merge this frame on
``run, task`` and read ``complete`` and ``missing``.

The rule, and why: a cell is ``complete`` when the report's per-task rule holds (every declared
problem holds k samples and none is undeclared) and the check names no run-level problem other
than the status (:func:`run_lines`). A declared task that never started gets a row
too (``n_problems_held`` 0), so it is marked instead of vanishing. The run's status travels in
``missing`` ("run status is 'running' …") but does not by itself exclude a finished task: the
report prints that task's numbers and the leaderboard compares it, so every surface does the same.

Incomplete cells are marked wherever their numbers appear and left out of trend tests
(drift, Spearman) and rankings unless the user asks for them (``analyze --include-incomplete``,
``compute_leaderboard(..., include_incomplete=True)``, the dashboard's sidebar toggle
:data:`INCLUDE_LABEL`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from analysis.common.defaults import INCLUDE_FLAG  # noqa: F401 - re-exported: the notes' sentence names it
from pr1_eval.report.completeness import LIMIT_MARK, LIMIT_WARNING, RunCompleteness, check_completeness

if TYPE_CHECKING:
    from analysis.runs.loader import LoadedRuns

COMPLETENESS_COLUMN_DOCS: dict[str, str] = {
    "run": "Run name (as in the samples frame).",
    "task": "Task name: every task run.json declares, then any found only in the samples.",
    "complete": "True when every declared problem holds k samples, no stored problem is undeclared (report's rule) "
                "and the check names no run-level problem other than the status.",
    "run_complete": "True when the whole run is complete (status 'complete' and every task complete).",
    "missing": "What is missing ('' when nothing is): the task's gaps, other run-level problems, then the run status "
               "when it is not 'complete' (which alone leaves complete True).",
    "n_problems_expected": "Problems run.json declares for the task (None when it does not say).",
    "n_problems_held": "Problems with at least one stored sample.",
    "limited": "How --limit cut the task ('the first 4 of 30 problems (--limit 4)'; '' for a whole task): complete, "
               "but numbers for testing, not the benchmark's; marked LIMIT_MARK wherever shown.",
}
COMPLETENESS_COLUMNS: tuple[str, ...] = tuple(COMPLETENESS_COLUMN_DOCS)
#: What a table or page prints beside an incomplete cell.
MARK = "⚠ incomplete"
#: The dashboard's sidebar toggle (named in every sentence that tells a reader how to include them).
INCLUDE_LABEL = "Include incomplete runs in trends and rankings"


def run_lines(check: RunCompleteness) -> tuple[list[str], list[str]]:
    """The check's run-level lines (those of :meth:`RunCompleteness.problems` that name no task),
    split into the status line and any other (e.g. a lone shard): the status alone does not make
    a finished task incomplete (a generated run is 'running' while other tasks go on), any other
    run-level problem makes every task of the run incomplete. An import that never reached
    'complete' is such a problem: its writer was stopped, and ``report`` says the same (one
    verdict on every surface)."""
    task_prefixes = tuple(f"{task}: " for task in check.tasks)
    lines = [line for line in check.problems() if not line.startswith(task_prefixes)]
    status = [line for line in lines if line.startswith("run status is") and not check.interrupted_import]
    return status, [line for line in lines if line not in status]


def completeness_frame(checks: Mapping[str, RunCompleteness]) -> pd.DataFrame:
    """One row per (run, task) of ``checks`` (run name → its check), columns :data:`COMPLETENESS_COLUMNS`."""
    rows = []
    for run, check in checks.items():
        status, other = run_lines(check)
        cut = dict(zip(check.limited, check.limit_lines(), strict=True))
        for task, entry in check.tasks.items():
            complete = entry.complete and not other
            rows.append({"run": run, "task": task, "complete": complete, "run_complete": check.complete,
                         "missing": "; ".join([entry.describe()] * (not entry.complete) + other + status),
                         "n_problems_expected": entry.n_problems_expected,
                         "n_problems_held": entry.problems_with_samples,
                         "limited": cut.get(task, "").removeprefix(f"{task}: ")})
    frame = pd.DataFrame(rows, columns=list(COMPLETENESS_COLUMNS))
    return frame.astype({"complete": bool, "run_complete": bool})


def limit_summary(frame: pd.DataFrame) -> str | None:
    """One sentence when some (run, task) of a :func:`completeness_frame` was cut by ``--limit``, else None."""
    rows = frame[frame["limited"].astype(str) != ""]
    if rows.empty:
        return None
    runs = ", ".join(dict.fromkeys(str(r) for r in rows["run"]))
    return (f"{len(rows)} run × task(s) hold only the first problems of their task, marked {LIMIT_MARK} ({runs}): "
            f"{LIMIT_WARNING}")


def incomplete_cells(frame: pd.DataFrame) -> set[tuple[str, str]]:
    """The (run, task) pairs of a :func:`completeness_frame` that are not complete."""
    rows = frame[~frame["complete"].astype(bool)]
    return {(str(r), str(t)) for r, t in zip(rows["run"], rows["task"], strict=True)}


def loaded_completeness(loaded: LoadedRuns) -> pd.DataFrame:
    """:func:`completeness_frame` of every run in ``loaded``: the loader's checks, and for a run
    without one (a hand-built :class:`~analysis.runs.loader.LoadedRuns`) the same check made here."""
    checks = dict(loaded.completeness)
    if not loaded.samples.empty:
        for run, group in loaded.samples.groupby("run", sort=False):
            if str(run) not in checks:
                checks[str(run)] = check_completeness(loaded.run_info.get(str(run)), group)
    return completeness_frame(checks)


def cell_flags(samples: pd.DataFrame, frame: pd.DataFrame) -> pd.Series:
    """Per sample row: whether its (run, task) cell is complete (True for cells the frame lacks)."""
    bad = incomplete_cells(frame)
    if not bad:  # the usual case: no key to look up (a sweep's 148,705 blocks took most of a second)
        return pd.Series(True, index=samples.index, dtype=bool)
    keys = zip(samples["run"].astype(str), samples["task"].astype(str), strict=True)
    return pd.Series([key not in bad for key in keys], index=samples.index, dtype=bool)
