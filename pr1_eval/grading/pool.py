"""Killable grading workers: a pool of worker processes fed by one dispatcher thread.

Why processes: math-verify's alarms need a main thread and some inputs hang in C code, so
every check runs on a worker's main thread, and a worker that overruns an item's budget is
killed and replaced; only that item is marked ``timeout``. A worker that dies marks its
current item ``error``. Items queued behind a lost item are re-sent to a fresh worker.

Why a dispatcher thread: callers on any thread (VERL calls rewards from a worker thread) just
:meth:`GradingPool.submit` and wait on a :class:`~concurrent.futures.Future`; the dispatcher
alone owns the pipes, deadlines and restarts, so no lock is held while grading.
Items go to workers in small batches to amortise IPC, and come back one by one, so a
deadline always belongs to exactly one item. Workers are fresh interpreters running
:mod:`pr1_eval.grading.worker` (see there for why not ``multiprocessing`` spawn).

Why items are routed by text: math-verify's parse of a text costs several times the comparison
(on MATH-500 golds about 9 ms against 2 ms), and each worker caches its own parses. Handing
items out first come, first served sends the k samples of one problem, and the golds that
reappear as other problems' wrong answers, to every worker, each parsing them again: on
``bench/bench_grading.py`` two workers parsed a third more texts than one process, which held
the pool to about 1.65x. So an idle worker takes, among the first :data:`AFFINITY_WINDOW` queued
items, the one whose gold and answer it has already been sent (verdicts do not depend on which
worker grades an item, only the time does).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from queue import Empty, SimpleQueue

from pr1_eval import processes
from pr1_eval.grading.verify import PARSE_CACHE_SIZE, TEST_HOOKS_ENV, Verdict
from pr1_eval.grading.worker import start_worker, stop_worker

#: Environment variable overriding the default number of workers.
WORKERS_ENV = "PR1_EVAL_GRADING_WORKERS"
#: Consecutive workers that die before becoming ready after which the pool gives up.
_MAX_START_FAILURES = 3
#: How many queued items an idle worker looks through for texts it has already parsed: enough to
#: span a few problems' samples, few enough that picking costs microseconds.
AFFINITY_WINDOW = 128


#: Grading is cheap per item: more workers than this wait on the dispatcher.
MAX_WORKERS = 8
#: How the grading pool is sized: ``$PR1_EVAL_GRADING_WORKERS``, else the usable CPUs capped at
#: :data:`MAX_WORKERS` (:func:`pr1_eval.processes.default_workers`, the project's one rule).
GRADING_POOL = processes.Pool(WORKERS_ENV, MAX_WORKERS, "grading")


class _Batch:
    """The verdicts of one :meth:`GradingPool.check_all` call, and the one event its caller waits on.

    Why not a future per check: ``analyze`` asks 20,000 checks at once and waits for them all; a
    :class:`~concurrent.futures.Future` each (its condition and lock made, marked running, resolved
    and waited on one by one) cost the process about 0.4 s of CPU for nothing it used. Only the
    dispatcher delivers (or the caller, for checks it never queued), so the count needs no lock."""

    def __init__(self, size: int) -> None:
        self.verdicts: list[Verdict | None] = [None] * size
        self.left = size
        self.done = threading.Event()
        if not size:
            self.done.set()

    def deliver(self, index: int, verdict: Verdict) -> None:
        """Record the verdict of check ``index`` unless it has one (first answer wins)."""
        if self.verdicts[index] is None:
            self.verdicts[index] = verdict
            self.left -= 1
            if not self.left:
                self.done.set()


@dataclass
class _Job:
    """One (gold, answer) check and where its verdict goes: the future its caller waits on, or its
    place in a :class:`_Batch`."""

    job_id: int
    gold: str
    answer: str
    timeout_s: float
    future: Future[Verdict] | None
    passed_over: int = 0  # times another job was taken while this one was at the queue's head
    batch: _Batch | None = None
    index: int = 0

    def claim(self) -> bool:
        """Whether the job is still wanted, marking its future running (a batch's always is; a
        requeued job is already running; a fresh one may have been cancelled)."""
        return self.future is None or self.future.running() or self.future.set_running_or_notify_cancel()


@dataclass
class _Worker:
    """A worker process as the dispatcher tracks it."""

    process: subprocess.Popen[bytes]
    conn: Connection
    started_at: float
    ready: bool = False
    batch: deque[_Job] = field(default_factory=deque)  # sent, unanswered; batch[0] is running
    deadline: float | None = None  # when batch[0] times out
    #: texts sent to this worker, least recently used first: what its parse cache holds
    seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    texts_sent: int = 0  # distinct texts it had to parse (a cache miss each)

    def affinity(self, job: _Job) -> int:
        """How many of ``job``'s two texts this worker has parsed already (0, 1 or 2)."""
        return (job.gold in self.seen) + (job.answer in self.seen)

    def remember(self, job: _Job) -> None:
        """Record that this worker parses ``job``'s texts, as its LRU parse cache will."""
        for text in (job.gold, job.answer):
            if text in self.seen:
                self.seen.move_to_end(text)
                continue
            self.seen[text] = None
            self.texts_sent += 1
            if len(self.seen) > PARSE_CACHE_SIZE:
                self.seen.popitem(last=False)


