"""``leaderboard`` on a folder of runs that are not all comparable: one leaderboard per comparable group.

Why: the README's first-hour command ``pr1-eval leaderboard runs/ --html leaderboard.html`` meets a folder
of runs on different tasks, ``--limit`` slices and k. One ranking of them all would compare numbers on
different problems, so :func:`analysis.leaderboard.board.compute_leaderboard` refuses; and ``--intersect`` cuts
every run to what *all* share, which on such a folder is often nothing. So the command (without
``--intersect``) falls back to this: the runs are split into groups that the leaderboard's own rule
(:func:`analysis.leaderboard.board._differences`: same tasks, problem ids, k, data hash; one answer policy)
finds comparable, each group ranked as a full leaderboard document; a run that nothing compares with is
listed with its own numbers and the first difference from the run closest to it (the one sharing most
tasks); a group that cannot be ranked (every run incomplete) is listed with the reason.

Alternative refused: one table per task across all runs. A run's average and the paired tests need
the same problems on every compared task, so a group of runs with identical task sets keeps every
table a real leaderboard; the per-task view is the per-task table inside each group.

The document (``leaderboard --json`` when grouped; each ``leaderboard`` is the ordinary document)::

    {"schema_version", "grouped": true, "reason", "intersect_helps",
     "groups": [{"title", "runs": [names], "leaderboard": {...}}],
     "alone": [{"name", "path", "why", "leaderboard": {...}}],
     "not_ranked": [{"runs": [names], "reason"}], "notes", "failures"}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.leaderboard.board import (
    LEADERBOARD_COLUMNS,
    Leaderboard,
    RunMeta,
    _differences,
    _intersect_helps,
    _problem_sets,
    _resolve_baseline,
    _run_metas,
    _tasks_in_order,
    compute_leaderboard,
    policy_differences,
)
from analysis.leaderboard.schema import SCHEMA_VERSION
from analysis.runs.loader import LoadedRuns, load_runs
from pr1_eval.errors import Pr1EvalError


@dataclass
class Group:
    """Comparable runs ranked together (``alone``: a group of one, with ``why`` nothing compares)."""

    title: str
    runs: list[str]
    board: Leaderboard
    why: str | None = None


@dataclass
class GroupedLeaderboard:
    """:attr:`document` is the grouped ``--json`` document; :attr:`groups` keep each group's board (for HTML)."""

    document: dict[str, Any]
    groups: list[Group]


def _subset(loaded: LoadedRuns, names: Sequence[str]) -> LoadedRuns:
    """The loaded runs cut to ``names`` (the leaderboard reads each group as if only it were given)."""
    keep = set(names)
    return LoadedRuns(samples=loaded.samples[loaded.samples["run"].isin(keep)].reset_index(drop=True),
                      blocks=loaded.blocks.iloc[0:0], notes=list(loaded.notes),
                      run_info={n: i for n, i in loaded.run_info.items() if n in keep},
                      completeness={n: c for n, c in loaded.completeness.items() if n in keep})


def partition(metas: list[RunMeta], sets: dict[tuple[str, str], set[str]]) -> list[list[RunMeta]]:
    """Runs in groups the leaderboard finds comparable, in order of first appearance: a run joins the
    first group whose first run it does not differ from (tasks, problems, k, data hash, policy)."""
    groups: list[list[RunMeta]] = []
    for meta in metas:
        for group in groups:
            head = group[0]
            tasks = list(dict.fromkeys([*head.task_k, *meta.task_k]))
            if not policy_differences([meta], head) and not _differences([meta], head, sets, tasks):
                group.append(meta)
                break
        else:
            groups.append([meta])
    return groups


def why_alone(meta: RunMeta, metas: list[RunMeta], sets: dict[tuple[str, str], set[str]]) -> str:
    """Why nothing compares with ``meta``: the first difference from the run sharing most tasks with it."""
    others = [m for m in metas if m.name != meta.name]
    if not others:
        return "the only run given"
    closest = max(others, key=lambda m: len(set(m.task_k) & set(meta.task_k)))
    shared = [t for t in meta.task_k if t in closest.task_k]
    if not shared:
        return "shares no task with any other run"
    found = [*policy_differences([meta], closest), *_differences([meta], closest, sets, shared),
             *_differences([meta], closest, sets, list(dict.fromkeys([*meta.task_k, *closest.task_k])))]
    return f"closest run {closest.name}: {found[0]}" if found else f"closest run {closest.name} differs"


