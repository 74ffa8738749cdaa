"""Values by key on disk, in shards: the per-text results (conclusions, verdicts, BLEU) and the
sentence embeddings, so a second ``analyze`` of the same texts computes nothing again.

Why shards: each command that computes new values writes them as one new shard (written aside
and renamed, named by its checksum: :mod:`analysis.engine.cache`), never rewriting a shared file,
so two analyses at once never corrupt the cache and a killed one loses only its own new values.
Readers load every shard; when more than ``max_shards`` pile up they are merged into one (a shard
another command writes meanwhile is not listed, so it survives). A damaged shard is dropped with a
warning and its values computed again, and so is one that records another cache folder than the
one it lies in (copied from the cache of another model or of other code: whole, its checksum right,
but its values computed by something else). Shards written before shards recorded their folder are
read as before (dropping them would cost hours of embeddings); a merge rewrites them with it.

One codec per kind of value: :data:`JSON` (any JSON value: conclusions, verdicts, scores) and
:data:`VECTORS` (float32 rows in ``.npz``, the embeddings). Keys are hex strings (:func:`hash_key`).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from analysis.engine.cache import cache_folder, drop_damaged, fingerprint, verified_bytes, write_shard

V = TypeVar("V")


def hash_key(*texts: str) -> str:
    """The key of one text or an ordered tuple of texts: 128 bits of sha256, hex."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:32]


