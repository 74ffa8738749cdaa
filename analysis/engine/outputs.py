"""A finished ``analyze`` kept whole, keyed by everything its outputs derive from, so analysing
the same runs again costs a few file copies instead of the analysis.

Why whole outputs, and why here (before pandas is imported): a second ``analyze`` of unchanged
runs must cost about what reading the responses once costs, and merely importing the analysis
stack (pandas, scipy, plotly, math-verify) costs more than that; so is writing the blocks and
pairs tables again. The per-text caches (:mod:`analysis.engine.shards`) make
a run whose inputs changed cheap; this one makes an unchanged one nearly free.

The key (:func:`inputs_key`) is conservative: the arguments as given (and the working folder they
are read from), the name, size, modification time and inode of every file at or below each
argument (every ``run.json`` and samples part among them, so an appended, regraded or rewritten
run changes it), of the top-level files of each run's local model folder (its tokenizer gives
token lengths), the source of every module of ``analysis`` and ``pr1_eval``, the versions of the
installed libraries (name and version), and the options. A change anywhere gives a new key and a fresh
analysis; an entry never answers for inputs it was not computed from. Only analyses without
embeddings are kept whole (with embeddings, the document reports what the model encoded).

Where: ``<analysis cache>/outputs`` (:mod:`analysis.engine.cache`; ``off`` disables it); the newest
:data:`KEEP` entries are kept. An entry is written aside and renamed into place, and each file's
size and sha256, and the sha256 of the entry's own record (the ``--json`` document, the printed
tables), are checked before it is used: a damaged or edited entry is dropped with a warning and
the analysis computed again, never served. The record holds the key the entry was written for,
checked against the key it is looked up by: an entry folder copied over another's (a sync tool, a
backup restored by hand, two machines sharing a cache) is whole and checks out by its sums, but
answers other inputs, and is dropped the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.engine.cache import cache_folder, drop_damaged, fingerprint

#: Bump when what an entry holds changes.
FORMAT = 3
#: Entries kept (each holds one analysis's tables and figures).
KEEP = 3
#: The packages whose source is part of the key: every number comes from their code.
CODE_PACKAGES = ("analysis", "pr1_eval")
_META = "entry.json"


@dataclass(frozen=True)
class Entry:
    """A kept analysis: the files it wrote to ``--out`` (names), the ``--json`` document, the
    table view it printed without ``--json``, its warnings, its summary line and exit status."""

    files: list[str]
    document: dict[str, Any]
    tables_text: str
    warnings: list[str]
    summary: str
    status: int


def _stat_line(path: Path) -> list[Any] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def _tree(root: Path, skip: Path | None = None) -> list[Any]:
    """Every entry at or below ``root``: files with their stat, folders by name (links to folders
    are not followed, as run discovery does not follow them; the samples folder of a run is).
    ``skip``: a folder left out (the analysis's own ``--out``, which holds no run)."""
    lines: list[Any] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if skip is None or Path(folder, d) != skip)
        base = Path(folder)
        if "run.json" in files and "samples.parquet" in dirs and (base / "samples.parquet").is_symlink():
            files = [*files, *(f"samples.parquet/{p.name}" for p in (base / "samples.parquet").iterdir())]
        for name in sorted(files):
            lines.append([str(base / name), _stat_line(base / name)])
        lines.extend([str(base / name), "dir"] for name in dirs)
    return lines


def _model_folders(tree: list[Any]) -> list[Any]:
    """The top-level files of the local model folder each ``run.json`` names (its tokenizer)."""
    lines: list[Any] = []
    for path, _ in tree:
        if not str(path).endswith("/run.json"):
            continue
        try:
            model = (json.loads(Path(path).read_text(encoding="utf-8")).get("model") or {}).get("path")
        except (OSError, ValueError, AttributeError, RecursionError):  # damaged: the loader names it
            continue
        folder = Path(str(model)).expanduser() if isinstance(model, str) and model else None
        if folder is not None and folder.is_dir():
            lines.extend([str(f), _stat_line(f)] for f in sorted(folder.iterdir()) if f.is_file())
    return lines


def code_fingerprint() -> str:
    """The fingerprint (:func:`~analysis.engine.cache.fingerprint`) of every module's source in
    :data:`CODE_PACKAGES` and of every installed distribution's name and version: an edit or an
    upgrade of any library misses."""
    return fingerprint(CODE_PACKAGES, ["*"])


def inputs_key(runs: Sequence[str], options: dict[str, Any], out: Path | None = None) -> str:
    """The key of an analysis of ``runs`` (as given on the command line) with ``options``; the
    files of ``out`` (where it writes) are not part of it, even when ``out`` lies below a run folder
    argument (a folder holding no ``run.json`` is not a run, and it is skipped only when it holds none)."""
    items: list[Any] = [FORMAT, os.getcwd(), sorted(options.items()), code_fingerprint()]
    skip = out.expanduser().resolve() if out is not None and not (out / "run.json").exists() else None
    for arg in runs:
        path = Path(arg).expanduser()
        tree = _tree(path.resolve(), skip) if path.is_dir() else []
        items.append([arg, str(path.resolve()), "dir" if path.is_dir() else _stat_line(path), tree,
                      _model_folders(tree)])
    return hashlib.sha256(json.dumps(items, default=str).encode()).hexdigest()[:32]


