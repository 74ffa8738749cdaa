"""The parsed blocks of each run, kept on disk (:class:`analysis.engine.frames.FrameCache`): what
:func:`analysis.runs.loader.parse_blocks` returns, by run folder and run state.

Why: parsing every stored response to find its paths, and extracting each path's answer, is
most of the cost of loading a large run, and the same runs are loaded over and over (the
dashboard after every restart, notebooks, ``analyze``). A run's state is its file signature
(size, mtime and inode of run.json and of every samples part); the code version is the source of
the structure parser and the loader. Where, and how a damaged entry heals:
:mod:`analysis.engine.cache` (the ``loader`` folder: ``$PR1_CACHE/loader`` or ``$PR1_LOADER_CACHE``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from analysis.engine.cache import fingerprint
from analysis.engine.frames import FrameCache

#: Arrow types of the cached columns (the loader's PARSED_COLUMNS, in order).
SCHEMA = pa.schema([
    ("task", pa.string()), ("problem_id", pa.string()), ("sample_idx", pa.int64()), ("block_idx", pa.int64()),
    ("n_paths", pa.int64()), ("closed", pa.bool_()), ("char_start", pa.int64()), ("char_end", pa.int64()),
    ("token_start", pa.int64()), ("token_end", pa.int64()), ("rel_start", pa.float64()),
    ("position_unit", pa.string()), ("path_texts", pa.list_(pa.string())), ("path_char_lengths", pa.list_(pa.int64())),
    ("summary_char_length", pa.int64()), ("summary_text", pa.string()),
])
#: dtypes of the parsed frame, identical with and without the cache. Every other column holds
#: Python objects (strings, lists, and ints that are None when unknown), as the loader always gave.
DTYPES: dict[str, str] = {"sample_idx": "int64", "block_idx": "int64", "n_paths": "int64", "char_start": "int64",
                          "char_end": "int64", "rel_start": "float64", "closed": "bool"}
#: What decides what a parsed block is.
SOURCES = ("pr1_eval.protocol.parse", "pr1_eval.protocol.scan", "analysis.runs.loader")


@lru_cache(maxsize=1)
def _frames() -> FrameCache:
    return FrameCache("loader", SCHEMA, DTYPES, fingerprint(SOURCES))


def read(run_dir: Path, signature: Any) -> tuple[pd.DataFrame, int] | None:
    """The cached parse of this exact run state and its mismatch count, or ``None``."""
    hit = _frames().read(run_dir, signature)
    return None if hit is None else (hit[0], hit[1].get("mismatched", 0))


def read_counts(run_dir: Path, signature: Any) -> tuple[int, int] | None:
    """(mismatch count, blocks) of the cached parse of this exact run state, from the file's footer
    alone (for callers that need the loader's notes but not the blocks), or ``None``."""
    hit = _frames().read_meta(run_dir, signature)
    return None if hit is None else (hit[0].get("mismatched", 0), hit[1])


def write(run_dir: Path, signature: Any, frame: pd.DataFrame, mismatched: int) -> None:
    """Keep a run's parse (see :meth:`FrameCache.write`)."""
    _frames().write(run_dir, signature, frame, {"mismatched": mismatched})