def title_of(meta: RunMeta, sets: dict[tuple[str, str], set[str]]) -> str:
    """What a group was scored on: each task with its problem count, and k."""
    tasks = ", ".join(f"{t} ({len(sets.get((meta.name, t), ()))} problems)" for t in meta.task_k)
    return f"{tasks}; k={meta.k if meta.k is not None else 'per task'}"


def compute_groups(runs: Iterable[str | Path] | str | Path | LoadedRuns, baseline: str | None = None,
                   tasks: Sequence[str] | None = None, average: str = "task_mean",
                   include_incomplete: bool = False) -> GroupedLeaderboard:
    """One leaderboard per group of comparable runs (see the module docstring)."""
    loaded = runs if isinstance(runs, LoadedRuns) else load_runs(runs, tokenizer=None, columns=LEADERBOARD_COLUMNS,
                                                                 blocks=False)
    if loaded.samples.empty:
        reasons = "; ".join(f"{p}: {r}" for p, r in loaded.failures) or "nothing given"
        raise Pr1EvalError(f"no run could be loaded ({reasons})")
    samples = loaded.samples
    if tasks:
        samples = samples[samples["task"].isin(list(tasks))]
    metas, _ = _run_metas(LoadedRuns(samples=samples, blocks=loaded.blocks.iloc[0:0], run_info=loaded.run_info))
    sets = _problem_sets(samples)
    if baseline is not None:
        _resolve_baseline(metas, baseline)  # an unknown baseline is refused by name, as ungrouped
    groups: list[Group] = []
    held = {m.name for m in metas}
    not_ranked: list[dict[str, Any]] = [{"runs": [name], "reason": f"holds none of the tasks asked for (--tasks "
                                         f"{','.join(tasks or [])})"}
                                        for name in dict.fromkeys(loaded.samples["run"].astype(str)) if name not in held]
    for members in partition(metas, sets):
        names = [m.name for m in members]
        wanted = baseline if baseline is not None and _holds(members, baseline) else None
        try:
            board = compute_leaderboard(_subset(loaded, names), baseline=wanted, tasks=_tasks_of(members, tasks),
                                        average=average,
                                        include_incomplete=include_incomplete)
        except Pr1EvalError as exc:
            not_ranked.append({"runs": names, "reason": str(exc)})
            continue
        why = why_alone(members[0], metas, sets) if len(members) == 1 else None
        groups.append(Group(title=title_of(members[0], sets), runs=names, board=board, why=why))
    groups.sort(key=lambda g: (g.why is not None, -len(g.runs)))  # ranked groups first, largest first
    helps = _intersect_helps(metas, sets, _tasks_in_order(samples))
    reason = (f"the {len(metas)} runs are not all comparable (they differ in tasks, problems, k, data or answer "
              f"policy), so each group of comparable runs is ranked apart"
              + (f"; --intersect ranks all {len(metas)} on the problems they all share" if helps else
                 "; no task and problems are shared by all, so --intersect cannot rank them together"))
    document = {
        "schema_version": SCHEMA_VERSION, "grouped": True, "reason": reason, "intersect_helps": helps,
        "groups": [{"title": g.title, "runs": g.runs, "leaderboard": g.board.document} for g in groups if g.why is None],
        "alone": [{"name": g.runs[0], "path": g.board.document["runs"][0]["path"], "why": g.why,
                   "leaderboard": g.board.document} for g in groups if g.why is not None],
        "not_ranked": not_ranked,
        "notes": [n for n in loaded.notes if "no tokenizer" not in n],
        "failures": [{"path": p, "reason": r} for p, r in loaded.failures],
    }
    return GroupedLeaderboard(document=document, groups=groups)


def _holds(members: list[RunMeta], wanted: str) -> bool:
    resolved = str(Path(wanted).expanduser().resolve())
    return any(wanted in (m.name, m.path) or resolved == m.path for m in members)


def _tasks_of(members: list[RunMeta], tasks: Sequence[str] | None) -> list[str] | None:
    """The asked-for tasks (``--tasks``) this group holds (None: all of its own)."""
    return None if not tasks else [t for t in tasks if t in members[0].task_k]
