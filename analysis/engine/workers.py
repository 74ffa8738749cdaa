"""Processes for the analysis's CPU-bound Python work: parsing blocks, reading path conclusions,
scoring BLEU, formatting CSV, spread over every usable core.

Why processes: each of those is pure Python per item and holds the GIL, so threads cannot share
it; on a 12-checkpoint sweep they are most of a first ``analyze``, and a machine with N cores
does them about N times sooner in N processes. Why forked, and forked first: a forked worker
starts in milliseconds with every module already imported, and :func:`analysis_workers` forks
them before anything in the process has started a thread (the loader's, the grading pool's,
a tokenizer's), since forking a threaded process can deadlock the child.

What each call costs: its arguments and results are pickled, so work is sent in chunks of
thousands of items (:class:`Chunked`), never one per item. Results come back in the order the
work was given, and each worker runs the same pure function the process would, so the numbers are
those of running it here. ``workers=None`` everywhere means "run here", which is what every
caller but ``analyze`` (the dashboards, the notebooks, the tests) gets.

How many: ``$PR1_ANALYSIS_WORKERS``, else the usable CPUs capped at :data:`MAX_WORKERS`;
``1`` (or a platform without ``fork``) runs everything in this process. A count asked for is
refused past :func:`pr1_eval.processes.worker_limit`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from pr1_eval import processes
from pr1_eval.errors import Pr1EvalError

WORKERS_ENV = "PR1_ANALYSIS_WORKERS"
#: Beyond this the main process, which merges what the workers return, is the bottleneck.
MAX_WORKERS = 8
#: How much lower the workers' scheduling priority is than the process that forks them (``nice``
#: steps; 5 gives a worker a third of the CPU share of the main process when both want a CPU).
#: Why: the workers do throughput work (BLEU batches, CSV parts) that nothing waits on until its
#: end, while the main process and math-verify's grading process are the analysis' critical path
#: (the verdicts wait for the conclusions, the consistency table for the verdicts, the big tables'
#: CSV for the tables); on a machine with fewer CPUs than runnable processes, equal shares made the
#: critical path wait behind the batches (``docs/performance.md``). A machine with a CPU to spare
#: for each process runs them as before: niceness only decides who waits when they compete.
WORKER_NICENESS = 5

T = TypeVar("T")
R = TypeVar("R")


#: How the analysis' pool is sized: ``$PR1_ANALYSIS_WORKERS``, else the usable CPUs capped at
#: :data:`MAX_WORKERS` (:func:`pr1_eval.processes.default_workers`: the grading pool's rule too).
ANALYSIS_POOL = processes.Pool(WORKERS_ENV, MAX_WORKERS, "analysis")


class Workers:
    """A pool of forked worker processes (see the module docstring). ``size``: how many."""

    def __init__(self, executor: ProcessPoolExecutor, size: int) -> None:
        self._executor = executor
        self.size = size

    def submit(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        """``fn(*args)`` in a worker (``fn`` a module-level function, the arguments picklable)."""
        return self._executor.submit(fn, *args)


class Chunked(Generic[T, R]):
    """Items handed to ``fn`` in ``workers``, ``size`` at a time, as they are added: the workers
    start on the first chunk while the caller still prepares the rest (keying every text first
    left them idle). When nothing was handed out (no workers, or fewer than ``size`` items) the
    chunks run here, so a little work costs no round trip. Results come back flat, in the order
    the items were added; ``fn`` returns one result per item."""

    def __init__(self, workers: Workers | None, fn: Callable[[list[T]], list[R]], size: int) -> None:
        self._workers = workers
        self._fn = fn
        self._size = size
        self._items: list[T] = []
        self._sent = 0
        self._futures: list[Future[list[R]]] = []

    def add(self, item: T) -> None:
        self._items.append(item)
        if self._workers is not None and len(self._items) - self._sent == self._size:
            self._send()

    def extend(self, items: list[T]) -> None:
        """Every item of ``items``, as :meth:`add` would take them one by one (whole chunks out at once)."""
        if self._workers is None:
            self._items.extend(items)
            return
        start = 0
        while start < len(items):
            room = self._size - (len(self._items) - self._sent)
            self._items.extend(items[start:start + room])
            start += room
            if len(self._items) - self._sent == self._size:
                self._send()

    def close(self) -> None:
        """Hand out the last, short chunk (it stays here when no chunk was handed out)."""
        if self._futures and self._sent < len(self._items):
            self._send()

    def results(self, here: Callable[[list[T]], list[R]] | None = None) -> list[R]:
        """Every item's result (waiting for the workers); ``here``: what runs a chunk in this
        process (default ``fn``)."""
        return [result for done in self.chunks(here) for result in done]

    def chunks(self, here: Callable[[list[T]], Any] | None = None) -> list[Any]:
        """What ``fn`` returned for each chunk, in order (waiting for the workers): for a ``fn``
        that returns one value per chunk rather than a list of one result per item."""
        self.close()
        if self._futures:
            return [future.result() for future in self._futures]
        run = here or self._fn
        return [run(self._items[start:start + self._size]) for start in range(0, len(self._items), self._size)]

    def _send(self) -> None:
        assert self._workers is not None
        self._futures.append(self._workers.submit(self._fn, self._items[self._sent:]))
        self._sent = len(self._items)


#: glibc's ``mallopt`` parameters (``malloc.h``) and the values :func:`keep_freed_memory` sets.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MALLOC_SETTINGS = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 256 << 20), (_M_TOP_PAD, 16 << 20))


def keep_freed_memory() -> bool:
    """Let glibc's ``malloc`` keep up to 256 MB of freed heap for reuse instead of returning it to
    the kernel at once, in this process and the workers forked from it; whether it was set.

    Why: BLEU's integer arrays (``analysis.diversity.bleu_counts``) take tens of MB per batch, and by
    default each batch's are handed back to the kernel when freed and faulted in again, zeroed,
    for the next: on a sweep's pairs a fifth of BLEU's time went to those page faults (system
    time 1.0 s against 3.1 s of user time; with this, 0.05 s). Peak memory does not grow: the
    memory kept is what the process held a moment before. Arrays up to 32 MB come from the heap
    (glibc would raise its threshold to that by itself, after the first free). Nothing changes
    where ``mallopt`` is not glibc's."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in _MALLOC_SETTINGS)


