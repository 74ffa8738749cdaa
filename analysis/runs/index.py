"""Run folders as the analysis finds and reads them: each fact about a run read once per load.

:func:`discover_runs` finds the run folders named or found under roots; each becomes a
:class:`RunEntry`, which reads its file signature (the key of every cache of what is derived from
the run) and its ``run.json`` the first time they are asked for and keeps them. Before, one load
stat'ed a run's files three times (the block cache's lookup, the parse that fills it, the block
counts) and read its ``run.json`` twice; now each happens once, and every step of the load sees
the same state of the run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

from pr1_eval.records.run import RunRecord
from pr1_eval.store.discovery import scan_runs
from pr1_eval.store.run_store import RUN_JSON, SAMPLES_DIR, RunChanged, RunStore

#: (name, size, mtime_ns, inode) of run.json and of every samples part.
Signature = tuple[tuple[str, int, int, int], ...]


class RunEntry:
    """One run folder: its store, and its signature and record read once, when first asked for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = RunStore(path)

    @cached_property
    def signature(self) -> Signature:
        """:func:`run_signature` of the run, as it was when first asked for."""
        return run_signature(self.path)

    @cached_property
    def record(self) -> RunRecord:
        """The run's ``run.json`` (raises as :meth:`RunStore.read_run` does when it cannot be read)."""
        return self.store.read_run()

    def __repr__(self) -> str:
        return f"RunEntry({str(self.path)!r})"


def discover_runs(paths_or_roots: Iterable[str | Path] | str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Run directories named directly or found under roots (at any depth, by
    :func:`pr1_eval.store.discovery.scan_runs`'s rule), each root's in sorted order."""
    items = [paths_or_roots] if isinstance(paths_or_roots, (str, Path)) else list(paths_or_roots)
    found: list[Path] = []
    failures: list[tuple[str, str]] = []
    for item in items:
        path = Path(item).expanduser()
        if not path.exists():
            failures.append((str(item), "does not exist"))
        elif (path / RUN_JSON).is_file():
            found.append(path.resolve())
        elif path.is_dir():
            scan = scan_runs(path)
            failures.extend((str(o), f"has {SAMPLES_DIR} but no {RUN_JSON}") for o in scan.orphans)
            if not scan.runs and not scan.orphans:
                failures.append((str(item), f"no run found: no {RUN_JSON} in it or below it"))
            found.extend(run.resolve() for run in scan.runs)
        else:
            failures.append((str(item), f"not a run directory (expected a folder with {RUN_JSON})"))
    unique = list(dict.fromkeys(found))
    return unique, failures


def run_signature(run_dir: str | Path) -> Signature:
    """(name, size, mtime_ns, inode) of run.json and of every samples part: it changes whenever
    the run is appended to, regraded or rewritten, so caches keyed on it never serve stale data."""
    store = RunStore(run_dir)
    for _ in range(40):  # a part moved away under us (a rewrite's swap): list again
        try:
            files = [store.run_json_path] if store.run_json_path.is_file() else []
            signature = []
            for path in files + store.part_paths():
                stat = path.stat()
                signature.append((path.name, stat.st_size, stat.st_mtime_ns, stat.st_ino))
            return tuple(signature)
        except (FileNotFoundError, RunChanged):
            time.sleep(0.05)
    raise RunChanged(Path(run_dir))


def runs_signature(paths_or_roots: Iterable[str | Path] | str | Path) -> tuple[Any, ...]:
    """The runs found under ``paths_or_roots`` with their :func:`run_signature`: a cache key for
    everything loaded from them (the dashboard keys its in-memory cache on it)."""
    run_dirs, failures = discover_runs(paths_or_roots)
    return tuple((str(d), run_signature(d)) for d in run_dirs) + tuple(failures)
