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

Kept-aside copies are never found: the hidden ``.replaced`` folders that ``import --replace``,
``import-verl`` and repro's rollout writer move a replaced run into, and the folders older
versions left beside it (``NAME.replaced-<UTC time>``, ``ROOT.superseded``). A user who lists a
folder sees the runs that count, so every aggregator counts only those; a replaced copy is still
readable by naming it directly (``report`` then says it was replaced).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pr1_eval.store.run_store import RUN_JSON, SAMPLES_DIR

_KEPT_ASIDE = re.compile(r"^\.replaced$|\.replaced-\d{8}T\d{6}Z(-\d+)?$|\.superseded$")


def kept_aside(name: str) -> bool:
    """A folder name that holds (or is) a replaced run's kept copy: never searched (module docstring)."""
    return _KEPT_ASIDE.search(name) is not None


@dataclass(frozen=True)
class FoundRuns:
    """What :func:`scan_runs` found below one root, each list in sorted path order."""

    runs: list[Path] = field(default_factory=list)
    orphans: list[Path] = field(default_factory=list)  # folders with samples.parquet and no run.json
    aside: list[Path] = field(default_factory=list)  # kept-aside folders skipped (their runs are not counted)


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a run (it holds run.json)."""
    return (folder / RUN_JSON).is_file()


def scan_runs(root: str | Path, *, skip_aside: bool = True) -> FoundRuns:
    """The runs at or below ``root`` (``root`` itself when it is one), and the orphans (see the module
    docstring). ``skip_aside=False`` finds kept-aside copies too (only to name them, never to count them)."""
    root = Path(root)
    runs: list[Path] = []
    orphans: list[Path] = []
    aside: list[Path] = []
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
        for entry in entries:
            if entry.name == SAMPLES_DIR or not entry.is_dir(follow_symlinks=False):
                continue
            if skip_aside and kept_aside(entry.name):
                aside.append(folder / entry.name)
            else:
                pending.append(folder / entry.name)
    return FoundRuns(runs=sorted(runs), orphans=sorted(orphans), aside=sorted(aside))


def aside_runs(root: str | Path) -> list[Path]:
    """The kept-aside runs below ``root`` (replaced or superseded copies), which no search counts."""
    return sorted(run for folder in scan_runs(root).aside for run in scan_runs(folder, skip_aside=False).runs)


def find_runs(root: str | Path) -> list[Path]:
    """The runs at or below ``root``, in sorted path order (see the module docstring for the rule)."""
    return scan_runs(root).runs
