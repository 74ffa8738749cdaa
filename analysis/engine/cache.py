"""Where the analysis keeps what it computed, and when a kept value may be trusted again.

**One root.** Every cache lives under ``$PR1_CACHE`` (default ``~/.cache/pr1-eval``), one folder
per kind (:data:`KINDS`): ``loader/`` the parsed blocks of each run (:mod:`analysis.engine.frames`),
``embeddings/`` sentence vectors per model and ``analysis/`` per-text results (conclusions,
verdicts, BLEU; both :mod:`analysis.engine.shards`) with ``analysis/outputs/`` whole analyses
(:mod:`analysis.engine.outputs`). ``PR1_CACHE=off`` turns them all off (values are then kept in
memory for one command). The names each cache had before are read as aliases and win for their
own kind: ``PR1_LOADER_CACHE``, ``PR1_EMBED_CACHE``, ``PR1_ANALYSIS_CACHE`` (a folder, or ``off``).
Run folders are never written to: they may be read-only, shared or checksummed.

**One fingerprint rule** (:func:`fingerprint`). A kept value is right only for the code and the
libraries that computed it, so each cache names what its values depend on: modules or whole
packages (their source bytes) and libraries (their installed versions; ``*`` for every installed
distribution). The hash of those picks the folder or the key, so editing e.g. the answer-line
reader starts a fresh cache instead of serving stale conclusions.

**One way to write** (:func:`write_aside`, :func:`write_shard`). A file is written beside its
place and renamed into it, so a reader sees all of it or none, two commands writing at once never
corrupt each other, and a killed one leaves at most a stray temporary file. A cache is only a
cache: a full disk or a read-only folder costs the next command time, never this one its result.

**Healing** (:func:`verified_bytes`, :func:`drop_damaged`). A shard is named by the sha256 of its
bytes (``shard-<sha256>.<ext>``), so the check needs no second file that could be lost or disagree;
a damaged entry (cut short, edited) is dropped with a warning and computed again, never served and
never a reason for a later command to fail.

This module needs the standard library only: :mod:`analysis.engine.outputs` is asked before
anything heavy is imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from contextlib import suppress
from importlib import metadata
from pathlib import Path
from typing import BinaryIO, cast

from pr1_eval.output_paths import temporary_in

ROOT_ENV = "PR1_CACHE"
#: Each kind of cache: its folder under the root, and the older variable read as its alias.
KINDS = {"loader": "PR1_LOADER_CACHE", "embeddings": "PR1_EMBED_CACHE", "analysis": "PR1_ANALYSIS_CACHE"}
_OFF = frozenset({"off", "0", "false", "no"})


def cache_folder(kind: str) -> Path | None:
    """The folder of one kind of cache (:data:`KINDS`), or ``None`` when caching is off for it."""
    alias = os.environ.get(KINDS[kind], "").strip()
    if alias:
        return None if alias.lower() in _OFF else Path(alias).expanduser()
    root = os.environ.get(ROOT_ENV, "").strip()
    if root.lower() in _OFF:
        return None
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "pr1-eval") / kind


def fingerprint(sources: Iterable[str], libraries: Iterable[str] = ()) -> str:
    """16 hex digits of sha256 over the named code and libraries (see the module docstring).

    ``sources``: module or package names, found by import (the same in a checkout and in an
    installed wheel); a package counts every ``.py`` file below it, by relative path and bytes.
    ``libraries``: distribution names, by installed version (``absent`` when not installed);
    ``*`` stands for the name of every distribution installed on ``sys.path`` (one listing per
    folder, where asking each library its version would scan them all)."""
    digest = hashlib.sha256()
    for name in sources:
        spec = importlib.util.find_spec(name)
        if spec is None or (spec.origin is None and not spec.submodule_search_locations):
            raise ValueError(f"cache fingerprint: module {name!r} not found (a cache names the code its values "
                             "depend on); reinstall pr1-eval")
        digest.update(name.encode())
        for location in spec.submodule_search_locations or []:
            for path in sorted(Path(location).rglob("*.py")):
                digest.update(str(path.relative_to(location)).encode())
                digest.update(path.read_bytes())
        if not spec.submodule_search_locations and spec.origin is not None:
            digest.update(Path(spec.origin).read_bytes())
    for name in libraries:
        if name == "*":
            _all_distributions(digest)
            continue
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}=={version}".encode())
    return digest.hexdigest()[:16]


def _all_distributions(digest: hashlib._Hash) -> None:
    for entry in sys.path:
        if os.path.isdir(entry):
            digest.update(entry.encode())
            for name in sorted(os.listdir(entry)):
                if name.endswith((".dist-info", ".egg-info")):
                    digest.update(name.encode())


def write_aside(path: Path, write: Callable[[BinaryIO], object], sync: bool = False) -> bool:
    """``write(handle)`` into a temporary file beside ``path``, then renamed into place; whether it
    was. A failure (full disk, read-only folder, a value the writer refuses) leaves no stray file:
    the temporary file is removed whatever failed, its close included (a full disk often surfaces
    only there). A kill leaves ``.NAME.PID-XXXX.tmp``, which the next write in that folder removes
    (:func:`pr1_eval.store.safe_write.remove_stale_temporaries`)."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temporary_in(path.parent, path.name)
        with os.fdopen(fd, "wb") as handle:
            write(cast(BinaryIO, handle))
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        return True
    except BaseException as exc:
        if tmp is not None:
            with suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, (OSError, ValueError, TypeError)):
            return False
        raise


def write_shard(directory: Path, data: bytes, suffix: str, sync: bool = False) -> Path | None:
    """``data`` as ``directory/shard-<sha256 of data>.<suffix>`` (:func:`write_aside`; ``sync``:
    flushed to the disk before the rename); ``None`` when it could not be written."""
    path = directory / f"shard-{hashlib.sha256(data).hexdigest()}.{suffix}"
    return path if write_aside(path, lambda handle: handle.write(data), sync=sync) else None


def verified_bytes(path: Path) -> bytes:
    """The bytes of a cache file named ``<prefix>-<sha256 of its bytes>.<ext>``, checked against
    its name (ValueError when they differ). A name without a 64-digit digest is read unchecked."""
    data = path.read_bytes()
    digest = path.stem.rpartition("-")[2]
    checked = len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
    if checked and hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"checksum mismatch ({len(data)} bytes, not the ones it was written with)")
    return data


def drop_damaged(path: Path, exc: BaseException, then: str) -> None:
    """A cache entry is damaged: say so (a warning on stderr, never an error) and remove it, so the
    value is computed again and the cache heals instead of failing every later command."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    print(f"warning: cache entry {path} is damaged ({reason}); dropped, {then}", file=sys.stderr)
    with suppress(OSError):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
