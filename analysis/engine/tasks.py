"""Work handed out now and collected later: the one way the analysis overlaps its steps.

Two shapes cover every overlap the analysis has:

- :func:`map_chunks`: a pure function of one item, mapped over many items in worker processes
  (:mod:`analysis.engine.workers`), chunked, in order, and optionally kept in a
  :class:`~analysis.engine.shards.ShardedCache` by a key of each item, so an item seen before (in
  this call or any earlier command) is never computed again. The chunks are sent as the items are
  keyed, so the workers start on the first while this process still keys the rest; a
  :class:`Pending` comes back at once.
- :func:`in_background`: a call that mostly waits on other processes (math-verify in the grading
  pool) made on a daemon thread, so this process builds other tables meanwhile; a
  :class:`~concurrent.futures.Future` comes back at once.

Results are the function's own, computed the same way wherever they ran (the equivalence tests
run each measure with and without workers and caches and compare). This module knows nothing of
what is computed: the measures (:mod:`analysis.structure.roles`, :mod:`analysis.diversity.bleu`, …) are plain
functions, and :mod:`analysis.pipeline.scheduled` says how each runs here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from analysis.engine.shards import ShardedCache
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


def map_chunks(fn: Callable[[list[T]], list[R]], items: Iterable[T], *, workers: Workers | None, chunk: int,
               cache: ShardedCache[Any] | None = None, key: Callable[[T], str] | None = None,
               encode: Callable[[R], Any] = lambda value: value, decode: Callable[[Any], R] = lambda value: value,
               skip: Callable[[T], bool] | None = None) -> Pending[list[R | None]]:
    """``fn`` over ``items`` (one result per item, in order), begun now (see the module docstring).

    ``fn``: a module-level function of a list of items (picklable, as the workers need), returning
    one result per item. ``chunk``: items per call, enough that pickling them is a small part of
    the work. ``cache`` with ``key``: results kept by key (``encode``/``decode`` to and from the
    cache's values), and an item whose key was seen earlier in ``items`` computed once. ``skip``:
    items whose result is ``None`` without calling ``fn``. With no ``workers``, or when every item
    fits one chunk, the chunks run in this process when the result is asked for."""
    listed = list(items)
    out: list[R | None] = [None] * len(listed)
    known: dict[str, R] = {}
    waiting: dict[str, list[int]] = {}  # key -> the positions awaiting its one computation
    todo: list[list[int]] = []
    sending: Chunked[T, R] = Chunked(workers, fn, chunk)
    for i, item in enumerate(listed):
        if skip is not None and skip(item):
            continue
        if cache is None or key is None:
            todo.append([i])
            sending.add(item)
            continue
        k = key(item)
        if k in known:
            out[i] = known[k]
        elif k in waiting:
            waiting[k].append(i)
        elif (stored := cache.get(k)) is not None:
            out[i] = known[k] = decode(stored)
        else:
            waiting[k] = [i]
            todo.append(waiting[k])
            sending.add(item)
    sending.close()

    def collect() -> list[R | None]:
        keys = iter(waiting)
        for positions, result in zip(todo, sending.results(), strict=True):
            for i in positions:
                out[i] = result
            if cache is not None and key is not None:
                cache.put(next(keys), encode(result))
        if cache is not None:
            cache.flush()
        return out

    return Pending(collect)


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
