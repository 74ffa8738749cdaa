"""map_chunks with a cache: the workers key the items and look them up on disk, chunk by chunk,
and the results are those of the plain function, in order, each distinct item computed once."""

from __future__ import annotations

import os
from concurrent.futures import Future
from pathlib import Path

import pytest

from analysis.engine.shards import ResultCache, hash_key
from analysis.engine.tasks import map_chunks
from analysis.engine.workers import Chunked, analysis_workers


def _lengths(items: list[str]) -> list[tuple[int, int]]:
    """Each text's length, and the process that measured it."""
    return [(len(item), os.getpid()) for item in items]


def _keys(items: list[str]) -> list[str]:
    return [hash_key(item) for item in items]


def _length(value: tuple[int, int]) -> int:
    return value[0]


def _from_cache(value: int) -> tuple[int, int]:
    return (value, -1)  # -1: read from the cache, computed by no process


def test_each_worker_writes_the_values_it_computed_as_it_exits(tmp_path: Path) -> None:
    """The workers keep the new values they computed (none travel back with the results) and each
    writes its own to the cache as it exits: nothing is on disk while they run, every distinct
    item is once the workers are stopped, in a shard per worker that computed some."""
    items = [f"t{i}" * (1 + i % 3) for i in range(60)]
    with analysis_workers(2) as workers:
        pending = map_chunks(_lengths, items, workers=workers, chunk=4, cache=ResultCache(tmp_path), keys=_keys,
                             encode=_length, decode=_from_cache)
        results = pending.result()
        assert [r[0] for r in results] == [len(i) for i in items]  # type: ignore[index]
        assert list(tmp_path.iterdir()) == []
        computed_by = {r[1] for r in results}  # type: ignore[index]
    assert os.getpid() not in computed_by
    shards = sorted(tmp_path.glob("shard-*.json"))
    assert 1 <= len(shards) == len(computed_by) <= 2
    stored = ResultCache(tmp_path)
    assert {k: stored.get(k) for k in map(hash_key, items)} == {hash_key(i): len(i) for i in items}


def test_values_computed_in_the_caller_s_process_are_written_by_it(tmp_path: Path) -> None:
    """A chunk run in this very process (workers that run what they are handed at once) gives its
    values back, and ``map_chunks`` writes them when the results are collected."""
    workers = _Recording()
    items = [f"t{i}" for i in range(5)]
    results = map_chunks(_lengths, items, workers=workers, chunk=2, cache=ResultCache(tmp_path),  # type: ignore[arg-type]
                         keys=_keys, encode=_length, decode=_from_cache).result()
    assert [r[0] for r in results] == [2] * 5 and len(workers.submitted) == 3  # type: ignore[index]
    assert {hash_key(i): 2 for i in items} == {k: ResultCache(tmp_path).get(k) for k in map(hash_key, items)}


def _is_blank(item: str) -> bool:
    return not item.strip()


def test_the_workers_look_keys_up_on_disk_and_compute_the_rest_once(tmp_path: Path) -> None:
    items = [f"text {i % 37}" + "x" * (i % 5) for i in range(400)] + ["", " "]
    distinct = list(dict.fromkeys(items))
    seeded = ResultCache(tmp_path)
    seeded.put(hash_key("text 3"), 999)  # a value only the cache knows: served, never computed again
    seeded.flush()
    with analysis_workers(2) as workers:
        results = map_chunks(_lengths, items, workers=workers, chunk=16, cache=ResultCache(tmp_path), keys=_keys,
                             encode=_length, decode=_from_cache, skip=_is_blank).result()
    assert len(results) == len(items) and results[-2:] == [None, None]  # blank: skipped, None
    for item, result in zip(items[:-2], results[:-2], strict=True):
        assert result is not None
        assert result == (999, -1) if item == "text 3" else result[0] == len(item) and result[1] not in (-1, os.getpid())
    stored = ResultCache(tmp_path)  # from disk: every distinct non-blank item, once
    assert len(stored) == len(distinct) - 2
    assert stored.get(hash_key("text 10x")) == len("text 10x")
    again = map_chunks(_lengths, items, workers=None, chunk=16, cache=stored, keys=_keys, encode=_length,
                       decode=_from_cache, skip=_is_blank).result()
    assert again[:-2] == [(len(item) if item != "text 3" else 999, -1) for item in items[:-2]]  # all from the cache


