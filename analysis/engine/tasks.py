"""Work handed out now and collected later: the one way the analysis overlaps its steps.

Two shapes cover every overlap the analysis has:

- :func:`map_chunks`: a pure function of one item, mapped over many items in worker processes
  (:mod:`analysis.engine.workers`), chunked, in order, and optionally kept in a
  :class:`~analysis.engine.shards.ShardedCache` by a key of each item, so an item seen before (in
  this call or any earlier command) is never computed again. The workers key the items and look
  them up, chunk by chunk; a :class:`Pending` comes back at once.
- :func:`in_background`: a call that mostly waits on other processes (math-verify in the grading
  pool) made on a daemon thread, so this process builds other tables meanwhile; a
  :class:`~concurrent.futures.Future` comes back at once.

Results are the function's own, computed the same way wherever they ran (the equivalence tests
run each measure with and without workers and caches and compare). This module knows nothing of
what is computed: the measures (:mod:`analysis.structure.roles`, :mod:`analysis.diversity.bleu`, …) are plain
functions, and :mod:`analysis.pipeline.scheduled` says how each runs here.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from analysis.engine.shards import Codec, ShardedCache
from analysis.engine.workers import Chunked, Workers

T = TypeVar("T")
R = TypeVar("R")


class Pending(Generic[R]):
    """A result being computed: :meth:`result` waits for it (the first call collects; later calls
    give the same value)."""

    def __init__(self, collect: Callable[[], R]) -> None:
        self._collect: Callable[[], R] | None = collect
        self._value: R | None = None

    def result(self) -> R:
        if self._collect is not None:
            self._value, self._collect = self._collect(), None
        return self._value  # type: ignore[return-value]


def same(value: Any) -> Any:
    """The value itself: :func:`map_chunks`' default codec (a module-level function: picklable)."""
    return value


def map_chunks(fn: Callable[[list[T]], list[R]], items: Iterable[T], *, workers: Workers | None, chunk: int,
               cache: ShardedCache[Any] | None = None, keys: Callable[[list[T]], list[str]] | None = None,
               encode: Callable[[R], Any] = same, decode: Callable[[Any], R] = same,
               skip: Callable[[T], bool] | None = None) -> Pending[list[R | None]]:
    """``fn`` over ``items`` (one result per item, in order), begun now (see the module docstring).

    ``fn``: a module-level function of a list of items (picklable, as the workers need), returning
    one result per item. ``chunk``: items per call, enough that pickling them is a small part of
    the work. ``keys`` (a module-level function of a list of items, one key each) with ``cache``:
    results kept by key (``encode``/``decode``, module-level too, to and from the cache's values),
    each distinct item (``items`` must then be hashable) computed once. ``skip``: items whose
    result is ``None`` without calling ``fn`` (never kept). With no ``workers``, or when every
    item fits one chunk, the chunks run in this process when the result is asked for.

    Where the per-item work happens (:class:`_Keyed`): this process only drops repeated items (a
    dict, in C); the workers key the items, look the keys up in the cache's shards (each worker
    reads them once), compute what is not there, and keep the new values, each worker writing its
    own to the cache as it exits (:func:`_write_kept`; without workers this process writes them).
    Why: keying and looking up a sweep's 400,000 items here, one Python call
    each (517,750 sha256 keys), was the main process's largest block between loading the runs and
    building the tables (a few seconds of CPU; its time holding the GIL fell from 47 s to 26 s on
    a loaded machine: ``docs/performance.md``). An item repeated across chunks under two values
    with one key (a BLEU pair given both ways round) may be computed twice, to the same value.
    The cost: each worker holds its own copy of a cache's values, read from disk once; nothing on
    a first analysis, tens of MB per worker when a sweep's texts are mostly known (a whole
    analysis already kept is never recomputed: :mod:`analysis.engine.outputs`).

    Every chunk is handed out before this returns, the last short one included: the workers take
    chunks in the order they were submitted, and a last chunk held back until the result was
    asked for queued behind everything submitted meanwhile (``analyze``'s path conclusions waited
    behind every BLEU batch, and math-verify, which needs them, ran alone after BLEU instead of
    beside it: 11 s of a sweep's 35 with one CPU idle, ``docs/performance.md``)."""
    listed = list(items)
    if keys is None or cache is None:
        plain: Chunked[T, R | None] = Chunked(workers, _Plain(fn, skip), chunk)
        plain.extend(listed)
        plain.close()  # the last, short chunk out now, ahead of work submitted after this call
        return Pending(plain.results)
    distinct = list(dict.fromkeys(listed))
    task = _Keyed(fn, keys, encode, decode, skip, cache.directory, cache.codec)
    sending: Chunked[T, Any] = Chunked(workers, cast(Callable[[list[T]], list[Any]], task), chunk)  # read by chunks()
    sending.extend(distinct)
    sending.close()  # the last, short chunk out now, ahead of work submitted after this call

    def collect() -> list[R | None]:
        done: list[_Done[R]] = sending.chunks(lambda part: task.run(part, cache.known()))
        results = [result for part in done for result in part.results]
        keys = [key for part in done for key in part.keys]  # none from a worker that writes its own
        if keys:
            cache.put_many(keys, [value for part in done for value in part.values])
            cache.flush()
        if len(distinct) == len(listed):
            return results
        found = dict(zip(distinct, results, strict=True))
        return [found[item] for item in listed]

    return Pending(collect)


def store_values(directory: Path, codec: Codec[Any], keys: list[str], values: list[Any]) -> None:
    """Write ``values`` by ``keys`` to the cache in ``directory`` (one shard)."""
    cache: ShardedCache[Any] = ShardedCache(directory, codec)
    cache.put_many(keys, values)
    cache.flush()


