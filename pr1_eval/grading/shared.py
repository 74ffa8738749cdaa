"""The process-wide grading pool behind ``grade_response`` and ``answer_classes``.

Created on first use (so importing the grader starts nothing), closed at interpreter exit, and
recreated in a forked child, which inherits neither the dispatcher thread nor the right to
the parent's workers. Its size is :func:`~pr1_eval.processes.default_workers` of
:data:`~pr1_eval.grading.pool.GRADING_POOL`.
"""

from __future__ import annotations

import atexit
import os
import threading

from pr1_eval.grading.pool import GRADING_POOL, GradingPool
from pr1_eval.processes import configured_workers, default_workers

_shared: GradingPool | None = None
_shared_lock = threading.Lock()
_atexit_registered = False
_warm = True
_max_workers: int | None = None


def shared_pool() -> GradingPool:
    """The process-wide pool (created on first use, closed at exit; recreated after a fork,
    since a forked child inherits neither the dispatcher thread nor the right to the workers)."""
    global _shared, _atexit_registered
    with _shared_lock:
        if _shared is None or _shared.closed or _shared.pid != os.getpid():
            _shared = GradingPool(_size(), warm=_warm)
            if not _atexit_registered:
                atexit.register(close_shared_pool)
                _atexit_registered = True
        return _shared


def use_cold_workers(max_workers: int | None = None) -> None:
    """Have the process-wide pool, when it is created from now on, start its workers without the
    warm-up (:func:`~pr1_eval.grading.worker.warm_up`), and at most ``max_workers`` of them unless
    ``$PR1_EVAL_GRADING_WORKERS`` names a number; a pool already running is left as it is.

    For ``analyze``, whose checks are gold-free path conclusions (numbers, fractions, short
    expressions), not the intervals, sets, matrices and units the warm-up grades: there the
    warm-up cost each worker 1.6 s of CPU to save it 0.3 s on a sweep's checks (5,660 checks of
    two checkpoints, one process: 3.9 s with it, 2.6 s without), CPU taken from the BLEU workers
    it runs beside. Why a cap there: its own workers keep every CPU busy while the checks run,
    so a second grading process buys no parallelism and costs one more import of math-verify
    (about 1.3 s of CPU)."""
    global _warm, _max_workers
    _warm = False
    _max_workers = max_workers


def _size() -> int:
    """The next pool's size: :func:`default_workers`, capped by :func:`use_cold_workers`' limit
    unless the environment names the size."""
    size = default_workers(GRADING_POOL)
    if _max_workers is not None and configured_workers(GRADING_POOL) is None:
        size = max(1, min(size, _max_workers))
    return size


def close_shared_pool() -> None:
    """Close the process-wide pool, if this process started one."""
    global _shared
    with _shared_lock:
        pool, _shared = _shared, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()
