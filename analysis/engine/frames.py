"""Tables kept on disk per owner and state: one parquet file for each owner (a run folder), valid
for one state of it (its files' signature and the code that made the table), so an appended,
regraded or rewritten run, or a changed parser, is never served stale.

Why parquet, never pickle: a cache file is data, not code. Why a schema given by the caller: the
table is the caller's (the loader's parsed blocks); a file whose schema differs is not served.
Each file holds a few integers beside the table (``meta``: e.g. how many responses disagreed),
readable from the footer alone, so a caller that needs only those reads no row. Files are written
with parquet page checksums and read with them verified, and record the file name they were written
as (which names the owner and state), checked on read: a damaged file, or one copied over another
entry, is dropped with a warning and the table computed again. Where: the ``loader`` folder of :mod:`analysis.engine.cache`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.engine.cache import cache_folder, drop_damaged, write_aside

_META_PREFIX = b"pr1_"
#: The footer key that records which (owner, state) file a table was written as.
_KEY = b"entry_key"
#: Bump when what a file holds changes (files of an older format are never looked up).
_FORMAT = 2


class FrameCache:
    """Parquet tables of ``schema`` by (owner, state), in the cache folder of ``kind``.

    ``dtypes``: the numpy dtypes of the columns read as arrays; every other column is read as
    Python objects (lists, strings, ints that are None when unknown), as the caller built it.
    ``version``: a fingerprint of the code that makes the tables (part of every state's key)."""

    def __init__(self, kind: str, schema: pa.Schema, dtypes: dict[str, str], version: str) -> None:
        self.kind = kind
        self.schema = schema
        self.dtypes = dtypes
        self.version = version

    def _entry(self, owner: Path, state: Any) -> tuple[Path, str] | None:
        """The file for this state of ``owner``, and the prefix shared by every state of it."""
        directory = cache_folder(self.kind)
        if directory is None:
            return None
        owner_key = hashlib.sha256(str(owner).encode()).hexdigest()[:16]
        state_key = hashlib.sha256(json.dumps([_FORMAT, self.version, state]).encode()).hexdigest()[:16]
        return directory / f"{owner_key}-{state_key}.parquet", owner_key

    def read(self, owner: Path, state: Any) -> tuple[pd.DataFrame, dict[str, int]] | None:
        """The table kept for this exact state and its ``meta``, or ``None``."""
        entry = self._entry(owner, state)
        if entry is None or not entry[0].is_file():
            return None
        try:
            table = pq.read_table(entry[0], page_checksum_verification=True)
            if table.schema.remove_metadata() != self.schema:
                return None
            _check_key(table.schema.metadata, entry[0])
            columns = {name: (table.column(name).to_numpy() if name in self.dtypes else table.column(name).to_pylist())
                       for name in self.schema.names}
            meta = _meta(table.schema.metadata)
        except (OSError, ValueError, pa.ArrowException) as exc:
            drop_damaged(entry[0], exc, "the table is computed again")
            return None
        frame = pd.DataFrame({name: values if name in self.dtypes else pd.Series(values, dtype=object)
                              for name, values in columns.items()}, columns=list(self.schema.names))
        return frame.astype(self.dtypes), meta

    def read_meta(self, owner: Path, state: Any) -> tuple[dict[str, int], int] | None:
        """(``meta``, rows) of the table kept for this exact state, from the file's footer alone, or ``None``."""
        entry = self._entry(owner, state)
        if entry is None or not entry[0].is_file():
            return None
        try:
            footer = pq.read_metadata(entry[0])
            if footer.schema.to_arrow_schema().remove_metadata() != self.schema:
                return None
            _check_key(footer.metadata, entry[0])
            return _meta(footer.metadata), int(footer.num_rows)
        except (OSError, ValueError, pa.ArrowException):
            return None

    def write(self, owner: Path, state: Any, frame: pd.DataFrame, meta: dict[str, int]) -> None:
        """Keep ``frame`` for this state (written aside, then renamed) and drop older states' files."""
        entry = self._entry(owner, state)
        if entry is None:
            return
        path, owner_key = entry
        try:
            table = pa.Table.from_pandas(frame[list(self.schema.names)], schema=self.schema, preserve_index=False)
        except (ValueError, TypeError, pa.ArrowException):
            return
        table = table.replace_schema_metadata({_META_PREFIX + k.encode(): str(v).encode() for k, v in meta.items()}
                                              | {_KEY: path.name.encode()})
        if not write_aside(path, lambda handle: pq.write_table(table, handle, write_page_checksum=True)):
            return
        for stale in path.parent.glob(f"{owner_key}-*.parquet"):
            if stale != path:
                stale.unlink(missing_ok=True)


def _meta(metadata: dict[bytes, bytes] | None) -> dict[str, int]:
    return {key[len(_META_PREFIX):].decode(): int(value) for key, value in (metadata or {}).items()
            if key.startswith(_META_PREFIX)}


def _check_key(metadata: dict[bytes, bytes] | None, path: Path) -> None:
    """ValueError unless the file at ``path`` was written as that file: one copied over another
    owner's or state's (a sync tool, a backup restored by hand) is whole and passes its page
    checksums, but holds another run's table."""
    if (metadata or {}).get(_KEY) != path.name.encode():
        raise ValueError("it was written for another run or state (copied from another entry)")