#: The values this process computed for :func:`map_chunks` in a worker and has not written yet:
#: (process id, cache folder) -> (codec, values by key). Keyed by the process id so a process
#: forked from one that kept some never writes its parent's.
_KEPT: dict[tuple[int, str], tuple[Codec[Any], dict[str, Any]]] = {}


def _keep(directory: Path, codec: Codec[Any], keys: list[str], values: list[Any]) -> None:
    """Keep a chunk's new values in this worker, to be written as it exits (:func:`_write_kept`).

    Why there and then: sent back with the results, a sweep's 400,000 keys and values were
    pickled three times and unpickled twice on their way to the one worker that wrote them (half
    a second of CPU, most of it the main process's); each worker holds what it computed, and
    its own exit (after its last CSV part, which ``analyze`` waits for) is the moment nothing else
    wants its CPU."""
    slot = (os.getpid(), str(directory))
    if not any(pid == slot[0] for pid, _ in _KEPT):
        multiprocessing.util.Finalize(None, _write_kept, exitpriority=10)  # run by a worker's exit
    _KEPT.setdefault(slot, (codec, {}))[1].update(zip(keys, values, strict=True))


def _write_kept() -> None:
    """Write what this process kept (:func:`_keep`), a shard per cache; a failure is said on stderr
    (it costs only time: the values are computed again next time)."""
    pid = os.getpid()
    for (owner, folder), (codec, values) in list(_KEPT.items()):
        if owner != pid or not values:
            continue
        try:
            store_values(Path(folder), codec, list(values), list(values.values()))
        except Exception as exc:  # noqa: BLE001 - a cache write must never fail the analysis
            print(f"warning: an analysis worker could not write its cache values to {folder} "
                  f"({type(exc).__name__}: {exc}); they are computed again next time", file=sys.stderr)
        del _KEPT[(owner, folder)]


@dataclass(frozen=True)
class _Plain(Generic[T, R]):
    """``fn`` of a chunk, ``None`` for the items ``skip`` names (what a worker runs without a cache)."""

    fn: Callable[[list[T]], list[R]]
    skip: Callable[[T], bool] | None

    def __call__(self, items: list[T]) -> list[R | None]:
        if self.skip is None:
            return list(self.fn(items))
        live = [i for i, item in enumerate(items) if not self.skip(item)]
        out: list[R | None] = [None] * len(items)
        for i, result in zip(live, self.fn([items[i] for i in live]), strict=True):
            out[i] = result
        return out


@dataclass
class _Done(Generic[R]):
    """One chunk done: a result per item, and the values it computed, by key, for the cache."""

    results: list[R | None]
    keys: list[str]
    values: list[Any]


#: Each worker's view of the caches it was asked about: (process id, folder) -> the values on disk.
#: Keyed by the process id so a process forked from one that filled it never reads its parent's.
_READ: dict[tuple[int, str], dict[str, Any]] = {}


@dataclass(frozen=True)
class _Keyed(Generic[T, R]):
    """What a worker runs for :func:`map_chunks` with a cache: key the chunk, look the keys up in
    the cache's folder (read once per worker), compute the rest once per key. Picklable: its
    functions are module-level and the cache travels as its folder and codec."""

    fn: Callable[[list[T]], list[R]]
    keys: Callable[[list[T]], list[str]]
    encode: Callable[[R], Any]
    decode: Callable[[Any], R]
    skip: Callable[[T], bool] | None
    directory: Path | None
    codec: Codec[Any]

    def __call__(self, items: list[T]) -> _Done[R]:
        """In a worker: the chunk's results, its new values kept in this process and written as it
        exits (:func:`_keep`). They come back with the results instead for a cache kept in memory
        only, and where this is no worker process (no parent: the chunk was run in the caller's
        process, which writes them)."""
        known = self._on_disk()
        done = self.run(items, known)
        if self.directory is None or not done.keys or multiprocessing.parent_process() is None:
            return done
        _keep(self.directory, self.codec, done.keys, done.values)
        known.update(zip(done.keys, done.values, strict=True))  # this worker's later chunks find them
        return _Done(done.results, [], [])

    def _on_disk(self) -> dict[str, Any]:
        if self.directory is None:
            return {}
        slot = (os.getpid(), str(self.directory))
        if slot not in _READ:
            _READ[slot] = ShardedCache(self.directory, self.codec).known()
        return _READ[slot]

    def run(self, items: list[T], known: dict[str, Any]) -> _Done[R]:
        """The chunk's results, with ``known`` the values kept so far."""
        out: list[R | None] = [None] * len(items)
        live = range(len(items)) if self.skip is None else [i for i, x in enumerate(items) if not self.skip(x)]
        waiting: dict[str, list[int]] = {}  # key -> the positions awaiting its one computation
        for i, key in zip(live, self.keys([items[i] for i in live]), strict=True):
            if key in waiting:
                waiting[key].append(i)
            elif (stored := known.get(key)) is not None:
                out[i] = self.decode(stored)
            else:
                waiting[key] = [i]
        computed = self.fn([items[positions[0]] for positions in waiting.values()]) if waiting else []
        for positions, result in zip(waiting.values(), computed, strict=True):
            for i in positions:
                out[i] = result
        return _Done(out, list(waiting), [self.encode(result) for result in computed])


def in_background(fn: Callable[..., R], *args: Any, name: str = "pr1-analysis-background") -> Future[R]:
    """``fn(*args)`` on a daemon thread; its future (an exception is raised by ``result()``). For
    calls that mostly wait on other processes: a CPU-bound one would only take this process's GIL."""
    future: Future[R] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
