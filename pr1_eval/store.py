"""The run store: ``runs/<name>/run.json`` plus ``samples.parquet/part-NNNNN.parquet``.

Why parts: a run is appended to in durable chunks. Each chunk is written to a temporary file,
fsynced and renamed into place, so a SIGKILL loses at most the chunk in flight and never leaves
a half-written part. Rerunning the same command reads the finished keys and skips them; reading
refuses duplicated keys loudly rather than averaging over them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records import SAMPLE_COLUMNS, SAMPLE_SCHEMA, SampleRecord, records_to_table

SAMPLES_DIR = "samples.parquet"
RUN_JSON = "run.json"


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

    def read_run_json(self) -> dict[str, Any]:
        if not self.run_json_path.is_file():
            raise Pr1EvalError(f"{self.root} is not a pr1-eval run: {RUN_JSON} is missing")
        try:
            data: dict[str, Any] = json.loads(self.run_json_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise Pr1EvalError(f"{self.run_json_path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return data

    def write_run_json(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.run_json_path, data)

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
        pq.write_table(records_to_table(batch), tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.samples_dir)
        return final

    def read_table(self) -> pa.Table:
        """All samples; stray temporary files from a killed run are ignored (never read)."""
        tables = []
        for part in self.part_paths():
            try:
                tables.append(pq.read_table(part))
            except Exception as exc:
                raise Pr1EvalError(f"{part}: unreadable parquet part ({exc}); delete it and rerun to regenerate") from None
        if not tables:
            return SAMPLE_SCHEMA.empty_table()
        return pa.concat_tables([_conform(t) for t in tables])

    def read_frame(self) -> pd.DataFrame:
        """All samples as a DataFrame with the declared columns, keys checked for duplicates."""
        frame = self.read_table().to_pandas()
        duplicated = frame.duplicated(subset=["task", "problem_id", "sample_idx"], keep=False)
        if duplicated.any():
            first = frame.loc[duplicated, ["task", "problem_id", "sample_idx"]].iloc[0].tolist()
            raise Pr1EvalError(f"{self.samples_dir}: duplicated sample key {first}; the run store is corrupt")
        return frame

    def read_records(self) -> list[SampleRecord]:
        return [SampleRecord.from_row(row) for row in self.read_table().to_pylist()]

    def finished_keys(self) -> set[tuple[str, str, int]]:
        """Keys already stored: a rerun skips these."""
        table = self.read_table().select(["task", "problem_id", "sample_idx"])
        cols = table.to_pydict()
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
                pq.write_table(records_to_table(chunk), staging / f"part-{i // chunk_size:05d}.parquet")
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


def _conform(table: pa.Table) -> pa.Table:
    """Cast a part to the current schema (adds columns written by newer versions as nulls)."""
    columns = []
    for name in SAMPLE_COLUMNS:
        field = SAMPLE_SCHEMA.field(name)
        if name in table.column_names:
            columns.append(table.column(name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=SAMPLE_SCHEMA)
