"""How ``analyze`` starts math-verify's grading process: decided as the command begins, before the
analysis stack (pandas, pyarrow, numba) is imported, so this module imports none of it.

Why so early: the grading process is a fresh interpreter that imports math-verify and sympy, about
a second of CPU, and the analysis needs it for its role and consistency checks. While ``analyze``
imports its stack (the first half second of a cold run) one CPU works and the other is idle;
from the moment the analysis' workers are forked every CPU is busy until the end. A grading
process started here imports math-verify on the idle CPU; started later, its import took CPU from
the workers (``docs/performance.md``, "(i57, the idle start)").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pr1_eval.grading.shared import start_worker_early, use_cold_workers

#: Stored bytes (every file at or below the runs named) from which the grading process is started
#: as ``analyze`` begins: a run of about 600 responses, whose path texts fill one chunk of the
#: conclusions' worker (:data:`analysis.pipeline.scheduled.CONCLUDE_CHUNK`), where
#: :func:`analysis.pipeline.scheduled.start_grading_early` would start it anyway. Below it (a demo,
#: a test) the checks may be few or none, and the process is started when one is asked.
EARLY_GRADING_BYTES = 1 << 20


def use_cold_grading_workers() -> None:
    """Have the grading pool that the role and consistency checks use start one worker, without
    the warm-up (:func:`pr1_eval.grading.shared.use_cold_workers`, which says why; ``analyze``
    calls it before its first check). ``$PR1_EVAL_GRADING_WORKERS`` still sets the size."""
    use_cold_workers(max_workers=1)


def start_grading_now(runs: Sequence[str], with_workers: bool) -> bool:
    """Start the grading process now (:func:`pr1_eval.grading.shared.start_worker_early`) when the
    analysis has worker processes (``with_workers``: else nothing runs beside the import) and
    ``runs`` hold at least :data:`EARLY_GRADING_BYTES`; whether it was started. Call
    :func:`use_cold_grading_workers` first: the process is started as the pool would start it."""
    if not with_workers or stored_bytes(runs) < EARLY_GRADING_BYTES:
        return False
    start_worker_early()
    return True


def stored_bytes(runs: Sequence[str], enough: int = EARLY_GRADING_BYTES) -> int:
    """The size of the files at or below ``runs`` (files and folders as given), counted until it
    reaches ``enough`` (a sweep's thousands of files are not all looked at); unreadable ones count 0."""
    total = 0
    for arg in runs:
        path = Path(arg).expanduser()
        if path.is_file():
            total += path.stat().st_size
        for folder, _, names in os.walk(path):
            for name in names:
                try:
                    total += os.stat(os.path.join(folder, name)).st_size
                except OSError:
                    continue
                if total >= enough:
                    return total
    return total
