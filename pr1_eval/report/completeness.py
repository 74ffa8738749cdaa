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

A run can also hold every sample it declares and still be only *part* of what its name says
(:class:`PartOf`): a lone shard of a ``--shard i/n`` run declares only its slice of each task
(``run.json``'s ``shard.task_sizes`` knows the whole), and an import under a packaged benchmark's
name may hold a subset of that benchmark (``benchmark_check``, recorded at import by
:mod:`pr1_eval.ingest.benchmark_check`). Both are incomplete — "shard 0/2 of 6 problems",
"25 of 30 problems of the packaged aime24" — so ``report --strict`` refuses them and no
aggregator ranks them as the whole; a merged run (no ``shard`` section) is complete. Differences
that do not make a task a part (ids or golds unlike the packaged benchmark's, a task name that is
no benchmark's) are :meth:`RunCompleteness.warnings`, shown but not counted as incomplete.

A problem whose samples have no gold (``grade_status='no_gold'``: an import whose file gave
none) cannot be scored: it makes its task incomplete ("could not score …: no gold"), and the
report leaves it out of the metrics rather than count its samples wrong. This is read from the
``grade_status`` column when the frame has one.

An adaptive run (``run.json``'s ``adaptive`` section, :mod:`pr1_eval.stats.sequential`) promises
fewer than k samples of a problem its rule settled: a problem needs the samples the rule asks for
given the verdicts it holds (the first round boundary where it is settled, else k), so a problem
that stopped early is complete, and one whose run was killed before its rule was satisfied is
short. The rule is replayed on the ``correct`` column (could not score counts as wrong, as in the
metrics), so a regrade that changes a verdict can make a problem short again: rerunning the run's
command then draws its next rounds.

A run made with ``--limit N`` (``run.json``'s ``limit``) holds every sample it declares but only
the first N problems of each task: it is *limited*, not incomplete (its samples are all there, and
the demo, the nano curriculum and smoke runs are limited by design), so it is ranked and trended
like a complete run, but every surface that shows its numbers marks it (:data:`LIMIT_MARK`) and the
report and the leaderboard print lm-eval's warning (:data:`LIMIT_WARNING`): four AIME problems are
not "AIME". :attr:`RunCompleteness.limited` names each task cut short: "the first 4 of 30 problems"
when ``run.json`` records the task's full size (``limit_task_sizes``, written since this check
existed), else "the first 4 problems" when the task holds exactly N (an older run; a task with fewer
problems than N was not cut).

Older ``run.json`` files record only ``n_problems``: missing problems are then counted, not
named. Call :func:`check_run` on a run folder, or :func:`check_completeness` on a ``run.json``
dict and a samples frame you already hold (only ``task``, ``problem_id``, ``sample_idx`` and, when
present, ``grade_status`` are read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pr1_eval.records.benchmark_check import partial_phrase, warnings_of
from pr1_eval.records.limit import LIMIT_MARK, LIMIT_SIZES_KEY, LIMIT_WARNING  # noqa: F401 - re-exported
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import NO_GOLD
from pr1_eval.report.task_arrays import verdicts
from pr1_eval.stats.sequential import StopRule, required_samples
from pr1_eval.store.run_store import RunStore

SHOWN_IDS = 5  # problem ids named in one line before "… N more"


@dataclass(frozen=True)
class TaskDeclaration:
    """What ``run.json`` promises about one task."""

    k: int | None
    problem_ids: list[str] | None  # None: this run.json records only the count
    n_problems: int | None


@dataclass(frozen=True)
class PartOf:
    """The task holds only part of a larger problem set: a shard's slice, or a benchmark's subset."""

    kind: str  # "shard" | "benchmark"
    label: str  # "shard 0/2" | "the packaged aime24"
    held: int  # problems of the whole this run declares
    total: int  # problems of the whole
    detail: str = ""  # e.g. which benchmark problems are missing

    def describe(self) -> str:
        if self.kind == "shard":
            return (f"{self.label} of {self.total} problems ({self.held} in this shard; merge every shard with "
                    "`pr1-eval merge` for the whole task)")
        return self.detail or f"{self.held} of {self.total} problems of {self.label}"


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
    part_of: PartOf | None = None  # the declared problems are only part of the task (shard, benchmark subset)
    no_gold_problems: dict[str, int] = field(default_factory=dict)  # id -> samples without a gold: could not score
    #: id -> samples held (> k): run.json's k was lowered after they were stored (a hand edit). Not
    #: complete: metrics "@k" over more than k samples are not what the record says (issue 48 N11).
    over_problems: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # differences that do not make it incomplete (see module doc)

    @property
    def holds_what_it_declares(self) -> bool:
        """Every declared problem has its k samples and nothing else is stored (a shard's slice can
        hold all it declares and still be only part of the task: see :attr:`complete`)."""
        return (self.declared and not self.n_missing_problems and not self.short_problems
                and not self.undeclared_problems and not self.over_problems)

    @property
    def complete(self) -> bool:
        return self.holds_what_it_declares and self.part_of is None and not self.no_gold_problems

    def describe(self) -> str:
        """One line naming what is missing (empty when complete)."""
        parts = []
        if self.part_of is not None:
            parts.append(self.part_of.describe())
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
        if self.over_problems:
            counts = [f"{pid}: {n}" for pid, n in self.over_problems.items()]
            parts.append(f"{len(counts)} problem(s) hold more than k={self.k} samples ({name_ids(counts, len(counts))}): "
                         "run.json's k disagrees with the stored samples; set k back to the samples generated")
        if self.undeclared_problems:
            parts.append(f"{len(self.undeclared_problems)} stored problem(s) are not in run.json's problem list "
                         f"({name_ids(self.undeclared_problems, len(self.undeclared_problems))})")
        if self.no_gold_problems:
            ids, n = list(self.no_gold_problems), sum(self.no_gold_problems.values())
            parts.append(f"could not score {len(ids)} problem(s), {n} sample(s): no gold answer ({name_ids(ids, len(ids))}); "
                         "left out of the metrics")
        return "; ".join(parts)


@dataclass(frozen=True)
class RunCompleteness:
    """Run status plus one :class:`TaskCompleteness` per task (declared or found in the samples)."""

    status: str | None
    imported: bool
    tasks: dict[str, TaskCompleteness]
    shard: tuple[int, int] | None = None  # (index, count) of a lone ``--shard`` run; None for whole runs
    limit: int | None = None  # run.json's ``limit`` (``--limit N``)
    limited: dict[str, str] = field(default_factory=dict)  # task → "the first 4 of 30 problems": cut by --limit

    @property
    def is_limited(self) -> bool:
        """Some task holds only the first ``--limit`` problems: numbers for testing, not the benchmark's."""
        return bool(self.limited)

    def limit_lines(self) -> list[str]:
        """``aime24: the first 4 of 30 problems (--limit 4)``, one per task cut short by ``--limit``."""
        return [f"{task}: {phrase} (--limit {self.limit})" for task, phrase in self.limited.items()]

    def limit_label(self) -> str | None:
        """``⚠ --limit 4`` for a limited run, else None: the mark tables print beside its name."""
        return f"{LIMIT_MARK} {self.limit}" if self.is_limited else None

    @property
    def status_ok(self) -> bool:
        return self.status == "complete"

    @property
    def interrupted_import(self) -> bool:
        """An import whose run.json still says 'importing': the import was stopped before it ended."""
        return self.imported and self.status == "importing"

    @property
    def is_shard(self) -> bool:
        """One shard of several: never the whole run, whatever its tasks hold."""
        return self.shard is not None and self.shard[1] > 1

    @property
    def complete(self) -> bool:
        return self.status_ok and not self.is_shard and all(t.complete for t in self.tasks.values())

    def shard_label(self) -> str | None:
        """``shard 0/2 of 6 problems`` (every task's problems summed), or None for a whole run."""
        if not self.is_shard or self.shard is None:
            return None
        total = sum(t.part_of.total if t.part_of is not None and t.part_of.kind == "shard" else t.n_problems_expected or 0
                    for t in self.tasks.values())
        return f"shard {self.shard[0]}/{self.shard[1]} of {total} problems"

    def problems(self) -> list[str]:
        """Human lines: the status when it is not ``complete``, a shard's label, then each incomplete task."""
        lines = []
        if self.interrupted_import:
            lines.append("run status is 'importing', not 'complete': the import was stopped before it finished")
        elif not self.status_ok:
            lines.append(f"run status is {self.status!r}, not 'complete' (the run is still going, or it was "
                         "stopped before the end)")
        if self.is_shard:
            lines.append(f"this run is {self.shard_label()}: one slice of a --shard run, not the whole")
        lines += [f"{name}: {t.describe()}" for name, t in self.tasks.items() if not t.complete]
        return lines

    def warnings(self) -> list[str]:
        """Differences that are named but do not make the run incomplete (ids or golds unlike the
        packaged benchmark's, a task name that is no benchmark's); see the module docstring."""
        return [note for t in self.tasks.values() for note in t.notes]

    def advice(self) -> str:
        """How to finish the run: merge a shard; resume a generated run; fix or re-import an imported one."""
        if self.is_shard and self.shard is not None:
            finished = self.status_ok and all(t.holds_what_it_declares for t in self.tasks.values())
            return (("" if finished else "rerun this shard's command to finish it (finished samples are kept), then ")
                    + f"run the other {self.shard[1] - 1} shard(s) of this job array and join them with "
                    "`pr1-eval merge SHARD_RUN... --out NEW_RUN` (a shard alone is not the whole run)")
        if not self.imported:
            return "rerun the run's command to generate what is missing (finished samples are kept)"
        parts = []
        if self.interrupted_import:
            parts.append("run the import again (`pr1-eval import … --replace`; `import-verl` redoes a stopped step "
                         "by itself)")
        uneven = {name: t for name, t in self.tasks.items() if t.short_problems}
        if uneven:
            needs = ", ".join(f"{name} needs {t.k}" for name, t in uneven.items())
            option = ",".join(f"{name}={min(t.short_problems.values())}" for name, t in uneven.items())
            parts.append(f"complete the import file so every problem has its task's k samples ({needs} per problem), "
                         f"or import it again with `--k {option}` (the fewest samples any of its problems has) to "
                         "score that many samples of every problem")
        if any(t.no_gold_problems for t in self.tasks.values()):
            parts.append("give every problem its gold answer (a non-empty string) and import the file again")
        benchmark = [t.part_of for t in self.tasks.values() if t.part_of is not None and t.part_of.kind == "benchmark"]
        if benchmark:
            parts.append(f"import every problem of {', '.join(p.label for p in benchmark)} (or rename the task in "
                         "the import file if it is meant as its own problem set)")
        return "; ".join(parts) or "import the complete file again (every problem with all its samples)"


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


def no_gold_per_problem(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """task → problem id → samples that have no gold (``grade_status='no_gold'``); empty without the column."""
    if frame.empty or "grade_status" not in frame:
        return {}
    return samples_per_problem(frame[frame["grade_status"].astype(str) == NO_GOLD])


def part_of_task(run: RunRecord, task: str) -> tuple[PartOf | None, list[str]]:
    """What whole ``task`` is a part of in ``run`` (a shard's slice, a benchmark's subset), and the
    named differences from the packaged benchmark (see the module docstring)."""
    shard: dict[str, Any] = run.shard or {}
    size = (shard.get("task_sizes") or {}).get(task)
    ids = (shard.get("problem_ids") or {}).get(task)
    entry = run.tasks.get(task)
    held = len(ids) if ids is not None else (entry.n_problems if entry is not None else None)
    if shard and int(shard.get("count") or 1) > 1 and size is not None and held is not None and held < int(size):
        return PartOf("shard", f"shard {shard.get('index')}/{shard.get('count')}", held, int(size)), []
    checks = run.extra.get("benchmark_check")
    check = checks.get(task) if isinstance(checks, dict) else None
    if not isinstance(check, dict):
        return None, []
    notes = warnings_of(task, check)
    phrase = partial_phrase(check)
    if phrase is None:
        return None, notes
    return PartOf("benchmark", f"the packaged {check['benchmark']}", int(check["n_matched"]),
                  int(check["n_problems"]), phrase), notes


def check_task(task: str, declaration: TaskDeclaration | None, held: dict[str, int],
               default_k: int | None = None, needed: Mapping[str, int] | None = None) -> TaskCompleteness:
    """Compare one task's stored counts (``held``: problem id → samples) with its declaration.

    Without a declared k, k is ``default_k`` or else the most samples any problem holds. ``needed``
    (an adaptive run: problem id → samples its rule asks for) replaces k for the problems it names.
    """
    k = (declaration.k if declaration else None) or default_k or max(held.values(), default=0)
    needed = needed or {}
    short = {pid: n for pid, n in held.items() if n < needed.get(pid, k)}
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
    over = {pid: n for pid, n in held.items() if n > k} if declaration.k else {}
    return TaskCompleteness(task, k, True, declaration.n_problems, len(held), missing, n_missing, short, undeclared,
                            over_problems=over)


def check_completeness(run: RunRecord | None, frame: pd.DataFrame,
                       k: int | Mapping[str, int] | None = None,
                       adaptive: Mapping[str, Any] | None = None) -> RunCompleteness:
    """Completeness of a run from its record (``run.json``) and its samples.

    ``run=None`` (samples without a run record, e.g. a test frame) checks only that every
    problem holds k samples (``k`` given, for every task or as a mapping task → k, else the most any
    problem holds) and takes the status as complete. Tasks are listed in ``run.json`` order, then
    tasks found only in the samples. ``adaptive`` (run.json's section, for a caller that checks
    against ``k`` without the record: the leaderboard) makes it an adaptive run's check.
    """
    held = samples_per_problem(frame)
    no_gold = no_gold_per_problem(frame)
    section = run.adaptive if run is not None and run.adaptive else adaptive
    rule = StopRule.from_dict(dict(section)) if section else None
    drawn = section.get("samples_drawn") if section else None
    needed = needed_samples(frame, rule, drawn) if rule is not None else {}
    declarations = declared_tasks(run) if run is not None else {}
    names = list(declarations) + [t for t in held if t not in declarations]
    tasks = {}
    for name in names:
        declaration = declarations.get(name)
        task_k = k.get(name) if isinstance(k, Mapping) else k
        if run is None:
            declaration = TaskDeclaration(task_k, list(held[name]), len(held[name]))
        tasks[name] = check_task(name, declaration, held.get(name, {}), task_k, needed.get(name))
        if no_gold.get(name):
            tasks[name] = dataclasses.replace(tasks[name], no_gold_problems=no_gold[name])
    if run is None:
        return RunCompleteness("complete", False, tasks)
    for name in names:
        part, notes = part_of_task(run, name)
        if part is not None or notes:
            tasks[name] = dataclasses.replace(tasks[name], part_of=part, notes=notes)
    return RunCompleteness(run.status, run.imported, tasks, _shard_of(run), run.limit, limited_tasks(run))


def limited_tasks(run: RunRecord) -> dict[str, str]:
    """Task → how ``--limit`` cut it (see the module docstring); empty for a run without ``limit``."""
    if run.limit is None:
        return {}
    sizes = run.extra.get(LIMIT_SIZES_KEY)
    sizes = sizes if isinstance(sizes, dict) else {}
    shard_sizes = (run.shard or {}).get("task_sizes") or {}  # a shard's slice: the size before sharding
    out = {}
    for name, entry in run.tasks.items():
        held = shard_sizes.get(name, entry.n_problems)
        total = sizes.get(name)
        if isinstance(total, int) and held is not None:
            if held < total:
                out[name] = f"the first {held} of {total} problems"
        elif held is not None and held >= run.limit:
            out[name] = f"the first {held} problems"
    return out


def adaptive_rule(run: RunRecord | None) -> StopRule | None:
    """The stopping rule of an adaptive run (None for a fixed-k run or no record)."""
    return None if run is None or not run.adaptive else StopRule.from_dict(run.adaptive)


def needed_samples(frame: pd.DataFrame, rule: StopRule, drawn: Any = None) -> dict[str, dict[str, int]]:
    """task → problem id → samples the rule asks for, from the verdicts held in sample order.

    A frame without a ``correct`` column (a reader that loaded only the keys) has nothing to replay
    the rule on: the samples the finished run recorded drawing (``drawn``, run.json's
    ``adaptive.samples_drawn``) are taken instead, and without them every problem needs ``max_k``."""
    if frame.empty:
        return {}
    if "correct" not in frame:
        return {str(t): {str(p): int(n) for p, n in problems.items()} for t, problems in (drawn or {}).items()
                if isinstance(problems, dict)}
    ordered = frame.sort_values(["task", "problem_id", "sample_idx"], kind="stable")
    correct = verdicts(ordered["correct"])
    out: dict[str, dict[str, int]] = {}
    keys = list(zip(ordered["task"].astype(str), ordered["problem_id"].astype(str), strict=True))
    start = 0
    while start < len(keys):
        end = start
        while end < len(keys) and keys[end] == keys[start]:
            end += 1
        out.setdefault(keys[start][0], {})[keys[start][1]] = required_samples(correct[start:end], rule)
        start = end
    return out


def _shard_of(run: RunRecord) -> tuple[int, int] | None:
    shard = run.shard or {}
    try:
        return (int(shard["index"]), int(shard["count"])) if shard else None
    except (KeyError, TypeError, ValueError):
        return None


def check_run(run_dir: str | Path) -> RunCompleteness:
    """Completeness of the run stored at ``run_dir`` (reads run.json, the sample keys and grade statuses,
    and the verdicts of an adaptive run)."""
    store = RunStore(run_dir)
    record = store.read_run()
    columns = ["task", "problem_id", "sample_idx", "grade_status"] + (["correct"] if record.adaptive else [])
    keys = store.read_table(columns=columns).to_pandas()
    return check_completeness(record, keys)
