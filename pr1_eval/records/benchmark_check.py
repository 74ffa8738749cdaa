"""The ``benchmark_check`` section of an imported run's ``run.json``: its verdicts, and what each
verdict says to a reader.

Why here: the check is made at import (:mod:`pr1_eval.ingest.benchmark_check`, which holds the
golds and problem texts it compares) and read by every report of the run afterwards
(:mod:`pr1_eval.report.completeness`). The entry is a record both sides share, so its vocabulary
and its human phrasing live beside the other records, below both the writer and the readers.

An entry is a dict (``run.json`` is JSON): ``verdict`` (one of the four names below), and for a
packaged name ``benchmark``, ``source``, ``data_hash``, ``n_problems``, ``n_matched``,
``missing_ids``, ``foreign_ids``, ``matched_by_text`` and ``gold_differs`` (id -> [ours, packaged]);
for another name ``closest`` (the packaged names it looks like).
"""

from __future__ import annotations

from typing import Any

SHOWN = 5
PARTIAL, WHOLE, DIFFERENT, UNKNOWN = "partial", "whole", "different", "unknown_task"


def _named(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (f" … {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def partial_phrase(check: dict[str, Any]) -> str | None:
    """``25 of 30 problems of the packaged aime24`` for a partial task, else None."""
    if check.get("verdict") != PARTIAL:
        return None
    return (f"{check['n_matched']} of {check['n_problems']} problems of the packaged {check['benchmark']} "
            f"(missing {_named(list(check.get('missing_ids') or []))})")


def warnings_of(task: str, check: dict[str, Any]) -> list[str]:
    """Human lines for what differs from the packaged benchmark (empty when the task is it, or is
    a task of its own whose name is like no benchmark's)."""
    verdict = check.get("verdict")
    if verdict == UNKNOWN:  # a name like no benchmark's is a task of its own: nothing to warn about
        closest = list(check.get("closest") or [])
        if not closest:
            return []
        return [f"{task}: not a packaged benchmark, scored as its own problem set (did you mean "
                f"{' or '.join(closest)}? Rename the task in the import file to compare it with that benchmark)"]
    lines = []
    if verdict == DIFFERENT:
        lines.append(f"{task}: none of its {len(check.get('foreign_ids') or [])} problems is in the packaged "
                     f"{check['benchmark']} (ids {_named(list(check.get('foreign_ids') or []))}; matched by id, by "
                     "problem text, and by index with the same gold): if they are its problems under other ids, add "
                     f"each line's problem text as a \"problem\" field (or use the packaged ids, e.g. "
                     f"{check['benchmark']}-0) and import again; if they are another problem set, rename the task in "
                     f"the import file so it is not read as {check['benchmark']}")
    elif check.get("foreign_ids"):
        foreign = list(check["foreign_ids"])
        lines.append(f"{task}: {len(foreign)} problem id(s) are not in the packaged {check['benchmark']} "
                     f"({_named(foreign)})")
    golds = dict(check.get("gold_differs") or {})
    if golds:
        shown = [f"{pid}: {ours!r} here, {theirs!r} packaged" for pid, (ours, theirs) in list(golds.items())[:SHOWN]]
        more = f" … {len(golds) - SHOWN} more" if len(golds) > SHOWN else ""
        lines.append(f"{task}: {len(golds)} gold answer(s) differ from the packaged {check['benchmark']} "
                     f"({'; '.join(shown)}{more})")
    return lines
