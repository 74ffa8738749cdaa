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

import json
import logging
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pr1_eval.errors import Pr1EvalError, is_disk_full, no_space
from pr1_eval.jsonl import unique_keys
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import ADDED_COLUMNS, GRADE_COLUMNS, SAMPLE_SCHEMA, SampleRecord, records_to_table
from pr1_eval.store.derived import lacks_lengths, with_lengths
from pr1_eval.store.run_lock import held_by_another
from pr1_eval.store.safe_write import atomic_output

SAMPLES_DIR = "samples.parquet"
RUN_JSON = "run.json"
CORRUPT_SUFFIX = ".corrupt"

_READ_TRIES = 40  # about two seconds of rewrites under a reader before it says "retry"
log = logging.getLogger(__name__)


class RunChanged(Pr1EvalError):
    """A writer replaced the run's samples while they were read."""

    def __init__(self, root: Path) -> None:
        super().__init__(f"{root}: the run changed while it was read (another command is rewriting it); retry")


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so a reader never sees a partial file (a full disk: the old file stays, and the
    one-line "no space left" error)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str).encode("utf-8")
    with atomic_output(path, need_bytes=len(text)) as handle:
        handle.write(text)
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
        where, fix = self.run_json_path, "restore it from a copy, or rerun the command that made the run"
        raw = self.run_json_path.read_bytes()
        try:  # decoded here, not by read_text: a byte that is not UTF-8 is named, never a traceback
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Pr1EvalError(f"{where}: not UTF-8 text (byte {exc.start + 1} is 0x{raw[exc.start]:02x}); the "
                               f"record is damaged: {fix}") from None
        try:
            data = json.loads(text, object_pairs_hook=unique_keys(str(self.run_json_path), text))
        except json.JSONDecodeError as exc:
            raise Pr1EvalError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}); {fix}") from None
        except RecursionError:
            raise Pr1EvalError(f"{where}: not valid JSON (nested too deeply to read); {fix}") from None
        return RunRecord.from_dict(data, str(self.run_json_path))

    def write_run(self, record: RunRecord) -> None:
        """Write the run's record atomically (the only code that writes ``run.json``)."""
        write_json_atomic(self.run_json_path, record.to_dict())

    @property
    def staging_dir(self) -> Path:
        """Where :meth:`rewrite` writes the new parts before swapping them in."""
        return self.root / (SAMPLES_DIR + ".new")

    @property
    def backup_dir(self) -> Path:
        """Where :meth:`rewrite` moves the old parts while it swaps the new ones in."""
        return self.root / (SAMPLES_DIR + ".old")

    def _parts_dir(self) -> Path:
        """The folder whose parts are the run's samples. Normally ``samples.parquet``; when a
        rewrite was killed between its two renames (``samples.parquet`` gone, ``.old`` there) and
        no writer holds the run, the new parts when they were complete (``.new`` exists only
        whole at that point), else the old ones: a reader never depends on a writer coming back."""
        if self.samples_dir.is_dir() or not self.backup_dir.is_dir():
            return self.samples_dir
        if held_by_another(self.root):
            raise RunChanged(self.root)
        return self.staging_dir if self.staging_dir.is_dir() else self.backup_dir

    def part_paths(self) -> list[Path]:
        folder = self._parts_dir()
        return sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []

    def recover_swap(self) -> None:
        """Finish or undo a :meth:`rewrite` that was killed (called by writers, under the run's
        lock): before its swap the old parts stand and the staging folder is dropped; between its
        two renames the complete new parts are moved in; after it the old parts are removed."""
        staging, backup = self.staging_dir, self.backup_dir
        if not self.samples_dir.exists() and backup.is_dir():
            os.replace(staging if staging.is_dir() else backup, self.samples_dir)
            log.warning("%s: finished a rewrite of its samples that was interrupted", self.root)
        for leftover in (staging, backup):
            if leftover.exists():
                shutil.rmtree(leftover)

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
        table = records_to_table(batch)
        try:
            _write_part(table, tmp)
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if is_disk_full(exc):
                raise no_space(self.samples_dir, table.nbytes, f"{final.name} ({len(batch)} samples)") from None
            raise Pr1EvalError(f"could not write {final} ({exc.strerror or exc}); fix the cause and rerun the same "
                               "command: finished chunks are kept and this one is regenerated") from None
        os.replace(tmp, final)
        _fsync_dir(self.samples_dir)
        return final

    def read_table(self, columns: list[str] | None = None, *, may_lack: frozenset[str] = frozenset(),
                   threads: bool = True) -> pa.Table:
        """All samples (``columns`` only, when given). Temporary files of a killed writer are
        never read; a part that is cut short or corrupt is an error naming it, and so is a column of
        the wrong type, or a missing one that is required (see :func:`_conform`; ``may_lack``:
        columns the caller computes again, read as nulls when a part lacks them). ``threads=False``:
        pyarrow decodes on the calling thread, for callers that read runs on threads of their own
        (its pool on top of them cost a leaderboard about a third more CPU for the same table).

        A consistent snapshot: appends only add whole parts, and a rewrite swaps the parts folder
        (a new inode); a read that saw the folder change, or a part vanish, under it is read
        again, and after a few tries fails with "the run changed while it was read; retry"."""
        damaged_before = False
        for _ in range(_READ_TRIES):
            before = _inode(self.samples_dir)
            try:
                tables = [(part, self._read_whole(part, columns, threads)) for part in self.part_paths()]
                if _inode(self.samples_dir) == before:
                    break
            except (FileNotFoundError, RunChanged):
                pass
            except Pr1EvalError:  # "damaged": or read across a swap (one file's header, another's pages)
                # A damaged part is damaged on every read; a torn read across two swaps can pass the
                # inode check (the second swap's new folder may get the freed inode number: seen once
                # in CI under load), so only a second damaged read in a row is an error.
                if _inode(self.samples_dir) == before and damaged_before:
                    raise
                damaged_before = True
                time.sleep(0.05)
                continue
            damaged_before = False
            time.sleep(0.05)
        else:
            raise RunChanged(self.root)
        schema = _schema(columns)
        if not tables:
            return schema.empty_table()
        return pa.concat_tables([_conform(table, schema, part, may_lack) for part, table in tables])

    @staticmethod
    def _read_whole(part: Path, columns: list[str] | None, threads: bool = True) -> pa.Table:
        table, problem = _read_part(part, columns, threads)
        if table is None:
            raise Pr1EvalError(f"{part}: {problem}; it is not read as data. Rerun the command that made this run "
                               "(`pr1-eval run` resumes: it sets the part aside and regenerates its samples)")
        return table

    def read_frame(self) -> pd.DataFrame:
        """All samples as a DataFrame with the declared columns, keys checked for duplicates."""
        frame = self.read_table().to_pandas()
        duplicated = frame.duplicated(subset=["task", "problem_id", "sample_idx"], keep=False)
        if duplicated.any():
            first = frame.loc[duplicated, ["task", "problem_id", "sample_idx"]].iloc[0].tolist()
            raise Pr1EvalError(f"{self.samples_dir}: duplicated sample key {key_text(first)}; the run store is corrupt")
        return frame

    def read_records(self, *, may_lack: frozenset[str] = frozenset()) -> list[SampleRecord]:
        return [SampleRecord.from_row(row) for row in self.read_table(may_lack=may_lack).to_pylist()]

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
        """Replace all samples (regrade, import, compaction). The new parts are written whole to
        ``samples.parquet.new`` first, then swapped in by two renames; a rewrite killed at any
        point is finished or undone by the next writer (:meth:`recover_swap`), and readers never
        mix old and new parts (:meth:`read_table`)."""
        self.recover_swap()
        staging, backup = self.staging_dir, self.backup_dir
        written = done = 0
        try:
            staging.mkdir(parents=True)
            for i in range(0, len(records), chunk_size):
                path = staging / f"part-{i // chunk_size:05d}.parquet"
                table = records_to_table(records[i : i + chunk_size])
                written, done = written + table.nbytes, done + table.num_rows
                _write_part(table, path)
                with open(path, "rb+") as handle:
                    os.fsync(handle.fileno())
            _fsync_dir(staging)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)  # the stored samples are untouched
            if is_disk_full(exc):  # the whole new copy: as many bytes a sample as the chunks made so far
                need = written * len(records) // done if done else None
                raise no_space(self.root, need, f"{len(records)} samples") from None
            raise
        if self.samples_dir.exists():
            os.replace(self.samples_dir, backup)
        os.replace(staging, self.samples_dir)
        _fsync_dir(self.root)
        shutil.rmtree(backup, ignore_errors=True)