class GradingPool:
    """Up to ``workers`` grading processes behind a thread-safe :meth:`submit`.

    Use as a context manager or call :meth:`close`. Workers start lazily, when work arrives.
    ``test_hooks`` (default: ``$PR1_EVAL_GRADING_TEST_HOOKS == "1"``) arms the test-only
    answers of :mod:`.verify`. ``warm``: each worker grades :data:`~.worker.WARMUP_PAIRS` before
    it reports ready (see :func:`~.worker.warm_up`); ``False`` for callers whose checks seldom
    need those forms (see :func:`~.shared.use_cold_workers`). ``adopt``: workers already started
    (:func:`~.worker.start_worker` with this pool's ``test_hooks`` and ``warm``), taken as its own,
    ready once they say so (see :func:`~.shared.start_worker_early`).
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        max_batch: int = 8,
        start_timeout_s: float = 180.0,
        test_hooks: bool | None = None,
        warm: bool = True,
        adopt: Sequence[tuple[subprocess.Popen[bytes], Connection]] = (),
    ) -> None:
        self.n_workers = max(1, workers if workers is not None else processes.default_workers(GRADING_POOL))
        self.max_batch = max(1, max_batch)
        self.start_timeout_s = start_timeout_s
        self.test_hooks = os.environ.get(TEST_HOOKS_ENV) == "1" if test_hooks is None else test_hooks
        self.warm = warm
        self.pid = os.getpid()
        self._inbox: SimpleQueue[_Job] = SimpleQueue()
        self._pending: deque[_Job] = deque()
        self._workers: list[_Worker] = [_Worker(process, conn, time.monotonic())
                                        for process, conn in adopt[: self.n_workers]]
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closing = False
        self._finished = False
        self._broken: str | None = None
        self._start_failures = 0
        self._start_all = False  # set by start(), read by the dispatcher
        self._wake_recv, self._wake_send = socket.socketpair()
        self._wake_send.setblocking(False)
        self._thread = threading.Thread(target=self._run, name="pr1-grading-dispatcher", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the dispatcher stopped)."""
        return self._closing

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the current workers (for monitoring; changes as workers are replaced)."""
        return [w.process.pid for w in list(self._workers)]

    @property
    def texts_sent(self) -> list[int]:
        """Distinct texts each current worker has been sent to parse, in :attr:`worker_pids`
        order (for the benchmark: their sum against one process's count is the work that
        splitting across workers repeats)."""
        return [w.texts_sent for w in list(self._workers)]

    def submit(self, gold: str, answer: str, timeout_s: float = 10.0) -> Future[Verdict]:
        """Queue one check of ``answer`` against ``gold``. The future always resolves: with the
        verdict, or with an ``error`` verdict if the pool is closed or broken."""
        return self.submit_many([(gold, answer)], timeout_s)[0]

    def submit_many(self, pairs: Sequence[tuple[str, str]], timeout_s: float = 10.0) -> list[Future[Verdict]]:
        """:meth:`submit` for each ``(gold, answer)``, in order, queued together: one lock and one
        wake of the dispatcher for all of them. Why: ``analyze`` submits 20,000 checks at once, and a
        wake per check (a byte on a socket, the dispatcher woken to find one more job) cost its
        process about 0.1 s of CPU and as many thread switches."""
        jobs = [_Job(next(self._ids), gold, answer, float(timeout_s), Future()) for gold, answer in pairs]
        self._queue(jobs)
        return [job.future for job in jobs]  # type: ignore[misc]

    def check_all(self, pairs: Sequence[tuple[str, str]], timeout_s: float = 10.0) -> list[Verdict]:
        """The verdict of each ``(gold, answer)``, in order, once all are in: :meth:`submit_many`
        and a wait for every future, without the futures (see :class:`_Batch`). Every check
        gets a verdict, an ``error`` one if the pool is closed or broken."""
        batch = _Batch(len(pairs))
        timeout = float(timeout_s)
        ids = self._ids
        self._queue([_Job(next(ids), gold, answer, timeout, None, 0, batch, i) for i, (gold, answer) in enumerate(pairs)])
        batch.done.wait()
        return batch.verdicts  # type: ignore[return-value]

    def _queue(self, jobs: list[_Job]) -> None:
        """Hand ``jobs`` to the dispatcher: one lock and one wake for all of them (on a closed pool,
        each is answered with the error verdict at once)."""
        with self._lock:
            if self._finished:
                for job in jobs:
                    _resolve(job, Verdict("error", None, self._broken or "grading pool closed"))
                return
            for job in jobs:
                self._inbox.put(job)
        if jobs:
            self._wake()

    def start(self) -> None:
        """Start every worker now rather than when checks arrive. For a caller that knows checks
        are coming and has work of its own meanwhile: a worker's start (a Python process importing
        math-verify, about a second of CPU) then overlaps that work instead of delaying the first
        verdicts. Workers lost later are replaced when checks arrive, as usual."""
        self._start_all = True
        self._wake()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the workers; unfinished checks resolve as errors. Idempotent."""
        self._closing = True
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def __enter__(self) -> GradingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- dispatcher thread ----------------------------------------------------------------
    def _wake(self) -> None:
        """Interrupt the dispatcher's wait (new work, or closing)."""
        with contextlib.suppress(OSError):  # already awake (buffer full) or closed
            self._wake_send.send(b"x")

    def _run(self) -> None:
        """The dispatcher loop; whatever happens, its ``finally`` resolves every future."""
        try:
            while not self._closing:
                self._take_inbox()
                self._start_workers()
                self._dispatch()
                self._wait_and_handle()
                self._expire(time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - never leave a caller waiting forever
            self._broken = f"grading dispatcher failed: {type(exc).__name__}: {exc}"
        finally:
            self._closing = True
            self._shutdown()

    def _take_inbox(self) -> None:
        """Move submitted jobs into the dispatcher's own queue (only this thread touches it)."""
        while True:
            try:
                job = self._inbox.get_nowait()
            except Empty:
                return
            if self._broken is not None or self._finished:
                _resolve(job, Verdict("error", None, self._broken or "grading pool closed"))
            else:
                self._pending.append(job)

    def _start_workers(self) -> None:
        """Start workers for queued work beyond what idle or starting workers will take."""
        free = sum(1 for w in self._workers if not w.batch)
        wanted = min(self.n_workers - len(self._workers), len(self._pending) - free)
        if self._start_all:
            wanted, self._start_all = self.n_workers - len(self._workers), False
        for _ in range(max(0, wanted)):
            self._workers.append(_spawn_worker(self.test_hooks, self.warm))

    def _dispatch(self) -> None:
        """Give each idle, ready worker a batch: large enough to amortise IPC, small enough (a
        fraction of the queue) that workers finish together, chosen by text affinity.

        A pool of one worker also gives it its next batch while it grades one, once what it holds
        is at most one batch (the two queue on its socket and it reads the next the moment it
        answers the last), so it never waits on this thread between batches. Why: this thread
        shares its process's GIL with the caller's work, and ``analyze``'s 20,000 path-conclusion
        checks on its one grading process, in batches of 8, waited on it between every two
        (math-verify's process busy about half the time). Why one worker only: with two, an item
        queued behind a hanging one would wait out that one's deadline while the other worker is
        free (``tests/pr1_eval/grading/test_pool_orphans.py``); alone, it waits for it anyway. Each
        item's deadline still runs only while it is the one being graded."""
        for worker in self._workers:
            if not self._pending:
                return
            size = max(1, min(self.max_batch, len(self._pending) // (2 * self.n_workers)))
            busy = len(worker.batch) > size if self.n_workers == 1 else bool(worker.batch)
            if not worker.ready or busy:
                continue
            sent = len(worker.batch)
            while self._pending and len(worker.batch) < sent + size:
                job = self._take_for(worker)
                if job.claim():
                    worker.batch.append(job)
                    worker.remember(job)
            if len(worker.batch) > sent:
                worker.conn.send([(j.job_id, j.gold, j.answer, j.timeout_s) for j in itertools.islice(worker.batch, sent, None)])
                if not sent:
                    worker.deadline = time.monotonic() + worker.batch[0].timeout_s

    def _take_for(self, worker: _Worker) -> _Job:
        """Remove and return the queued job ``worker`` parses least for: of the first
        :data:`AFFINITY_WINDOW`, the earliest with the most texts it has seen (see the module
        docstring); the queue's head when none has any, or when it has been passed over
        :data:`AFFINITY_WINDOW` times (so a lone check, e.g. one reward call, never waits long).
        A pool of one worker takes the head: every text is parsed by that worker whatever the
        order, and the window's scan cost ``analyze``'s dispatcher a quarter of a second per
        20,000 checks."""
        if self.n_workers == 1:
            return self._pending.popleft()
        head = self._pending[0]
        best, best_score = 0, 0
        window = AFFINITY_WINDOW if head.passed_over < AFFINITY_WINDOW else 1
        for index, job in enumerate(itertools.islice(self._pending, window)):
            score = worker.affinity(job)
            if score > best_score:
                best, best_score = index, score
                if score == 2:
                    break
        if best:
            head.passed_over += 1
        job = self._pending[best]
        del self._pending[best]
        return job

    def _wait_and_handle(self) -> None:
        """Sleep until a worker speaks, work arrives or the nearest deadline; handle results and
        deaths (EOF on a worker's socket)."""
        limits = [w.deadline for w in self._workers if w.deadline is not None]
        limits += [w.started_at + self.start_timeout_s for w in self._workers if not w.ready]
        timeout = min(1.0, max(0.0, min(limits) - time.monotonic())) if limits else 1.0
        ready = wait([self._wake_recv, *(w.conn for w in self._workers)], timeout)
        if self._wake_recv in ready:
            self._wake_recv.recv(65536)
        for worker in list(self._workers):
            if worker.conn in ready and not self._read_messages(worker):
                _kill(worker)  # EOF on its socket: the process is gone or going
                self._lost(worker, "error", f"grading worker died (exit code {worker.process.returncode})")

    def _read_messages(self, worker: _Worker) -> bool:
        """Handle everything the worker sent; ``False`` when its socket is closed."""
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if message[0] == "ready":
                    worker.ready = True
                    self._start_failures = 0
                    continue
                job_id, verdict = message
                if worker.batch and worker.batch[0].job_id == job_id:
                    _resolve(worker.batch.popleft(), verdict)
                worker.deadline = time.monotonic() + worker.batch[0].timeout_s if worker.batch else None
        except (EOFError, OSError):
            return False
        return True

    def _expire(self, now: float) -> None:
        """Kill workers whose current item, or whose start-up, overran its budget."""
        for worker in list(self._workers):
            if worker.deadline is not None and now >= worker.deadline:
                budget = worker.batch[0].timeout_s if worker.batch else 0.0
                self._lost(worker, "timeout", f"no verdict within {budget:g}s; grading worker killed")
            elif not worker.ready and now - worker.started_at > self.start_timeout_s:
                self._lost(worker, "error", f"grading worker did not start within {self.start_timeout_s:g}s")

    def _lost(self, worker: _Worker, status: str, message: str) -> None:
        """Kill ``worker``; its running item gets ``status``; the rest go back to the queue."""
        _kill(worker)
        self._workers.remove(worker)
        if worker.batch:
            _resolve(worker.batch.popleft(), Verdict(status, None, message))
            self._pending.extendleft(reversed(worker.batch))
        if not worker.ready:
            self._start_failures += 1
            if self._start_failures >= _MAX_START_FAILURES:
                self._broken = f"grading workers keep failing to start ({message})"
                while self._pending:
                    _resolve(self._pending.popleft(), Verdict("error", None, self._broken))

    def _shutdown(self) -> None:
        """Stop workers (politely, then by force) and resolve everything left as an error."""
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        deadline = time.monotonic() + 2.0
        for worker in self._workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(max(0.01, deadline - time.monotonic()))
            _kill(worker)
            for job in worker.batch:
                _resolve(job, Verdict("error", None, "grading pool closed"))
        self._workers.clear()
        with self._lock:
            self._finished = True
            self._take_inbox()
        while self._pending:
            _resolve(self._pending.popleft(), Verdict("error", None, self._broken or "grading pool closed"))
        self._wake_send.close()
        self._wake_recv.close()


def _resolve(job: _Job, verdict: Verdict) -> None:
    """Deliver ``verdict`` unless the job already has one (first answer wins)."""
    if job.batch is not None:
        job.batch.deliver(job.index, verdict)
    elif job.future is not None and not job.future.done():
        job.future.set_result(verdict)


def _spawn_worker(test_hooks: bool, warm: bool) -> _Worker:
    process, conn = start_worker(test_hooks, warm)
    return _Worker(process, conn, time.monotonic())


def _kill(worker: _Worker) -> None:
    stop_worker(worker.process, worker.conn)
