"""The process-wide grading pool behind ``grade_response`` and ``answer_classes``.

Created on first use (so importing the grader starts nothing), closed at interpreter exit, and
recreated in a forked child, which inherits neither the dispatcher thread nor the right to
the parent's workers. Its size is :func:`~pr1_eval.grading.pool.default_workers`.
"""

from __future__ import annotations

import atexit
import os
import threading

from pr1_eval.grading.pool import GradingPool, default_workers

_shared: GradingPool | None = None
_shared_lock = threading.Lock()
_atexit_registered = False
_warm = True


def shared_pool() -> GradingPool:
    """The process-wide pool (created on first use, closed at exit; recreated after a fork,
    since a forked child inherits neither the dispatcher thread nor the right to the workers)."""
    global _shared, _atexit_registered
    with _shared_lock:
        if _shared is None or _shared.closed or _shared.pid != os.getpid():
            _shared = GradingPool(default_workers(), warm=_warm)
            if not _atexit_registered:
                atexit.register(close_shared_pool)
                _atexit_registered = True
        return _shared


def use_cold_workers() -> None:
    """Have the process-wide pool, when it is created from now on, start its workers without the
    warm-up (:func:`~pr1_eval.grading.worker.warm_up`); a pool already running is left as it is.

    For ``analyze``, whose checks are gold-free path conclusions (numbers, fractions, short
    expressions), not the intervals, sets, matrices and units the warm-up grades: there the
    warm-up cost each worker 1.6 s of CPU to save it 0.3 s on a sweep's checks (5,660 checks of
    two checkpoints, one process: 3.9 s with it, 2.6 s without), CPU taken from the BLEU workers
    it runs beside."""
    global _warm
    _warm = False


def close_shared_pool() -> None:
    """Close the process-wide pool, if this process started one."""
    global _shared
    with _shared_lock:
        pool, _shared = _shared, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()
