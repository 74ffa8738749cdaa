"""Chunks of problems, the work queue that hands them to replicas, and a scheduling simulation.

Why a queue rather than a split fixed in advance: generation time per problem is long-tailed
(reasoning lengths vary tenfold), so a static split leaves most replicas idle while the few that
drew the long problems finish. Replicas pull the next chunk when they are free instead, so fast
replicas take more work. A chunk whose replica is lost (killed, out of memory, its node gone) goes
back to the *front* of the queue and is finished by another replica; a chunk is completed at
most once, so a late answer from a replica that was given up on is dropped, never stored twice.

Everything here is pure (no Ray): the Ray pool drives :class:`WorkQueue`, and ``bench/bench_ray.py``
replays measured per-problem times through :func:`simulate_queue` and :func:`simulate_static`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pr1_eval.errors import Pr1EvalError

MAX_ATTEMPTS = 3
"""A chunk that has lost this many replicas (or raised on this many) fails the run: it is the
chunk, not the replicas, that is broken (a prompt that runs the engine out of memory, say)."""


@dataclass(frozen=True)
class Chunk:
    """Problems of one task generated together: ``(problem index, missing sample indices)`` pairs."""

    id: int
    task: str
    items: tuple[tuple[int, tuple[int, ...]], ...]

    @property
    def n_samples(self) -> int:
        return sum(len(missing) for _, missing in self.items)


def guided_sizes(n_problems: int, replicas: int, cap: int) -> list[int]:
    """Chunk sizes by guided self-scheduling: each chunk is what remains / (2 × replicas), at most
    ``cap``, at least 1. Big chunks first (a vLLM replica needs many sequences in flight), single
    problems at the end, so the last replicas to finish are never stuck with a big chunk: the
    bench's simulation gives the idle share of one-problem chunks with a tenth as many chunks."""
    sizes, left = [], n_problems
    while left > 0:
        sizes.append(_guided_step(left, replicas, cap))
        left -= sizes[-1]
    return sizes


def _guided_step(left: int, replicas: int, cap: int) -> int:
    return max(1, min(cap, math.ceil(left / (2 * max(1, replicas))), left))


def plan_chunks(todo: Mapping[str, Sequence[tuple[int, Sequence[int]]]], size: int,
                replicas: int | None = None) -> list[Chunk]:
    """Cut each task's unfinished problems, in order, into chunks: of ``size`` problems, or with
    ``replicas``, of guided sizes (:func:`guided_sizes`) capped at ``size``.

    Chunks never mix tasks. With a fixed size a single-process run cuts the same chunks: on the
    HF engine a batch's random stream depends on which requests share it, so equal chunks mean
    equal samples.
    """
    if size < 1:
        raise Pr1EvalError(f"--problems-per-chunk must be at least 1, got {size}")
    left = sum(len(items) for items in todo.values())
    chunks: list[Chunk] = []
    for task, items in todo.items():
        start = 0
        while start < len(items):
            step = _guided_step(left, replicas, size) if replicas else size
            part = tuple((index, tuple(missing)) for index, missing in items[start : start + step])
            chunks.append(Chunk(len(chunks), task, part))
            start += len(part)
            left -= len(part)
    return chunks


def engine_chunk_size(engine_name: str) -> int:
    """Problems per chunk on one engine: small on HF (bounded loss on a kill), large on vLLM and on a
    server (``openai``), whose schedulers need many sequences in flight to fill their GPUs (a chunk's
    requests are all that one call can have in flight)."""
    return 64 if engine_name in ("vllm", "openai") else 8


