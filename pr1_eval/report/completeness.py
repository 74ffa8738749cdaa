"""Is a run complete? The check every aggregator runs before it trusts a number.

Why: a run killed after 2 of 30 AIME problems holds perfectly valid samples, and averaging
them gives a perfectly wrong Mean@16. So nothing that aggregates runs (``report``, ``analyze``,
a leaderboard, the lm-eval import) may average a task without first comparing the stored
samples with what ``run.json`` says the task has: its problem ids (``tasks.<name>.problem_ids``,
written by :func:`pr1_eval.records.run.task_entry`) and its samples per problem (``tasks.<name>.k``,
else the run's ``k``). A task is complete when every declared problem holds at least k samples
and no sample belongs to an undeclared problem; a run is complete when its status is
``complete`` and every declared task is. A declared task with no samples at all (it never
started) is reported as missing rather than left out.

Older ``run.json`` files record only ``n_problems``: missing problems are then counted, not
named. Call :func:`check_run` on a run folder, or :func:`check_completeness` on a ``run.json``
dict and a samples frame you already hold (only ``task``, ``problem_id``, ``sample_idx`` are read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pr1_eval.records.run import RunRecord

SHOWN_IDS = 5  # problem ids named in one line before "… N more"


@dataclass(frozen=True)
class TaskDeclaration:
    """What ``run.json`` promises about one task."""

    k: int | None
    problem_ids: list[str] | None  # None: this run.json records only the count
    n_problems: int | None


@dataclass(frozen=True)
class TaskCompleteness:
    """How one task's stored samples compare with its declaration."""

    task: str
    k: int
    declared: bool  # run.json lists the task
    n_problems_expected: int | None
    problems_with_samples: int
    missing_problems: list[str] = field(default_factory=list)  # declared, no sample (ids when known)
    n_missing_problems: int = 0
    short_problems: dict[str, int] = field(default_factory=dict)  # id -> samples held (< k)
    undeclared_problems: list[str] = field(default_factory=list)  # samples of problems run.json does not list

    @property
    def complete(self) -> bool:
        return (self.declared and not self.n_missing_problems and not self.short_problems
                and not self.undeclared_problems)

    def describe(self) -> str:
        """One line naming what is missing (empty when complete)."""
        parts = []
        if not self.declared:
            parts.append("run.json does not declare this task")
        if self.n_missing_problems:
            of = f" of {self.n_problems_expected}" if self.n_problems_expected is not None else ""
            named = f" ({name_ids(self.missing_problems, self.n_missing_problems)})" if self.missing_problems else ""
            parts.append(f"{self.n_missing_problems}{of} problem(s) have no samples{named}")
        if self.short_problems:
            counts = [f"{pid}: {n}" for pid, n in self.short_problems.items()]
            parts.append(f"{len(counts)} problem(s) have fewer than {self.k} samples "
                         f"({name_ids(counts, len(counts))})")
        if self.undeclared_problems:
            parts.append(f"{len(self.undeclared_problems)} stored problem(s) are not in run.json's problem list "
                         f"({name_ids(self.undeclared_problems, len(self.undeclared_problems))})")
        return "; ".join(parts)


@dataclass(frozen=True)
class RunCompleteness:
    """Run status plus one :class:`TaskCompleteness` per task (declared or found in the samples)."""

    status: str | None
    imported: bool
    tasks: dict[str, TaskCompleteness]

    @property
    def status_ok(self) -> bool:
        return self.status == "complete"

    @property
    def complete(self) -> bool:
        return self.status_ok and all(t.complete for t in self.tasks.values())

    def problems(self) -> list[str]:
        """Human lines: the status when it is not ``complete``, then each incomplete task."""
        lines = []
        if not self.status_ok:
            lines.append(f"run status is {self.status!r}, not 'complete' (the run is still going, or it was "
                         "stopped before the end)")
        lines += [f"{name}: {t.describe()}" for name, t in self.tasks.items() if not t.complete]
        return lines

    def advice(self) -> str:
        """How to finish the run: resume a generated run; fix or re-import an imported one."""
        if not self.imported:
            return "rerun the run's command to generate what is missing (finished samples are kept)"
        uneven = {name: t for name, t in self.tasks.items() if t.short_problems}
        if not uneven:
            return "import the complete file again (every problem with all its samples)"
        needs = ", ".join(f"{name} needs {t.k}" for name, t in uneven.items())
        option = ",".join(f"{name}={min(t.short_problems.values())}" for name, t in uneven.items())
        return (f"complete the import file so every problem has its task's k samples ({needs} per problem), or "
                f"import it again with `--k {option}` (the fewest samples any of its problems has) to score "
                "that many samples of every problem")


