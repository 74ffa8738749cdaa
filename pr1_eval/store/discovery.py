"""Which folders are runs: the one rule every command that takes "runs or folders of runs" uses.

A run is a folder holding ``run.json``. Below a root, runs are found at any depth, because the
layouts pr1-eval itself writes nest to different depths: ``runs/RUN`` (``run``), ``runs/STEP``
under a sweep's ``--out-root``, ``RUNS_ROOT/train/step-N`` and ``RUNS_ROOT/val/step-N``
(``import-verl``), so a folder holding several jobs puts runs three levels down. A fixed depth
would hide some of them from ``analyze`` and from ``report``'s "did you mean" alike.

The walk does not descend into a run (what lies inside a run folder is the run's own files, its
``samples.parquet`` parts among them, which can be thousands) and does not follow symbolic links
to folders (a link back up would loop; a linked run is found where it really lives, or named
directly). A folder holding ``samples.parquet`` but no ``run.json`` is an orphan: samples with no
record of how they were made, reported by the callers instead of silently skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pr1_eval.store.run_store import RUN_JSON, SAMPLES_DIR


@dataclass(frozen=True)
class FoundRuns:
    """What :func:`scan_runs` found below one root, each list in sorted path order."""

    runs: list[Path] = field(default_factory=list)
    orphans: list[Path] = field(default_factory=list)  # folders with samples.parquet and no run.json


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a run (it holds run.json)."""
    return (folder / RUN_JSON).is_file()


def scan_runs(root: str | Path) -> FoundRuns:
    """The runs at or below ``root`` (``root`` itself when it is one), and the orphans (see the module docstring)."""
    root = Path(root)
    runs: list[Path] = []
    orphans: list[Path] = []
    pending = [root] if root.is_dir() else []
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # unreadable or vanished while walking: nothing in it can be read as a run
            continue
        names = {entry.name for entry in entries}
        if RUN_JSON in names and is_run(folder):
            runs.append(folder)
            continue
        if SAMPLES_DIR in names:
            orphans.append(folder)
        pending += [folder / entry.name for entry in entries
                    if entry.name != SAMPLES_DIR and entry.is_dir(follow_symlinks=False)]
    return FoundRuns(runs=sorted(runs), orphans=sorted(orphans))


def find_runs(root: str | Path) -> list[Path]:
    """The runs at or below ``root``, in sorted path order (see the module docstring for the rule)."""
    return scan_runs(root).runs