def test_without_a_cache_every_item_is_computed_in_order() -> None:
    items = [str(i) * (i % 4) for i in range(100)]
    with analysis_workers(2) as workers:
        results = map_chunks(_lengths, items, workers=workers, chunk=7, skip=_is_blank).result()
    assert [r if r is None else r[0] for r in results] == [len(i) if i.strip() else None for i in items]


def test_extend_hands_out_the_chunks_add_would() -> None:
    with analysis_workers(2) as workers:
        chunks: Chunked[str, tuple[int, int]] = Chunked(workers, _lengths, 10)
        chunks.extend(["a"] * 5)
        chunks.extend(["bb"] * 23)  # 28 items: two full chunks out, 8 waiting
        assert len(chunks._futures) == 2
        done = chunks.chunks()
    assert [len(part) for part in done] == [10, 10, 8]
    assert [length for part in done for length, _ in part] == [1] * 5 + [2] * 23


class _Recording:
    """Workers that run each submitted call at once and note what was submitted, in order."""

    size = 2

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, fn: object, items: list[str]) -> Future[object]:
        self.submitted.append(items[0])
        done: Future[object] = Future()
        done.set_result(fn(items))  # type: ignore[operator]
        return done


def test_every_chunk_is_out_before_map_chunks_returns(tmp_path: Path) -> None:
    """The last, short chunk of one call goes out before work submitted after it: the workers
    take chunks in order, and a chunk held back until its result was asked for waited behind
    everything submitted meanwhile (analyze's conclusions behind every BLEU batch)."""
    workers = _Recording()
    first = map_chunks(_lengths, [f"a{i}" for i in range(5)], workers=workers, chunk=2,  # type: ignore[arg-type]
                       cache=ResultCache(tmp_path / "a"), keys=_keys, encode=_length, decode=_from_cache)
    second = map_chunks(_lengths, [f"b{i}" for i in range(3)], workers=workers, chunk=2)  # type: ignore[arg-type]
    assert workers.submitted == ["a0", "a2", "a4", "b0", "b2"]  # a4 (the short chunk) before any b
    assert [r[0] for r in first.result()] == [2] * 5 and [r[0] for r in second.result()] == [2] * 3  # type: ignore[index]
    assert len(workers.submitted) == 5  # nothing more handed out when the results were collected


def _refuse(cache: str, keys: list[str], values: list[object]) -> bytes:
    raise RuntimeError("the encoder broke")


def test_a_worker_that_cannot_write_its_values_says_so_and_goes_on(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The values a worker kept go to disk as it exits, each cache's alone; one that fails to be
    written is said on stderr and fails nothing (its values are computed again), another
    process's are not this one's to write."""
    from analysis.engine import tasks
    from analysis.engine.shards import JSON, Codec

    broken: Codec[object] = Codec("json", _refuse, JSON.decode)
    good = tmp_path / "good"
    tasks._KEPT[(os.getpid(), str(tmp_path / "broken"))] = (broken, {"k": 1})
    tasks._KEPT[(os.getpid(), str(good))] = (JSON, {"k": 2})
    tasks._KEPT[(os.getpid() + 1, str(good))] = (JSON, {"other": 3})
    try:
        tasks._write_kept()
    finally:
        leftover = dict(tasks._KEPT)
        tasks._KEPT.clear()
    assert "could not write its cache values" in capsys.readouterr().err
    assert ResultCache(good).get("k") == 2 and ResultCache(good).get("other") is None
    assert list(leftover) == [(os.getpid() + 1, str(good))]
