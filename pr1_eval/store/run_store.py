"""The run store: ``runs/<name>/run.json`` plus ``samples.parquet/part-NNNNN.parquet``.

Why parts: a run is appended to in durable chunks. Each chunk is written to a temporary file,
fsynced and renamed into place, so a SIGKILL loses at most the chunk in flight and never leaves
a half-written part. Rerunning the same command reads the finished keys and skips them; reading
refuses duplicated keys loudly rather than averaging over them.

A part can still be damaged below us (a machine crash on a file system that reorders writes, a
disk that filled up, a copy cut short). Parts are written with parquet page checksums, and a
part that cannot be read whole is never read as data: reading the run fails naming the part,
and resuming (:meth:`RunStore.finished_keys`) sets it aside as ``part-N.parquet.corrupt-M``,
says so, and counts its samples as not done, so the rerun regenerates them.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SAMPLE_SCHEMA, SampleRecord, records_to_table

SAMPLES_DIR = "samples.parquet"
RUN_JSON = "run.json"
CORRUPT_SUFFIX = ".corrupt"

log = logging.getLogger(__name__)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so a reader never sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)
    _fsync_dir(path.parent)


class RunStore:
    """One run directory. Not safe for two concurrent writers (one run = one process)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.samples_dir = self.root / SAMPLES_DIR

    @property
    def run_json_path(self) -> Path:
        return self.root / RUN_JSON

    def exists(self) -> bool:
        return self.run_json_path.is_file()

    def read_run(self) -> RunRecord:
        """The run's record (``run.json``), checked field by field; errors name the file and field."""
        if not self.run_json_path.is_file():
            raise Pr1EvalError(f"{self.root} is not a pr1-eval run: {RUN_JSON} is missing")
        try:
            data = json.loads(self.run_json_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise Pr1EvalError(f"{self.run_json_path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return RunRecord.from_dict(data, str(self.run_json_path))

    def write_run(self, record: RunRecord) -> None:
        """Write the run's record atomically (the only code that writes ``run.json``)."""
        write_json_atomic(self.run_json_path, record.to_dict())

    def part_paths(self) -> list[Path]:
        return sorted(self.samples_dir.glob("part-*.parquet")) if self.samples_dir.is_dir() else []

    def append(self, records: Iterable[SampleRecord]) -> Path | None:
        """Durably append one chunk; returns the part written (None for an empty chunk)."""
        batch = list(records)
        if not batch:
            return None
        self.samples_dir.mkdir(parents=True, exist_ok=True)
        parts = self.part_paths()
        index = int(parts[-1].stem.split("-")[1]) + 1 if parts else 0
        final = self.samples_dir / f"part-{index:05d}.parquet"
        tmp = self.samples_dir / f".part-{index:05d}.parquet.tmp"
        try:
            _write_part(records_to_table(batch), tmp)
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            hint = "free some space" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "fix the cause"
            raise Pr1EvalError(f"could not write {final} ({exc.strerror or exc}); {hint} and rerun the same "
                               "command: finished chunks are kept and this one is regenerated") from None
        os.replace(tmp, final)
        _fsync_dir(self.samples_dir)
        return final

    def read_table(self, columns: list[str] | None = None) -> pa.Table:
        """All samples (``columns`` only, when given). Temporary files of a killed writer are
        never read; a part that is cut short or corrupt is an error naming it."""
        tables = []
        parts = self.part_paths()
        schema = _schema(columns)
        for part in parts:
            table, problem = _read_part(part, columns)
            if table is None and (not part.exists() or self.part_paths() != parts):
                raise Pr1EvalError(f"{self.root}: the run changed while it was read (another command, such as "
                                   "`pr1-eval regrade`, rewrote it meanwhile); retry")
            if table is None:
                raise Pr1EvalError(f"{part}: {problem}; it is not read as data. Rerun the command that made this run "
                                   "(`pr1-eval run` resumes: it sets the part aside and regenerates its samples)")
            tables.append(_conform(table, schema, part))
        if not tables:
            return schema.empty_table()
        return pa.concat_tables(tables)

    def read_frame(self) -> pd.DataFrame:
        """All samples as a DataFrame with the declared columns, keys checked for duplicates."""
        frame = self.read_table().to_pandas()
        duplicated = frame.duplicated(subset=["task", "problem_id", "sample_idx"], keep=False)
        if duplicated.any():
            first = frame.loc[duplicated, ["task", "problem_id", "sample_idx"]].iloc[0].tolist()
            raise Pr1EvalError(f"{self.samples_dir}: duplicated sample key {key_text(first)}; the run store is corrupt")
        return frame

    def read_records(self) -> list[SampleRecord]:
        return [SampleRecord.from_row(row) for row in self.read_table().to_pylist()]

    def damaged_parts(self) -> list[tuple[Path, str]]:
        """(part, what is wrong) for every part that cannot be read whole, checksums verified."""
        return [(part, problem) for part in self.part_paths() for table, problem in [_read_part(part)] if table is None]

    def set_aside_damaged_parts(self) -> list[Path]:
        """Rename damaged parts to ``part-N.parquet.corrupt-M`` (kept for inspection, never read)
        and delete stray temporary files of a killed writer; returns the new names."""
        moved = []
        for part, problem in self.damaged_parts():
            n = 0
            while (target := part.with_name(f"{part.name}{CORRUPT_SUFFIX}-{n}")).exists():
                n += 1
            os.replace(part, target)
            log.warning("%s: %s; set aside as %s, its samples will be generated again", part, problem, target.name)
            moved.append(target)
        for stray in self.samples_dir.glob(".part-*.parquet.tmp") if self.samples_dir.is_dir() else []:
            stray.unlink(missing_ok=True)
        if moved:
            _fsync_dir(self.samples_dir)
        return moved

    def finished_keys(self) -> set[tuple[str, str, int]]:
        """Keys already stored: a resumed run skips these. Damaged parts are set aside first
        (see :meth:`set_aside_damaged_parts`), so their samples count as not done."""
        self.set_aside_damaged_parts()
        cols = self.read_table(columns=["task", "problem_id", "sample_idx"]).to_pydict()
        return set(zip(cols["task"], cols["problem_id"], cols["sample_idx"], strict=True))

    def rewrite(self, records: list[SampleRecord], chunk_size: int = 5000) -> None:
        """Replace all samples (regrade): new parts are written first, old ones removed after."""
        old = self.part_paths()
        staging = self.root / (SAMPLES_DIR + ".new")
        staging.mkdir(parents=True, exist_ok=True)
        for stale in staging.glob("*"):
            stale.unlink()
        for i in range(0, max(len(records), 1), chunk_size):
            chunk = records[i : i + chunk_size]
            if chunk:
                _write_part(records_to_table(chunk), staging / f"part-{i // chunk_size:05d}.parquet")
        backup = self.root / (SAMPLES_DIR + ".old")
        if self.samples_dir.exists():
            os.replace(self.samples_dir, backup)
        os.replace(staging, self.samples_dir)
        for part in old:
            (backup / part.name).unlink(missing_ok=True)
        if backup.exists():
            for leftover in backup.glob("*"):
                leftover.unlink()
            backup.rmdir()


def key_text(values: Iterable[Any]) -> str:
    """A sample key as messages print it, ``('aime24', 'p1', 0)``: numpy scalars as the plain
    values they hold (a frame's row gives ``np.int64(0)``, whose repr means nothing to a user)."""
    return repr(tuple(v.item() if isinstance(v, np.generic) else v for v in values))


def _write_part(table: pa.Table, path: Path) -> None:
    """One parquet part, with page checksums so damage inside a page is detected on read."""
    pq.write_table(table, path, write_page_checksum=True)


def _read_part(part: Path, columns: list[str] | None = None) -> tuple[pa.Table | None, str]:
    """(table, "") or (None, what is wrong): cut short, not parquet, or a checksum mismatch."""
    try:
        size = part.stat().st_size
        if not _has_parquet_ends(part, size):
            return None, f"cut short or not a parquet file ({size} bytes, without parquet's PAR1 header and footer)"
        present = pq.read_schema(part).names
        wanted = None if columns is None else [c for c in columns if c in present]
        return pq.read_table(part, columns=wanted, page_checksum_verification=True), ""
    except Exception as exc:  # pyarrow raises OSError/ArrowInvalid/… for damaged files
        return None, f"damaged parquet part ({type(exc).__name__}: {' '.join(str(exc).split())})"


def _has_parquet_ends(path: Path, size: int) -> bool:
    """A whole parquet file starts and ends with ``PAR1``; one cut short (or zero-filled) does not."""
    if size < 12:
        return False
    with open(path, "rb") as handle:
        head = handle.read(4)
        handle.seek(size - 4)
        return head == b"PAR1" and handle.read(4) == b"PAR1"


def _schema(columns: list[str] | None) -> pa.Schema:
    if columns is None:
        return SAMPLE_SCHEMA
    return pa.schema([SAMPLE_SCHEMA.field(name) for name in columns])


def _conform(table: pa.Table, schema: pa.Schema = SAMPLE_SCHEMA, part: Path | None = None) -> pa.Table:
    """Cast a part to the current schema (adds columns written by newer versions as nulls). A column
    that cannot be cast (a hand-edited part: ``sample_idx`` as text) is an error naming part and column."""
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            try:
                columns.append(column.cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                raise Pr1EvalError(f"{part or 'a stored part'}: column {field.name!r} holds {column.type}; expected "
                                   f"{field.type} (the part was not written by pr1-eval, or was edited): restore "
                                   "it, or rerun the command that made this run into a new folder") from None
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)