class WorkQueue:
    """Chunks waiting, in flight (and on which replica) and done; see the module docstring."""

    def __init__(self, chunks: Sequence[Chunk], max_attempts: int = MAX_ATTEMPTS) -> None:
        self._chunks = {c.id: c for c in chunks}
        self._pending: deque[int] = deque(c.id for c in chunks)
        self._holder: dict[int, int] = {}
        self._held: dict[int, int] = {}
        self._attempts: dict[int, int] = {}
        self.max_attempts = max_attempts
        self.done: set[int] = set()
        self.retried: set[int] = set()
        """Chunks that went back to the queue at least once."""

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def in_flight(self) -> int:
        return len(self._holder)

    @property
    def finished(self) -> bool:
        return len(self.done) == len(self._chunks)

    def held_by(self, replica: int) -> list[int]:
        return [cid for cid, holder in self._holder.items() if holder == replica]

    def held(self, replica: int) -> int:
        """How many chunks ``replica`` holds (O(1): the pool asks after every result)."""
        return self._held.get(replica, 0)

    def _drop_holder(self, chunk_id: int) -> None:
        holder = self._holder.pop(chunk_id, None)
        if holder is not None:
            self._held[holder] -= 1

    def take(self, replica: int) -> Chunk | None:
        """The next chunk for ``replica`` (a requeued chunk first), or None when none waits."""
        if not self._pending:
            return None
        cid = self._pending.popleft()
        self._holder[cid] = replica
        self._held[replica] = self._held.get(replica, 0) + 1
        self._attempts[cid] = self._attempts.get(cid, 0) + 1
        return self._chunks[cid]

    def complete(self, chunk_id: int, replica: int) -> bool:
        """Mark a chunk done; False (and nothing changes) unless ``replica`` holds it now."""
        if self._holder.get(chunk_id) != replica:
            return False
        self._drop_holder(chunk_id)
        self.done.add(chunk_id)
        return True

    def requeue(self, chunk_id: int, reason: str) -> None:
        """Put a chunk whose attempt failed back at the front, or fail the run after
        :attr:`max_attempts` attempts (naming the chunk and the last reason)."""
        self._drop_holder(chunk_id)
        if chunk_id in self.done:
            return
        chunk = self._chunks[chunk_id]
        if self._attempts.get(chunk_id, 0) >= self.max_attempts:
            first = chunk.items[0][0] if chunk.items else "?"
            raise Pr1EvalError(
                f"a chunk of {len(chunk.items)} {chunk.task} problem(s) (first index {first}) failed "
                f"{self.max_attempts} times, last: {reason}; finished chunks are saved — lower "
                "--problems-per-chunk or --max-new-tokens, then rerun the same command to resume"
            )
        self.retried.add(chunk_id)
        self._pending.appendleft(chunk_id)

    def release(self, replica: int, reason: str) -> list[int]:
        """Requeue every chunk ``replica`` holds (it was lost); returns their ids."""
        lost = self.held_by(replica)
        for cid in reversed(lost):  # appendleft: keep their original order at the front
            self.requeue(cid, reason)
        return lost


@dataclass(frozen=True)
class Schedule:
    """Outcome of a simulated run: when the last replica finished, and how busy they were."""

    makespan: float
    busy: float
    replicas: int

    @property
    def idle_share(self) -> float:
        """Share of the replicas' time (replicas × makespan) spent idle: paid for, unused."""
        capacity = self.replicas * self.makespan
        return 0.0 if capacity <= 0 else 1.0 - self.busy / capacity


def simulate_queue(times: Sequence[float], replicas: int, chunks: int | Sequence[int] = 1) -> Schedule:
    """Replicas pull chunks (of ``chunks`` problems, or of the given sizes), in order, whenever
    they are free; a chunk takes the sum of its problems' times."""
    sizes = [chunks] * math.ceil(len(times) / chunks) if isinstance(chunks, int) else list(chunks)
    free_at = [(0.0, r) for r in range(replicas)]
    heapq.heapify(free_at)
    start = 0
    for size in sizes:
        at, replica = heapq.heappop(free_at)
        heapq.heappush(free_at, (at + sum(times[start : start + size]), replica))
        start += size
    return Schedule(max(at for at, _ in free_at), float(sum(times)), replicas)


def simulate_static(times: Sequence[float], replicas: int) -> Schedule:
    """Each replica gets every ``replicas``-th problem up front (the ``--shard i/n`` slicing)."""
    loads = [sum(times[r::replicas]) for r in range(replicas)]
    return Schedule(max(loads), float(sum(times)), replicas)
