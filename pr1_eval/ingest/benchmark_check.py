"""An import under a packaged benchmark's name is compared with that benchmark, once, at import.

Why: unchecked, an import named ``aime24`` holding 25 of the 30 AIME 2024 problems would report
(and rank on the leaderboard) as if it were AIME 2024, and an import named ``aime2024`` would sit
beside ``aime24`` in every table as a seventh benchmark. Each imported task is therefore checked:

- **a packaged name** (``aime24``, ``aime25``, ``amc23``, ``math500``, ``math300_pr1``,
  ``gsm8k``): its problems are matched with the packaged benchmark's by problem id, by
  problem text for an id the benchmark does not have (another id scheme, same problems), and,
  for index ids (``0``, ``1``, … or ``aime24_3``) without text, by position when the gold
  agrees: the problem at that index of the benchmark has the same gold (accepted only when at
  least :data:`INDEX_AGREEMENT` of the index ids agree, so a different problem set numbered 0..n
  whose golds happen to coincide once or twice is not taken for the benchmark). A task
  holding only some of the benchmark's problems is **partial**: the report marks it incomplete
  ("25 of 30 problems of the packaged aime24"), so no surface averages it as the benchmark. Ids
  the benchmark does not have and golds that differ from the benchmark's are named. A task that
  shares no problem with the benchmark at all is a different problem set that happens to use the
  name: it is named as such (a warning, not an incompleteness: there is no part of the benchmark
  it could be a part of), with the advice to rename it.
- **any other name**: a warning naming the closest packaged names (``difflib``), since a typo
  (``aime2024``) otherwise becomes a new benchmark silently.

Decision — where the check lives: at import time, recorded into ``run.json``
(``benchmark_check``, one entry per task, its shape and phrasing in
:mod:`pr1_eval.records.benchmark_check`), and read from there by :mod:`pr1_eval.report.completeness`. The check needs each problem's gold and text, which only the
import holds in hand (every aggregator reads run.json and the sample keys, not the golds), and the
benchmark it compares with is the one packaged with the pr1-eval that imported: recording its
data hash with the verdict keeps the verdict stable when a later version updates the data. A run
whose ``run.json`` has no such section is not checked; importing its file again checks it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pr1_eval.inputs.tasks import TASKS, load_task
from pr1_eval.records.benchmark_check import DIFFERENT, PARTIAL, UNKNOWN, WHOLE
from pr1_eval.records.sample import SampleRecord

#: Share of a task's index ids whose gold must equal the packaged problem's at that index for the
#: ids to be read as positions in the benchmark.
INDEX_AGREEMENT = 0.8
_INDEX = re.compile(r"(?:^|[^0-9])([0-9]+)$")


@dataclass(frozen=True)
class ImportedProblem:
    problem_id: str
    gold: str
    problem: str


def _normal_text(text: str) -> str:
    return " ".join(str(text).split())


def same_gold(ours: str, theirs: str) -> bool:
    """Equal after whitespace is collapsed, or the same number written in ASCII (``"204"`` and
    ``"204.0"``). Why ASCII only: ``float`` reads full-width and other Unicode digits, so ``"２０４"``
    agreed with ``"204"`` here while the grader scored ``204`` against it as wrong (mean@4 0.875 →
    0.375, no warning); such a gold now differs, and the import warns."""
    a, b = _normal_text(ours), _normal_text(theirs)
    if a == b:
        return True
    if not (a.isascii() and b.isascii()):
        return False
    try:
        x, y = float(a.replace(",", "")), float(b.replace(",", ""))
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=0, abs_tol=1e-12)


def closest_names(name: str, known: Iterable[str]) -> list[str]:
    """Registered task names that look like ``name`` (``aime2024`` → ``aime24``)."""
    by_lower = {k.lower(): k for k in known}
    return [by_lower[k] for k in difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)]


def problems_of(records: Iterable[SampleRecord]) -> dict[str, dict[str, ImportedProblem]]:
    """task → problem id → (id, gold, problem text), first sample of each problem."""
    out: dict[str, dict[str, ImportedProblem]] = {}
    for r in records:
        out.setdefault(r.task, {}).setdefault(r.problem_id, ImportedProblem(r.problem_id, r.gold or "", r.problem or ""))
    return out


def check_task(name: str, problems: dict[str, ImportedProblem]) -> dict[str, Any]:
    """The ``run.json`` entry of one imported task (see the module docstring)."""
    if name not in TASKS:
        return {"verdict": UNKNOWN, "closest": closest_names(name, TASKS)}
    packaged = load_task(name, source="packaged")
    by_id = {p.problem_id: p for p in packaged.problems}
    by_text = {_normal_text(p.problem): p for p in packaged.problems}
    matched: dict[str, str] = {}  # our id -> packaged id
    for pid, ours in problems.items():
        twin = by_id.get(pid) or (by_text.get(_normal_text(ours.problem)) if ours.problem.strip() else None)
        if twin is not None:
            matched[pid] = twin.problem_id
    matched.update(_by_index({p: q for p, q in problems.items() if p not in matched}, packaged.problems))
    golds = {pid: [problems[pid].gold, by_id[theirs].gold] for pid, theirs in matched.items()
             if not same_gold(problems[pid].gold, by_id[theirs].gold)}
    covered = set(matched.values())
    verdict = DIFFERENT if not matched else WHOLE if len(covered) == len(by_id) else PARTIAL
    return {"verdict": verdict, "benchmark": name, "source": packaged.source, "data_hash": packaged.data_hash,
            "n_problems": len(by_id), "n_matched": len(covered),
            "missing_ids": [pid for pid in by_id if pid not in covered],
            "foreign_ids": [pid for pid in problems if pid not in matched],
            "matched_by_text": {pid: theirs for pid, theirs in matched.items() if pid != theirs},
            "gold_differs": golds}


def _by_index(problems: dict[str, ImportedProblem], packaged: list[Any]) -> dict[str, str]:
    """Index ids read as positions in the packaged benchmark, when enough golds agree (module docstring)."""
    indexed = {pid: int(m[1]) for pid in problems if (m := _INDEX.search(pid)) and int(m[1]) < len(packaged)}
    agree = {pid: packaged[i].problem_id for pid, i in indexed.items()
             if same_gold(problems[pid].gold, packaged[i].gold)}
    if not indexed or len(agree) < INDEX_AGREEMENT * len(indexed) or len(set(agree.values())) < len(agree):
        return {}
    return agree


def check_import(records: Iterable[SampleRecord]) -> dict[str, dict[str, Any]]:
    """task → its check, for every task of an import (recorded as ``run.json``'s ``benchmark_check``)."""
    return {name: check_task(name, problems) for name, problems in problems_of(records).items()}


def note_of(task: str, check: dict[str, Any]) -> str | None:
    """The import's note for a task name like no benchmark's (not repeated by every report)."""
    if check.get("verdict") != UNKNOWN or check.get("closest"):
        return None
    return f"{task}: not a packaged benchmark ({', '.join(TASKS)}), scored as its own problem set"