def text_key(text: str) -> str:
    """The key of an embedded text: the full sha256 of its UTF-8 bytes, hex (the embeddings'
    keys since their first cache, kept so existing vectors are found)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Codec(Generic[V]):
    """How one kind of value is written to a shard and read back (``suffix``: the file extension).
    ``encode(cache, keys, values)`` records ``cache``, the name of the folder the shard is written
    to; ``decode`` gives it back (``None`` for a shard written before shards recorded it)."""

    suffix: str
    encode: Callable[[str, list[str], list[V]], bytes]
    decode: Callable[[bytes], tuple[str | None, dict[str, V]]]


def _json_encode(cache: str, keys: list[str], values: list[Any]) -> bytes:
    # dumps, then one write: json.dump encodes in pure Python, piece by piece (5x slower)
    return json.dumps({"cache": cache, "keys": keys, "values": values}, separators=(",", ":")).encode("utf-8")


def _json_decode(data: bytes) -> tuple[str | None, dict[str, Any]]:
    loaded = json.loads(data.decode("utf-8"))
    return loaded.get("cache"), dict(zip(loaded["keys"], loaded["values"], strict=True))


def _vectors_encode(cache: str, keys: list[str], values: list[np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, cache=np.asarray(cache), keys=np.asarray(keys),
             vectors=np.asarray(np.stack(values), dtype=np.float32))
    return buffer.getvalue()


def _vectors_decode(data: bytes) -> tuple[str | None, dict[str, np.ndarray]]:
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        cache = str(arrays["cache"]) if "cache" in arrays.files else None
        return cache, dict(zip(arrays["keys"].tolist(), arrays["vectors"], strict=True))


JSON: Codec[Any] = Codec("json", _json_encode, _json_decode)
VECTORS: Codec[np.ndarray] = Codec("npz", _vectors_encode, _vectors_decode)


class ShardedCache(Generic[V]):
    """Values by key in ``directory`` (``None``: memory only, for one command), one codec."""

    def __init__(self, directory: Path | None, codec: Codec[V], max_shards: int = 16, sync: bool = False) -> None:
        self.directory = directory
        self.codec = codec
        self.max_shards = max_shards
        self.sync = sync
        self._values: dict[str, V] | None = None
        self._new: dict[str, V] = {}

    def _load(self) -> dict[str, V]:
        if self._values is None:
            self._values = {}
            for shard in self._shards():
                self._values.update(self._read(shard))
            self._values.update(self._new)  # put_many's values not yet flushed
        return self._values

    def _shards(self) -> list[Path]:
        if self.directory is None or not self.directory.is_dir():
            return []
        return sorted(self.directory.glob(f"shard-*.{self.codec.suffix}"))

    def _read(self, shard: Path) -> dict[str, V]:
        """A shard's values; a damaged one is dropped with a warning (its values are computed again)."""
        try:
            cache, values = self.codec.decode(verified_bytes(shard))
            if cache is not None and cache != shard.parent.name:
                raise ValueError(f"it was written for the cache {cache!r}, not {shard.parent.name!r} "
                                 "(copied from another cache folder)")
            return values
        except FileNotFoundError:
            return {}  # merged away by another command meanwhile: its values are in the merged shard
        except Exception as exc:  # noqa: BLE001 - json, numpy and zipfile raise many kinds for a damaged file
            drop_damaged(shard, exc, "its values are computed again")
            return {}

    def __len__(self) -> int:
        return len(self._load())

    def __contains__(self, key: str) -> bool:
        return key in self._load()

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def lookup(self, keys: Iterable[str]) -> dict[str, V]:
        """The known values among ``keys``."""
        values = self._load()
        return {k: values[k] for k in keys if k in values}

    def put(self, key: str, value: V) -> None:
        """Remember ``value`` (written to disk by :meth:`flush`)."""
        self._load()[key] = value
        self._new[key] = value

    def put_many(self, keys: list[str], values: list[V]) -> None:
        """Remember each ``values[i]`` by ``keys[i]`` (written to disk by :meth:`flush`), without
        reading the shards on disk first when nothing has read them yet: the workers of
        :func:`analysis.engine.tasks.map_chunks` looked the keys up and computed only the new ones."""
        self._new.update(zip(keys, values, strict=True))
        if self._values is not None or self.directory is None:
            self._load().update(zip(keys, values, strict=True))

    def known(self) -> dict[str, V]:
        """Every value kept (read from disk once): a mapping to look keys up in, not to change."""
        return self._load()

    def flush(self) -> None:
        """Write the values added since the last flush as one shard, merging when many."""
        new, self._new = self._new, {}
        if self.directory is None or not new:
            return
        if write_shard(self.directory, self.codec.encode(self.directory.name, list(new), list(new.values())), self.codec.suffix,
                       self.sync) is None:
            return
        shards = self._shards()
        if len(shards) > self.max_shards:
            merged: dict[str, V] = {}
            for shard in shards:
                merged.update(self._read(shard))
            if write_shard(self.directory, self.codec.encode(self.directory.name, list(merged), list(merged.values())),
                           self.codec.suffix, self.sync) is not None:
                for shard in shards:
                    shard.unlink(missing_ok=True)


class ResultCache(ShardedCache[Any]):
    """JSON values by key, in ``<analysis cache>/<name>-<fingerprint>/``; ``directory=None``: memory only."""

    def __init__(self, directory: Path | None) -> None:
        super().__init__(directory, JSON, max_shards=16)

    @classmethod
    def named(cls, name: str, sources: Iterable[str], libraries: Iterable[str] = ()) -> ResultCache:
        """The cache ``name`` for the current code (:func:`~analysis.engine.cache.fingerprint` of
        ``sources`` and ``libraries``), under the ``analysis`` cache folder."""
        root = cache_folder("analysis")
        return cls(None if root is None else root / f"{name}-{fingerprint(sources, libraries)}")


class EmbeddingCache(ShardedCache[np.ndarray]):
    """Vectors by :func:`text_key`, in ``<embeddings cache>/<model folder>``; ``None``: memory only.
    Shards are synced to the disk: each holds minutes of model time, where a result shard holds
    seconds of CPU that a lost one costs again."""

    def __init__(self, directory: Path | None) -> None:
        super().__init__(directory, VECTORS, max_shards=32, sync=True)

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        """Store new vectors, on disk at once (one shard): an embedding run of hours keeps what it did."""
        for key, vector in zip(keys, vectors, strict=True):
            self.put(key, vector)
        self.flush()
