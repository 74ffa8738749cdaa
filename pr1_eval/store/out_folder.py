"""The one rule for a command that writes a new run folder (``import``, ``merge``): never over a run.

Why: without it, ``import FILE --out DIR`` onto a folder that holds a 40-sample fork-join run
would replace it with the 7 imported samples, without a word. Generated runs are protected by
the resume rule (a rerun with other settings is refused); a command that *creates* a run has no
such rule, so it gets this one: a folder that already holds a run (a ``run.json``, or sample parts without one) is
refused, naming the run and suggesting a free folder name. So is a folder that holds runs below
it (a run root): a run written there would hide every run under it from every search.
``--replace`` is the explicit way over a run, and even then nothing is deleted: the old run is
moved into the hidden ``.replaced`` folder beside it (``PARENT/.replaced/DIR.replaced-<UTC time>``),
where run discovery never looks (:mod:`pr1_eval.store.discovery`), so no report, leaderboard or
analysis counts it next to its replacement; both run records say when, and where the other is.

These checks are only sound under the run's writer lock (:mod:`pr1_eval.store.run_lock`), which
every caller holds from the check to the end of its write.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.provenance import now_iso
from pr1_eval.store.discovery import find_runs, kept_aside
from pr1_eval.store.run_store import RunStore

ASIDE_SUFFIX = ".replaced-"
ASIDE_DIR = ".replaced"  # beside a replaced run; discovery skips it


def holds_run(out: Path) -> bool:
    """A run lives here: ``run.json``, or sample parts of one whose ``run.json`` is gone."""
    store = RunStore(out)
    return store.exists() or bool(store.part_paths())


def free_name(out: Path) -> Path:
    """The first of ``DIR-2``, ``DIR-3`` … that does not exist: a concrete suggestion for ``--out``."""
    n = 2
    while (candidate := out.with_name(f"{out.name}-{n}")).exists():
        n += 1
    return candidate


def describe_run(out: Path) -> str:
    """``a run (status complete, 40 samples, tasks aime24)``, or a plainer phrase when unreadable."""
    store = RunStore(out)
    try:
        record = store.read_run()
        samples = store.read_table(columns=["task"]).num_rows
    except Pr1EvalError:
        return "a run (or the remains of one)"
    tasks = ", ".join(record.tasks) or "none declared"
    return f"a run (status {record.status}, {samples} samples, tasks {tasks})"


def check_new_run_folder(out: str | Path, *, command: str, replace: bool = False, offers_replace: bool = True) -> None:
    """Refuse ``out`` when it holds a run (unless ``replace``) or is a file; say how to pick another.

    ``offers_replace``: the command has ``--replace`` (``import``), so the message names it."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise Pr1EvalError(f"--out {out} is a file; pass a folder for the run")
    if holds_run(out):
        if replace:
            return
        how = (f", or add --replace to move the old run aside (into {out.parent / ASIDE_DIR}, not deleted)"
               if offers_replace else "")
        raise Pr1EvalError(f"--out {out} already holds {describe_run(out)}; {command} never writes over a run. "
                           f"Pass a new folder (e.g. --out {free_name(out)}){how}")
    if out.is_dir() and (below := find_runs(out)):
        named = ", ".join(str(run.relative_to(out)) for run in below[:5]) + (
            f" and {len(below) - 5} more" if len(below) > 5 else "")
        raise Pr1EvalError(f"--out {out} holds {len(below)} run(s) below it ({named}); a run written there would "
                           f"hide them from every search. Pass a new folder for the run (e.g. --out {out / 'new-run'})")


def aside_path(folder: Path, name: str) -> Path:
    """``FOLDER/NAME.replaced-<UTC time>`` (``-2``, ``-3`` … when taken), for a run moved aside."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside, n = folder / f"{name}{ASIDE_SUFFIX}{stamp}", 2
    while aside.exists():
        aside, n = folder / f"{name}{ASIDE_SUFFIX}{stamp}-{n}", n + 1
    return aside


def move_aside(out: Path, aside: Path, by: str | None = None) -> Path:
    """Move the run at ``out`` to ``aside`` (a name discovery skips) and stamp its record
    ``replaced`` (on, from, by), which ``report`` prints. Never deletes anything."""
    aside.parent.mkdir(parents=True, exist_ok=True)
    os.replace(out, aside)
    store = RunStore(aside)
    try:
        record = store.read_run()
    except Pr1EvalError:  # the remains of a run: moved all the same, nothing to stamp
        return aside
    store.write_run(record.with_sections({"replaced": {"on": now_iso(), "from": str(out), "by": by or str(out)}}))
    return aside


def set_aside(out: str | Path, by: str | None = None) -> Path | None:
    """Move the run at ``out`` into ``PARENT/.replaced/NAME.replaced-<UTC time>``, where discovery
    never finds it (:func:`move_aside`). Returns the new path, or None when ``out`` holds no run.
    ``by``: what replaces it (default: a new run at ``out``)."""
    out = Path(out).resolve()  # "." has no name to suffix
    if not holds_run(out):
        return None
    return move_aside(out, aside_path(out.parent / ASIDE_DIR, out.name), by)


def _when(on: object) -> str:
    """``2026-12-03, at 18:05:00 UTC`` from an ISO time."""
    day, _, clock = str(on or "?").partition("T")
    return f"{day}, at {clock.replace('+00:00', ' UTC') or '?'}"


def replaced_note(extra: dict[str, object], run_dir: str | Path | None = None) -> str | None:
    """What a run record says about a replacement: for a run moved aside (``replaced``) "replaced
    on DAY, at TIME by …", for the run that took its place (``replaces``) where the old one is
    kept; None for any other run. ``run_dir``: where the run sits now. A replaced copy that was
    restored (moved or copied out of ``.replaced/``, see docs/guides/run-safety.md) is counted by
    every search again, and its note says so instead of "kept where no search finds it"."""
    old, new = extra.get("replaced"), extra.get("replaces")
    if isinstance(old, dict):
        replaced = f"replaced on {_when(old.get('on'))} by the run in {old.get('by')}"
        if run_dir is not None and not is_aside(run_dir):
            return (f"{replaced}; this copy was restored to {run_dir}, outside .replaced/, so a report, leaderboard "
                    "or analysis of a folder above it counts it again (beside that run, if it is still there)")
        return f"{replaced}; this copy is kept where no search finds it (no report, leaderboard or analysis of a " \
               "folder counts it)"
    if isinstance(new, dict):
        return f"replaces a run (replaced on {_when(new.get('on'))}), kept at {new.get('kept_at')}"
    return None


def is_aside(run_dir: str | Path) -> bool:
    """Whether the run at ``run_dir`` sits in a kept-aside folder (``.replaced/…``, ``*.superseded``),
    where no search finds it: the rule :func:`pr1_eval.store.discovery.kept_aside` applies to a
    name, checked here on the run's folder and every folder above it."""
    path = Path(run_dir).expanduser().absolute()
    return any(kept_aside(part.name) for part in (path, *path.parents))
