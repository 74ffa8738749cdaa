"""Sidecar cache of a run's parsed blocks (what :func:`analysis.loader.parse_blocks` returns).

Why: parsing every stored response to find its paths, and extracting each path's answer, is
most of the cost of loading a large run, and the same runs are loaded over and over (the
dashboard after every restart, notebooks, ``analyze``). The cache holds one parquet file per
run, keyed by the run's path, its file signature (size, mtime and inode of run.json and of every
samples part) and the source of the code that produced it (the structure parser, the answer
extractor and the loader), so an appended, regraded or rewritten run, or a changed parser, is
never served stale. Parquet, never pickle: a cache file is data, not code.

Where: ``$PR1_LOADER_CACHE``, else ``~/.cache/pr1-eval/loader``; ``PR1_LOADER_CACHE=off``
disables it. Run directories are never written to (they may be read-only, shared or
checksummed). A cache is only a cache: an unwritable one is ignored, and a killed write leaves at
most a stray temporary file (written aside, then renamed into place). Entries are written with
parquet page checksums and read with them verified; a damaged entry is dropped with a warning
and the run parsed again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.cache_check import drop_damaged

CACHE_ENV = "PR1_LOADER_CACHE"
#: Arrow types of the cached columns (the loader's PARSED_COLUMNS, in order).
SCHEMA = pa.schema([
    ("task", pa.string()), ("problem_id", pa.string()), ("sample_idx", pa.int64()), ("block_idx", pa.int64()),
    ("n_paths", pa.int64()), ("closed", pa.bool_()), ("char_start", pa.int64()), ("char_end", pa.int64()),
    ("token_start", pa.int64()), ("token_end", pa.int64()), ("rel_start", pa.float64()),
    ("position_unit", pa.string()), ("path_texts", pa.list_(pa.string())), ("path_char_lengths", pa.list_(pa.int64())),
    ("summary_char_length", pa.int64()), ("path_answers", pa.list_(pa.string())),
    ("path_answer_sources", pa.list_(pa.string())), ("summary_text", pa.string()),
])
#: dtypes of the parsed frame, identical with and without the cache. Every other column holds
#: Python objects (strings, lists, and ints that are None when unknown), as the loader always gave.
DTYPES: dict[str, str] = {"sample_idx": "int64", "block_idx": "int64", "n_paths": "int64", "char_start": "int64",
                          "char_end": "int64", "rel_start": "float64", "closed": "bool"}
_MISMATCHED_KEY = b"pr1_mismatched"


def cache_dir() -> Path | None:
    """The cache folder, or ``None`` when ``PR1_LOADER_CACHE=off``."""
    value = os.environ.get(CACHE_ENV)
    if value is not None and value.strip().lower() in ("off", "0", "false", "no"):
        return None
    return Path(value).expanduser() if value else Path.home() / ".cache" / "pr1-eval" / "loader"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the source that decides what a parsed block is (parser, extractor, loader).

    The files are found with ``find_spec``, not imported: the loader imports this module, and
    hashing its source must not need it loaded."""
    digest = hashlib.sha256()
    # answer_text decides how an answer line is read, so a change there changes path_answers too.
    for name in ("pr1_eval.protocol.parse", "pr1_eval.protocol.scan", "pr1_eval.grading.extract", "pr1_eval.grading.answer_text", "analysis.loader"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"cannot find the source of {name} to version the block cache; reinstall pr1-eval")
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:16]


def _entry(run_dir: Path, signature: Any) -> tuple[Path, str] | None:
    """The cache file for this run state, and the prefix shared by every state of the run."""
    directory = cache_dir()
    if directory is None:
        return None
    run_key = hashlib.sha256(str(run_dir).encode()).hexdigest()[:16]
    state_key = hashlib.sha256(json.dumps([code_version(), signature]).encode()).hexdigest()[:16]
    return directory / f"{run_key}-{state_key}.parquet", run_key


def read(run_dir: Path, signature: Any) -> tuple[pd.DataFrame, int] | None:
    """The cached parse of this exact run state and its mismatch count, or ``None``."""
    entry = _entry(run_dir, signature)
    if entry is None or not entry[0].is_file():
        return None
    try:
        table = pq.read_table(entry[0], page_checksum_verification=True)
        if table.schema.remove_metadata() != SCHEMA:
            return None
        mismatched = int((table.schema.metadata or {}).get(_MISMATCHED_KEY, b"0"))
        columns = {name: (table.column(name).to_numpy() if name in DTYPES else table.column(name).to_pylist())
                   for name in SCHEMA.names}
    except (OSError, ValueError, pa.ArrowException) as exc:
        drop_damaged(entry[0], exc, "the run's blocks are parsed again")
        return None
    frame = pd.DataFrame({name: values if name in DTYPES else pd.Series(values, dtype=object)
                          for name, values in columns.items()}, columns=list(SCHEMA.names))
    return frame.astype(DTYPES), mismatched


def read_counts(run_dir: Path, signature: Any) -> tuple[int, int] | None:
    """(mismatch count, blocks) of the cached parse of this exact run state, from the file's footer
    alone (for callers that need the loader's notes but not the blocks), or ``None``."""
    entry = _entry(run_dir, signature)
    if entry is None or not entry[0].is_file():
        return None
    try:
        footer = pq.read_metadata(entry[0])
        if footer.schema.to_arrow_schema().remove_metadata() != SCHEMA:
            return None
        return int((footer.metadata or {}).get(_MISMATCHED_KEY, b"0")), int(footer.num_rows)
    except (OSError, ValueError, pa.ArrowException):
        return None


def write(run_dir: Path, signature: Any, frame: pd.DataFrame, mismatched: int) -> None:
    """Store a parse (atomically) and drop the entries of older states of the same run."""
    entry = _entry(run_dir, signature)
    if entry is None:
        return
    path, run_key = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(frame[list(SCHEMA.names)], schema=SCHEMA, preserve_index=False)
        table = table.replace_schema_metadata({_MISMATCHED_KEY: str(mismatched).encode()})
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
            pq.write_table(table, handle, write_page_checksum=True)
        os.replace(handle.name, path)
        for stale in path.parent.glob(f"{run_key}-*.parquet"):
            if stale != path:
                stale.unlink(missing_ok=True)
    except (OSError, ValueError, pa.ArrowException):
        return
