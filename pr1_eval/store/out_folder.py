"""The one rule for a command that writes a new run folder (``import``, ``merge``): never over a run.

Why: without it, ``import FILE --out DIR`` onto a folder that holds a 40-sample fork-join run
would replace it with the 7 imported samples, without a word. Generated runs are protected by
the resume rule (a rerun with other settings is refused); a command that *creates* a run has no
such rule, so it gets this one: a folder that already holds a run (a ``run.json``, or sample parts without one) is
refused, naming the run and suggesting a free folder name. ``--replace`` is the explicit way
over it, and even then nothing is deleted: the old run is renamed beside the new one
(``DIR.replaced-<UTC time>``) and the message says where it went.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.store.run_store import RunStore

ASIDE_SUFFIX = ".replaced-"


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
    if holds_run(out) and not replace:
        how = (f", or add --replace to move the old run aside (renamed to {out.name}{ASIDE_SUFFIX}<time>, not "
               "deleted)" if offers_replace else "")
        raise Pr1EvalError(f"--out {out} already holds {describe_run(out)}; {command} never writes over a run. "
                           f"Pass a new folder (e.g. --out {free_name(out)}){how}")


def set_aside(out: str | Path) -> Path | None:
    """Rename the run at ``out`` to ``out.replaced-<UTC time>`` (never delete it); returns the new
    path, or None when ``out`` holds no run."""
    out = Path(out).resolve()  # "." has no name to suffix
    if not holds_run(out):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = out.with_name(f"{out.name}{ASIDE_SUFFIX}{stamp}")
    n = 2
    while aside.exists():
        aside = out.with_name(f"{out.name}{ASIDE_SUFFIX}{stamp}-{n}")
        n += 1
    os.replace(out, aside)
    return aside
