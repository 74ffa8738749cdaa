"""The process-wide grading pool behind ``grade_response`` and ``answer_classes``.

Created on first use (so importing the grader starts nothing), closed at interpreter exit, and
recreated in a forked child, which inherits neither the dispatcher thread nor the right to
the parent's workers. Its size is :func:`~pr1_eval.processes.default_workers` of
:data:`~pr1_eval.grading.pool.GRADING_POOL`.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import threading
from multiprocessing.connection import Connection

from pr1_eval.grading.pool import GRADING_POOL, GradingPool
from pr1_eval.grading.verify import TEST_HOOKS_ENV
from pr1_eval.grading.worker import start_worker, stop_worker
from pr1_eval.processes import configured_workers, default_workers

_shared: GradingPool | None = None
_shared_lock = threading.Lock()
_atexit_registered = False
_warm = True
_max_workers: int | None = None
#: A worker started by :func:`start_worker_early`, for the next pool to adopt.
_early: list[tuple[subprocess.Popen[bytes], Connection]] = []


def shared_pool() -> GradingPool:
    """The process-wide pool (created on first use, closed at exit; recreated after a fork,
    since a forked child inherits neither the dispatcher thread nor the right to the workers)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed or _shared.pid != os.getpid():
            adopted = [_early.pop()] if _early else []
            _shared = GradingPool(_size(), warm=_warm, adopt=adopted)
            _close_at_exit()
        return _shared


def _close_at_exit() -> None:
    """Register :func:`close_shared_pool` with ``atexit``, once (called with the lock held)."""
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(close_shared_pool)
        _atexit_registered = True


def start_worker_early() -> None:
    """Start the pool's first worker process now, before the pool exists; the pool made next
    (:func:`shared_pool`) adopts it, ready or still starting.

    For a caller that knows checks will come and has a CPU idle now: ``analyze`` calls it as it
    begins, while its own process imports the analysis stack on one CPU, so the worker's import of
    math-verify (about a second of CPU) runs on the other instead of beside the analysis' workers.
    Why not the pool itself: a pool starts its dispatcher thread, and ``analyze`` forks its
    workers after this (a process must not fork while a thread of it may hold a lock); this starts
    a process and no thread. A forked child closes its copy of the worker's socket
    (:func:`_forget_early`); a worker no pool adopted is stopped at exit. Nothing happens when the
    pool already runs or a worker was started early already."""
    with _shared_lock:
        if _early or (_shared is not None and not _shared.closed and _shared.pid == os.getpid()):
            return
        _early.append(start_worker(os.environ.get(TEST_HOOKS_ENV) == "1", _warm))
        _close_at_exit()


def _forget_early() -> None:
    """In a forked child: drop the parent's early worker, closing this process's copy of its socket
    (the worker is the parent's to adopt or stop)."""
    while _early:
        _, conn = _early.pop()
        conn.close()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere nothing forks
    os.register_at_fork(after_in_child=_forget_early)


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
    """Close the process-wide pool, if this process started one, and stop a worker started early
    that no pool adopted."""
    global _shared
    with _shared_lock:
        pool, _shared = _shared, None
        early = list(_early)
        _early.clear()
    if pool is not None and pool.pid == os.getpid():
        pool.close()
    for process, conn in early:  # started early, never adopted
        stop_worker(process, conn)