def _folder() -> Path | None:
    root = cache_folder("analysis")
    return None if root is None else root / "outputs"


def lookup(key: str) -> tuple[Path, Entry] | None:
    """The entry kept under ``key`` and its folder, or ``None`` (absent, off, or damaged)."""
    folder = _folder()
    entry_dir = None if folder is None else folder / key
    if entry_dir is None or not (entry_dir / _META).is_file():
        return None
    try:
        meta = json.loads((entry_dir / _META).read_text(encoding="utf-8"))
        if _digest(json.dumps(meta["body"], sort_keys=True).encode()) != meta["sha256"]:
            raise ValueError("its record was changed after it was written")
        body = dict(meta["body"])
        if body.pop("key") != key:
            raise ValueError("it was written for other inputs (copied or restored from another analysis)")
        sums: dict[str, str] = body.pop("sha256")
        entry = Entry(**body)
        if set(sums) != set(entry.files):
            raise ValueError("its record and its files disagree")
        for name, digest in sums.items():
            if _file_digest(entry_dir / name) != digest:
                raise ValueError(f"{name} was changed after it was written")
    except (OSError, ValueError, TypeError, KeyError) as exc:
        drop_damaged(entry_dir, exc, "the analysis is computed again")
        return None
    return entry_dir, entry


def restore(entry_dir: Path, entry: Entry, out: Path) -> None:
    """Copy the entry's files into ``out`` (each written aside, then renamed into place)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in entry.files:
        temporary = out / f".{name}.{uuid.uuid4().hex}.tmp"
        shutil.copyfile(entry_dir / name, temporary)
        os.replace(temporary, out / name)
    os.utime(entry_dir / _META)  # the entry was used: the newest are the ones kept


def store(key: str, out: Path, files: Iterable[Path], entry: Entry) -> None:
    """Keep the analysis just written to ``out`` under ``key`` (a failure to write costs only time)."""
    folder = _folder()
    if folder is None:
        return
    names = [Path(f).name for f in files]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folder))
        largest_first = sorted(names, key=lambda n: -(out / n).stat().st_size)
        with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 1))) as pool:
            sums = dict(zip(largest_first, pool.map(lambda n: _keep_file(out / n, staging / n), largest_first),
                            strict=True))
        body = {**entry.__dict__, "files": names, "sha256": {n: sums[n] for n in names}, "key": key}
        meta = {"body": body, "sha256": _digest(json.dumps(body, sort_keys=True).encode())}
        (staging / _META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        target = folder / key
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
        _prune(folder)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True) if "staging" in locals() else None
        return


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _keep_file(source: Path, target: Path) -> str:
    """``source`` kept at ``target`` and the sha256 of its bytes: a hard link where the file system
    allows one, else a copy (:func:`_copy_with_digest`).

    Why a link: the copy wrote the analysis' 380 MB a second time at the very end of a sweep's
    ``analyze``, a quarter of a second of CPU with nothing left to overlap it. Why it is safe:
    every output is written aside and renamed into place (:func:`pr1_eval.store.safe_write.atomic_output`),
    so a later analysis into the same folder replaces the output's file, not the kept one; and a
    file edited in place afterwards (shared with the entry) no longer matches the sum recorded here,
    so :func:`lookup` drops the entry and the analysis is computed again, as for any damaged entry."""
    try:
        os.link(source, target)
    except OSError:  # another file system, links not supported or too many: copy
        return _copy_with_digest(source, target)
    return _file_digest(target)


def _copy_with_digest(source: Path, target: Path) -> str:
    """Copy ``source`` to ``target`` and return the sha256 of the bytes written, reading them once.
    Why: an analysis of a sweep writes some 380 MB (the blocks' CSV alone 255 MB); copying, then
    reading the copy back to hash it, was a third of a second after everything else had finished.
    :func:`store` runs one of these per file on a thread each (hashlib and file I/O release the
    GIL), the largest first."""
    digest = hashlib.sha256()
    with open(source, "rb") as reading, open(target, "wb") as writing:
        for block in iter(lambda: reading.read(1 << 20), b""):
            writing.write(block)
            digest.update(block)
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _prune(folder: Path) -> None:
    """Drop all but the :data:`KEEP` most recently used entries, and stray staging folders."""
    entries = [d for d in folder.iterdir() if d.is_dir() and (d / _META).is_file()]
    entries.sort(key=lambda d: (d / _META).stat().st_mtime_ns, reverse=True)
    for old in entries[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
