"""On-disk caches of per-text analysis results (path conclusions, equivalence verdicts, BLEU),
keyed by a hash of the text(s), so a second ``analyze`` of the same runs recomputes nothing.

Same design as :mod:`analysis.embed_cache` (the embeddings' cache): each analysis that computes
new values writes one new JSON shard atomically (temporary file, then rename), so concurrent
analyses never corrupt it; readers load every shard; many shards are merged into one. Each
shard is named by the sha256 of its bytes, checked when read; a damaged one (cut short, edited)
is dropped with a warning and its values computed again.

Why a *fingerprint* in the folder name: a cached value is only right for the code that computed
it. Each cache names the modules (and library versions) its values depend on; their hash
picks the folder, so editing e.g. the answer-line reader starts a fresh cache instead of serving
stale conclusions. Where: ``$PR1_ANALYSIS_CACHE``, else ``~/.cache/pr1-eval/analysis``;
``PR1_ANALYSIS_CACHE=off`` keeps values in memory only (one analysis).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from analysis.cache_check import drop_damaged, verified_bytes

CACHE_ENV = "PR1_ANALYSIS_CACHE"
#: Merge the shards into one when a write leaves more than this many.
MAX_SHARDS = 16


def hash_key(*texts: str) -> str:
    """The key of one text or an ordered tuple of texts: 128 bits of sha256, hex."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:32]


def fingerprint(modules: Iterable[str], packages: Iterable[str] = ()) -> str:
    """A short hash of the named modules' source bytes and the named packages' versions (found
    by import, so it works the same in a checkout and in an installed wheel)."""
    digest = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ValueError(f"result cache: module {name!r} not found (a cache names the modules its values depend on)")
        digest.update(name.encode())
        digest.update(Path(spec.origin).read_bytes())
    for name in packages:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}=={version}".encode())
    return digest.hexdigest()[:12]


def cache_root() -> Path | None:
    """The folder all result caches live under; ``None`` when caching is off."""
    base = os.environ.get(CACHE_ENV, "").strip()
    if base.lower() == "off":
        return None
    return Path(base).expanduser() if base else Path.home() / ".cache" / "pr1-eval" / "analysis"


class ResultCache:
    """JSON values by key, in ``<root>/<name>-<fingerprint>/``; ``directory=None``: memory only."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._values: dict[str, Any] | None = None
        self._new: dict[str, Any] = {}

    @classmethod
    def named(cls, name: str, sources: Iterable[str], packages: Iterable[str] = ()) -> ResultCache:
        """The cache ``name`` for the current code (see the module docstring for the location)."""
        root = cache_root()
        return cls(None if root is None else root / f"{name}-{fingerprint(sources, packages)}")

    def _load(self) -> dict[str, Any]:
        if self._values is None:
            self._values = {}
            for shard in self._shards():
                self._values.update(_read_shard(shard))
        return self._values

    def _shards(self) -> list[Path]:
        return sorted(self.directory.glob("shard-*.json")) if self.directory and self.directory.is_dir() else []

    def __len__(self) -> int:
        return len(self._load())

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self._load()

    def put(self, key: str, value: Any) -> None:
        """Remember ``value`` (written to disk by :meth:`flush`)."""
        self._load()[key] = value
        self._new[key] = value

    def flush(self) -> None:
        """Write the values added since the last flush as one atomic shard (merging when many)."""
        new, self._new = self._new, {}
        if self.directory is None or not new:
            return
        self._write_shard(new)
        shards = self._shards()
        if len(shards) > MAX_SHARDS:
            merged: dict[str, Any] = {}
            for shard in shards:
                merged.update(_read_shard(shard))
            self._write_shard(merged)
            for shard in shards:
                shard.unlink(missing_ok=True)

    def _write_shard(self, values: dict[str, Any]) -> None:
        assert self.directory is not None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # dumps, then one write: json.dump encodes in pure Python, piece by piece (5x slower)
            data = json.dumps({"keys": list(values), "values": list(values.values())},
                              separators=(",", ":")).encode("utf-8")
            with tempfile.NamedTemporaryFile("wb", dir=self.directory, suffix=".tmp", delete=False) as handle:
                handle.write(data)
            os.replace(handle.name, self.directory / f"shard-{hashlib.sha256(data).hexdigest()}.json")
        except OSError:  # a cache is only a cache: an unwritable folder costs the next run time, not this one
            return


def _read_shard(shard: Path) -> dict[str, Any]:
    """A shard's values by key; a damaged shard is dropped with a warning (its values are computed again)."""
    try:
        data = json.loads(verified_bytes(shard).decode("utf-8"))
        return dict(zip(data["keys"], data["values"], strict=True))
    except FileNotFoundError:
        return {}  # merged away by another analysis meanwhile
    except (OSError, ValueError, KeyError, TypeError) as exc:
        drop_damaged(shard, exc, "its values are computed again")
        return {}