def name_ids(ids: list[str], total: int) -> str:
    """``a, b, c, d, e … 7 more``: a few names, never a wall of them."""
    shown = ", ".join(ids[:SHOWN_IDS])
    return shown + (f" … {total - SHOWN_IDS} more" if total > SHOWN_IDS else "")


def declared_tasks(run: RunRecord) -> dict[str, TaskDeclaration]:
    """Per task: samples per problem (task ``k``, else the run's) and the declared problems."""
    return {name: TaskDeclaration(run.task_k(name), entry.problem_ids, entry.n_problems)
            for name, entry in run.tasks.items()}


def samples_per_problem(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """task → problem id → stored samples, in first-seen order."""
    out: dict[str, dict[str, int]] = {}
    if frame.empty:
        return out
    counts = frame.groupby(["task", "problem_id"], sort=False).size()
    for task, pid, n in zip(counts.index.get_level_values(0), counts.index.get_level_values(1), counts, strict=True):
        out.setdefault(str(task), {})[str(pid)] = int(n)
    return out


def check_task(task: str, declaration: TaskDeclaration | None, held: dict[str, int],
               default_k: int | None = None) -> TaskCompleteness:
    """Compare one task's stored counts (``held``: problem id → samples) with its declaration.

    Without a declared k, k is ``default_k`` or else the most samples any problem holds.
    """
    k = (declaration.k if declaration else None) or default_k or max(held.values(), default=0)
    short = {pid: n for pid, n in held.items() if n < k}
    if declaration is None:
        return TaskCompleteness(task, k, False, None, len(held), short_problems=short)
    if declaration.problem_ids is not None:
        declared = set(declaration.problem_ids)
        missing = [pid for pid in declaration.problem_ids if pid not in held]
        undeclared = [pid for pid in held if pid not in declared]
        n_missing = len(missing)
    else:
        missing, undeclared = [], []
        n_missing = max((declaration.n_problems or 0) - len(held), 0)
    return TaskCompleteness(task, k, True, declaration.n_problems, len(held), missing, n_missing, short, undeclared)


def check_completeness(run: RunRecord | None, frame: pd.DataFrame, k: int | None = None) -> RunCompleteness:
    """Completeness of a run from its record (``run.json``) and its samples.

    ``run=None`` (samples without a run record, e.g. a test frame) checks only that every
    problem holds k samples (``k`` given, else the most any problem holds) and takes the status
    as complete. Tasks are listed in ``run.json`` order, then tasks found only in the samples.
    """
    held = samples_per_problem(frame)
    declarations = declared_tasks(run) if run is not None else {}
    names = list(declarations) + [t for t in held if t not in declarations]
    tasks = {}
    for name in names:
        declaration = declarations.get(name)
        if run is None:
            declaration = TaskDeclaration(k, list(held[name]), len(held[name]))
        tasks[name] = check_task(name, declaration, held.get(name, {}), k)
    if run is None:
        return RunCompleteness("complete", False, tasks)
    return RunCompleteness(run.status, run.imported, tasks)


def check_run(run_dir: str | Path) -> RunCompleteness:
    """Completeness of the run stored at ``run_dir`` (reads run.json and the sample keys only)."""
    from pr1_eval.store.run_store import RunStore

    store = RunStore(run_dir)
    record = store.read_run()
    keys = store.read_table(columns=["task", "problem_id", "sample_idx"]).to_pandas()
    return check_completeness(record, keys)