def key_text(values: Iterable[Any]) -> str:
    """A sample key as messages print it, ``('aime24', 'p1', 0)``: numpy scalars as the plain
    values they hold (a frame's row gives ``np.int64(0)``, whose repr means nothing to a user)."""
    return repr(tuple(v.item() if isinstance(v, np.generic) else v for v in values))


def _write_part(table: pa.Table, path: Path) -> None:
    """One parquet part, with page checksums so damage inside a page is detected on read."""
    pq.write_table(table, path, write_page_checksum=True)


def _read_part(part: Path, columns: list[str] | None = None, threads: bool = True) -> tuple[pa.Table | None, str]:
    """(table, "") or (None, what is wrong): cut short, not parquet, or a checksum mismatch."""
    try:
        size = part.stat().st_size
        if not _has_parquet_ends(part, size):
            return None, f"cut short or not a parquet file ({size} bytes, without parquet's PAR1 header and footer)"
        present = pq.read_schema(part).names
        derive = lacks_lengths(present, columns)  # a part written before the token-latency columns
        wanted = None if columns is None else [c for c in (*columns, *(["response"] if derive else []))
                                               if c in present]
        table = pq.read_table(part, columns=wanted, page_checksum_verification=True, use_threads=threads)
        return (with_lengths(table, columns) if derive and "response" in present else table), ""
    except FileNotFoundError:
        raise  # moved away under the reader (a rewrite or a set-aside): not damage, see read_table
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