def _ready() -> int:
    return os.getpid()


#: ``prctl`` option (``linux/prctl.h``): the signal this process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _start_worker(parent_pid: int) -> None:
    """Each worker's first acts: :func:`_die_with_parent`, then :func:`_yield_to_parent`."""
    _die_with_parent(parent_pid)
    _yield_to_parent()


def _yield_to_parent() -> None:
    """Lower this worker's priority by :data:`WORKER_NICENESS` (see there for why); where the
    system refuses, the worker runs at its parent's priority, as before."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: no os.nice (not POSIX)
        os.nice(WORKER_NICENESS)


def _die_with_parent(parent_pid: int) -> None:
    """End when the process that forked this worker ends, however it ends.

    Why: the pool stops its workers on a clean exit, but a parent killed outright (SIGKILL, the
    OOM killer, a timeout, a notebook kernel restarted) runs no ``finally``, and its workers stayed
    alive and idle (the audit counted 12 of 12 after 8 s, 100 MB each). On Linux the kernel sends
    SIGKILL at the parent's death (``PR_SET_PDEATHSIG``; the pool forks from the thread that first
    submits, which lives as long as the pool); elsewhere a daemon thread polls the parent's pid.
    A parent already gone before this runs (the race the kernel option leaves) ends the worker at
    once. SIGKILL, not SIGTERM: a worker holds nothing but a pure function's state."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):
        armed = False
    if os.getppid() != parent_pid:
        os._exit(1)
    if not armed:
        threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)


def forks_workers(size: int | None = None) -> bool:
    """Whether :func:`analysis_workers` starts worker processes for ``size`` (default: the pool's
    configured size): two or more, where the platform can fork."""
    size = processes.default_workers(ANALYSIS_POOL) if size is None else size
    return size >= 2 and "fork" in multiprocessing.get_all_start_methods()


@contextmanager
def analysis_workers(size: int | None = None) -> Iterator[Workers | None]:
    """Forked workers for one analysis, or ``None`` when one process is asked for (or fork is not
    available). Call it before anything starts a thread; the workers are started at once and
    stopped on exit."""
    size = processes.default_workers(ANALYSIS_POOL) if size is None else processes.check_worker_count(size, "size", "analysis")
    keep_freed_memory()  # before the fork: the workers inherit it
    if not forks_workers(size):
        yield None
        return
    executor = ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_start_worker, initargs=(os.getpid(),))
    try:
        # with fork every worker starts on the first submit, before the executor's own thread
        executor.submit(_ready).result()
        yield Workers(executor, size)
    except BrokenProcessPool as exc:
        raise Pr1EvalError(f"an analysis worker process died ({exc}); it was most likely killed for memory: "
                           f"run again with fewer workers ({WORKERS_ENV}=1 does everything in one process, "
                           "which holds the least memory)") from exc
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
