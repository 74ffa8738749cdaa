"""The pool's routing: an idle worker takes the queued check whose texts it already parsed."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Any

from pr1_eval.grading import pool as pool_module
from pr1_eval.grading.pool import GradingPool, _Job, _Worker


def _pool_with(pairs: list[tuple[str, str]]) -> GradingPool:
    """A closed pool (no dispatcher, no workers) whose queue holds ``pairs`` in order."""
    pool = GradingPool(2)
    pool.close()
    pool._pending = deque(_Job(i, gold, answer, 10.0, Future()) for i, (gold, answer) in enumerate(pairs))
    return pool


def _worker(*seen: tuple[str, str]) -> _Worker:
    worker = _Worker(process=None, conn=None, started_at=0.0)  # type: ignore[arg-type]
    for gold, answer in seen:
        worker.remember(_Job(-1, gold, answer, 10.0, Future()))
    return worker


def _take(pool: GradingPool, worker: _Worker) -> tuple[str, str]:
    job = pool._take_for(worker)
    worker.remember(job)
    return job.gold, job.answer


def test_worker_takes_checks_of_texts_it_has_parsed_first() -> None:
    pool = _pool_with([("7", "8"), ("1/2", "0.5"), ("3", "x"), ("1/2", "2/4"), ("3", "1/2")])
    worker = _worker(("1/2", "0.25"))
    assert [_take(pool, worker) for _ in range(5)] == [
        ("1/2", "0.5"), ("1/2", "2/4"), ("3", "1/2"), ("3", "x"), ("7", "8")]


def test_scores_count_both_texts_and_ties_go_to_the_earliest() -> None:
    pool = _pool_with([("a", "b"), ("g", "c"), ("g", "h"), ("g", "d")])
    worker = _worker(("g", "h"))
    assert [_take(pool, worker) for _ in range(4)] == [("g", "h"), ("g", "c"), ("g", "d"), ("a", "b")]
    assert worker.texts_sent == 6  # g, h, then c, d, a, b: each text counted once


def test_a_passed_over_head_is_taken_after_the_window(monkeypatch: Any) -> None:
    monkeypatch.setattr(pool_module, "AFFINITY_WINDOW", 3)
    pool = _pool_with([("lonely", "x")] + [("g", str(i)) for i in range(10)])
    worker = _worker(("g", "0"))
    taken = [_take(pool, worker) for _ in range(5)]
    assert taken.index(("lonely", "x")) == 3  # passed over 3 times, then taken


class _RecordingConn:
    """What the dispatcher sends a worker, recorded (no process behind it)."""

    def __init__(self) -> None:
        self.sent: list[list[tuple[int, str, str, float]]] = []

    def send(self, message: list[tuple[int, str, str, float]]) -> None:
        self.sent.append(message)


def test_a_grading_worker_gets_its_next_batch_while_it_grades_one() -> None:
    """A worker holding at most one batch gets the next at once (it queues on the socket, so the
    worker never waits on the dispatcher between batches); one holding more gets nothing; the
    running item's deadline is the one set when its batch was sent, not moved by the next batch."""
    pool = _pool_with([(str(i), str(i + 1)) for i in range(40)])
    pool.max_batch, pool.n_workers = 4, 1
    worker = _worker()
    worker.conn, worker.ready = _RecordingConn(), True  # type: ignore[assignment]
    pool._workers = [worker]
    pool._dispatch()
    assert [len(batch) for batch in worker.conn.sent] == [4] and len(worker.batch) == 4  # type: ignore[attr-defined]
    deadline = worker.deadline
    pool._dispatch()  # four in hand, none answered: one batch, so the next goes now
    assert [len(batch) for batch in worker.conn.sent] == [4, 4] and len(worker.batch) == 8  # type: ignore[attr-defined]
    assert worker.deadline == deadline
    pool._dispatch()  # two batches in hand: nothing more until it answers
    assert len(worker.conn.sent) == 2 and len(worker.batch) == 8  # type: ignore[attr-defined]
    sent_ids = [job_id for batch in worker.conn.sent for job_id, *_ in batch]  # type: ignore[attr-defined]
    assert sent_ids == [job.job_id for job in worker.batch] and len(set(sent_ids)) == 8


def test_a_pool_of_two_gives_a_busy_worker_nothing_more() -> None:
    """With a second worker, nothing queues behind an item being graded (it may hang: the other
    worker, idle, takes the next batch instead)."""
    pool = _pool_with([(str(i), str(i + 1)) for i in range(40)])
    pool.max_batch, pool.n_workers = 4, 2
    busy, idle = _worker(), _worker()
    for worker in (busy, idle):
        worker.conn, worker.ready = _RecordingConn(), True  # type: ignore[assignment]
    pool._workers = [busy, idle]
    busy.batch.append(pool._pending.popleft())  # one item in hand, less than a batch
    pool._dispatch()
    assert busy.conn.sent == [] and len(busy.batch) == 1  # type: ignore[attr-defined]
    assert [len(batch) for batch in idle.conn.sent] == [4]  # type: ignore[attr-defined]