def _conform(table: pa.Table, schema: pa.Schema = SAMPLE_SCHEMA, part: Path | None = None,
             may_lack: frozenset[str] = frozenset()) -> pa.Table:
    """Cast a part to the current schema. A column that cannot be cast (a hand-edited part:
    ``sample_idx`` as text) is an error naming part and column; so is a missing column, unless a
    newer version added it (:data:`~pr1_eval.records.sample.ADDED_COLUMNS`: read as nulls) or the
    caller computes it again (``may_lack``: regrade's grade columns)."""
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
        elif field.name in ADDED_COLUMNS or field.name in may_lack:
            columns.append(pa.nulls(table.num_rows, field.type))
        else:
            raise Pr1EvalError(_missing_column(field.name, part))
    conformed = pa.Table.from_arrays(columns, schema=schema)
    _check_sample_idx(conformed, part)
    return conformed


def _missing_column(name: str, part: Path | None) -> str:
    """The one line for a part without a required column, with the fix: a grade column is graded
    again by ``regrade``; any other can only come back from the files that made the run."""
    run = part.parent.parent if part is not None else "RUN"
    fix = (f"run `pr1-eval regrade {run}` to grade its samples again" if name in GRADE_COLUMNS else
           "restore the part, or rerun the command that made this run into a new folder")
    return (f"{part or 'a stored part'}: column {name!r} is missing (the part was not written by pr1-eval, or was "
            f"edited); it is not read as empty: {fix}")


def _check_sample_idx(table: pa.Table, part: Path | None) -> None:
    """A negative ``sample_idx`` (a hand-edited part) is refused naming the part, as every writer
    of samples refuses one: read as it is, it would count as one more sample of its problem."""
    if "sample_idx" not in table.column_names or table.num_rows == 0:
        return
    low = pc.min(table.column("sample_idx")).as_py()
    if low is not None and low < 0:
        raise Pr1EvalError(f"{part or 'a stored part'}: column 'sample_idx' holds {low}; a sample index is a whole "
                           "number from 0 (the part was edited or not written by pr1-eval): restore it, or rerun the "
                           "command that made this run into a new folder")
