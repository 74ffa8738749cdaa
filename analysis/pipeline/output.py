"""What ``pr1-eval analyze`` writes and prints: each table as parquet and CSV, the notes each said
once, and the tables on the terminal.

A run × task that lacks samples its ``run.json`` declares (a killed run, a task never started) is
printed with ``complete`` = ``⚠ incomplete`` and a sentence saying what is missing, carries
``"complete": false`` and ``"missing"`` in ``--json``, and is left out of the drift trends unless
``--include-incomplete`` (see :mod:`analysis.common.completeness`).
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from itertools import chain
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analysis.common.completeness import INCLUDE_FLAG, MARK
from analysis.engine.csv_text import csv_bytes_with_fields, frame_csv_bytes, frame_csv_text
from analysis.engine.text_lists import (
    TextLists,
    as_lists,
    csv_fields,
    placeholder,
    text_list_positions,
    write_text_lists,
)
from analysis.engine.workers import Workers
from analysis.summary import Analysis
from pr1_eval.report.table import fit_columns
from pr1_eval.store.safe_write import atomic_output, write_atomic
from pr1_eval.terminal import terminal_text

_STRUCTURE_VIEW = ["run", "task", "complete", "step", "n_samples", "parallel_ratio", "blocks_per_response", "paths_per_block",
                   "in_block_share", "first_block_rel_pos", "block_rel_pos", "position_unit", "format_ok_ratio",
                   "accuracy", "accuracy_with_block", "accuracy_without_block", "answer_policy"]
_DIVERSITY_VIEW = ["run", "task", "n_pairs", "bleu_mean", "cosine_mean", "n_blocks_roles", "share_verification",
                   "share_exploration", "share_undetermined", "summary_consistency"]
_TREND_VIEW = ["task", "model_family", "decoding", "metric", "n_steps", "spearman_rho", "p_value", "p_method", "position_unit"]

_ROW_NOTE = re.compile(r"^(?P<run>.+?) / (?P<task>[^/:]+): (?P<body>.+)$")
_DRIFT_NOTE = re.compile(r"^drift (?P<task>\S+) / (?P<metric>\S+): (?P<body>.+)$")


def group_notes(notes: Sequence[str], n_rows: int, runs: Sequence[str] = ()) -> list[str]:
    """Each distinct sentence once, with the runs and tasks it applies to.

    ``to_json`` writes one note per run × task (``RUN / TASK: a; b``), per drift task and, from the
    loader, per run (``RUN: a``), so a sentence true of every task ("no checkpoint step: left out
    of drift") came once per task. Here it comes once: ``a (every run and task)``,
    ``a (every run: t1)`` or ``a (RUN: t1, t2; RUN2: t1)``; ``a (runs R1, R2)`` / ``a (every run)`` for run notes (``runs``
    names them); ``drift / METRIC: … (tasks t1, t2)``. Other notes pass unchanged, in order.
    """
    rows: dict[str, dict[str, list[str]]] = {}
    per_run: dict[str, list[str]] = {}
    drift: dict[tuple[str, str], list[str]] = {}
    other: list[str] = []
    for note in notes:
        head, _, body = note.partition(": ")
        if (found := _DRIFT_NOTE.match(note)) is not None:
            drift.setdefault((found["metric"], found["body"]), []).append(found["task"])
        elif head in runs and body:
            per_run.setdefault(body, []).append(head)
        elif (found := _ROW_NOTE.match(note)) is not None:
            for sentence in found["body"].split("; "):
                rows.setdefault(sentence, {}).setdefault(found["run"], []).append(found["task"])
        else:
            other.append(note)
    grouped = []
    for sentence, where in rows.items():
        count = sum(len(tasks) for tasks in where.values())
        same_tasks = {tuple(tasks) for tasks in where.values()}
        if count == n_rows > 1:
            scope = "every run and task"
        elif len(where) == len(set(runs)) > 1 and len(same_tasks) == 1:
            scope = f"every run: {', '.join(next(iter(same_tasks)))}"
        else:
            scope = "; ".join(f"{run}: {', '.join(tasks)}" for run, tasks in where.items())
        grouped.append(f"{sentence} ({scope})")
    grouped += [f"{body} ({'every run' if len(names) == len(set(runs)) > 1 else 'runs ' + ', '.join(names)})"
                if len(names) > 1 else f"{names[0]}: {body}" for body, names in per_run.items()]
    grouped += [f"drift / {metric}: {body} (tasks {', '.join(tasks)})" for (metric, body), tasks in drift.items()]
    return grouped + other


#: Rows written to a CSV at a time: the text of list columns (the blocks' path texts) is made one
#: chunk at a time, not for the whole table at once (a sweep's paths as JSON are hundreds of MB).
CSV_CHUNK = 20_000

#: A piece of a CSV file: called with the file (opened in binary), it writes its rows there.
CsvPiece = Callable[[BinaryIO], None]


def write_tables(analysis: Analysis, out_dir: Path, workers: Workers | None = None,
                 begun: CsvBegun | None = None) -> list[Path]:
    """Each table as ``<name>.parquet`` and ``<name>.csv`` (list columns as JSON in the CSV). With
    ``workers`` the CSV is made there, chunk by chunk, while this process writes the parquet;
    ``begun``: the CSV of tables already under way (:class:`CsvBegun`), closed here once written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    own = CsvBegun(workers, out_dir) if begun is None else begun
    try:
        tables = analysis.tables()
        pieces = {name: own.pieces(name, table) or own.begin(name, table) for name, table in tables.items()}
        written = []
        for name, table in tables.items():  # every parquet first: here, while the workers make the CSV
            early = own.parquet(name, table)
            with atomic_output(out_dir / f"{name}.parquet") as handle:  # whole or not at all
                if early is None:
                    table.to_parquet(handle, index=False)
                else:
                    handle.write(early.result())
            written.append(out_dir / f"{name}.parquet")
        for name in tables:
            with atomic_output(out_dir / f"{name}.csv") as handle:
                for piece in pieces[name]:
                    piece(handle)
        return written
    finally:
        own.close()


def write_document(path: Path, document: dict[str, Any]) -> None:
    """``analysis.json``: the ``--json`` document, written whole (temporary file, then renamed)."""
    write_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """``table`` as CSV at ``path``, list cells as JSON text, :data:`CSV_CHUNK` rows at a time."""
    with atomic_output(path) as handle:
        for start in range(0, max(len(table), 1), CSV_CHUNK):
            handle.write(csv_bytes(table.iloc[start:start + CSV_CHUNK], start == 0))


class CsvBegun:
    """The CSV of an analysis' tables, begun in ``workers`` as soon as each table is final
    (:func:`analysis.summary.analyze`'s ``on_table``), for :func:`write_tables`.

    Why begun early: the blocks' CSV (every path text, as JSON) is most of what writing costs, and
    it used to start only once every table was built, while the workers sat idle after BLEU and
    this process built the small tables alone. Why each worker writes its chunk to a file of its
    own (in a hidden folder under ``out_dir``, removed by :meth:`close`) that is then copied into
    the table's CSV: the text (hundreds of MB for a sweep's blocks) neither travels back through a
    pipe nor waits in this process's memory. A table's pieces are used only for the very frame
    the analysis returns (``is``), so the CSV is always that of the table written. Without workers
    each piece is made when the file is written.

    The same table's parquet is begun too, on a thread of this process (:meth:`parquet`): pyarrow
    encodes and compresses without holding the GIL, so it overlaps the tables still being built
    instead of running alone once they are (two CPU seconds of a sweep's end, when the workers
    had little left to do). It is the bytes ``to_parquet`` writes, kept in memory (the blocks'
    parquet is compressed: tens of MB for a sweep) and written by :func:`write_tables` as before."""

    def __init__(self, workers: Workers | None, out_dir: Path) -> None:
        self._workers = workers
        self._out_dir = out_dir
        self._parts: Path | None = None
        self._begun: dict[str, tuple[pd.DataFrame, list[CsvPiece]]] = {}
        self._futures: list[Future[Path]] = []
        self._parquet: dict[str, tuple[pd.DataFrame, Future[bytes]]] = {}
        self._thread: ThreadPoolExecutor | None = None

    def begin(self, name: str, table: pd.DataFrame) -> list[CsvPiece]:
        """Start the CSV of ``table`` (the analysis' table ``name``); its pieces, in order."""
        pieces: list[CsvPiece] = []
        if self._workers is None:
            for start in range(0, max(len(table), 1), CSV_CHUNK):
                pieces.append(partial(_write_text, table.iloc[start:start + CSV_CHUNK], start == 0))
            self._begun[name] = (table, pieces)
            return pieces
        arrow = _as_arrow(table)  # what the parquet is written from, and the file of the lists of strings
        lists = self._text_lists(name, table, arrow)
        for start in range(0, max(len(table), 1), CSV_CHUNK):
            chunk, header = table.iloc[start:start + CSV_CHUNK], start == 0
            rows = None
            if lists is not None:
                chunk = chunk.copy(deep=False)
                for position in lists.columns:
                    chunk.isetitem(position, placeholder(len(chunk)))
                rows = TextLists(lists.path, lists.columns, start, start + len(chunk))
            part = self._folder() / f"{len(self._futures):06d}.{name}.csv"  # unique: a name may be begun again
            self._futures.append(self._workers.submit(write_csv_part, chunk, header, part, rows))
            pieces.append(partial(_copy_part, self._futures[-1]))
        self._begun[name] = (table, pieces)
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pr1-parquet")
        parquet = (partial(parquet_bytes, table) if arrow is None
                   else partial(arrow_parquet_bytes, arrow, dict[Any, Any](table.attrs)))
        self._parquet[name] = (table, self._thread.submit(parquet))
        return pieces

    def _text_lists(self, name: str, table: pd.DataFrame, arrow: pa.Table | None) -> TextLists | None:
        """The table's columns of lists of strings written to an arrow file for the workers
        (:mod:`analysis.engine.text_lists`), or ``None`` when it has none."""
        columns = {} if arrow is None else text_list_positions(table, arrow)
        if arrow is None or not columns:
            return None
        path = self._folder() / f"{len(self._futures):06d}.{name}.lists.arrow"
        write_text_lists(arrow, columns, path)
        return TextLists(path, columns, 0, len(table))

    def parquet(self, name: str, table: pd.DataFrame) -> Future[bytes] | None:
        """The parquet begun for ``table`` (:func:`parquet_bytes`), or ``None`` when ``name`` was
        begun for no frame or another one."""
        begun = self._parquet.get(name)
        return begun[1] if begun is not None and begun[0] is table else None

    def pieces(self, name: str, table: pd.DataFrame) -> list[CsvPiece] | None:
        """The begun pieces of ``table``, or ``None`` when ``name`` was begun for no frame or another one."""
        begun = self._begun.get(name)
        return begun[1] if begun is not None and begun[0] is table else None

    def close(self) -> None:
        """Remove the workers' part files (those of pieces never written too)."""
        for future in self._futures:
            if not future.cancel():
                future.exception()  # a part being written: wait for it to be done (or to fail)
        if self._parts is not None:
            shutil.rmtree(self._parts, ignore_errors=True)
            self._parts = None
        if self._thread is not None:
            self._thread.shutdown(wait=True, cancel_futures=True)
            self._thread = None
        self._parquet.clear()

    def _folder(self) -> Path:
        if self._parts is None:
            self._out_dir.mkdir(parents=True, exist_ok=True)
            self._parts = Path(tempfile.mkdtemp(prefix=".csv-parts-", dir=self._out_dir))
        return self._parts


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """What ``table.to_parquet(handle, index=False)`` writes, as bytes."""
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _as_arrow(table: pd.DataFrame) -> pa.Table | None:
    """``table`` as pandas' ``to_parquet(index=False)`` converts it (``pa.Table.from_pandas``), or
    ``None`` where arrow refuses it (the parquet is then left to ``to_parquet``, which says why)."""
    try:
        return pa.Table.from_pandas(table, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None


def arrow_parquet_bytes(arrow: pa.Table, attrs: dict[Any, Any]) -> bytes:
    """:func:`parquet_bytes` of the frame ``arrow`` was made from by :func:`_as_arrow` (its
    ``attrs`` given): pandas' own steps after that conversion (``PyArrowImpl.write``: the attrs as
    ``PANDAS_ATTRS`` schema metadata, ``pq.write_table`` with snappy), so one conversion serves the
    parquet and the workers' lists of strings. ``tests/analysis/pipeline/test_output_files.py``
    checks the bytes equal ``to_parquet``'s, attrs or not."""
    import pyarrow.parquet as pq

    if attrs:
        arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), "PANDAS_ATTRS": json.dumps(attrs)})
    buffer = io.BytesIO()
    pq.write_table(arrow, buffer, compression="snappy")
    return buffer.getvalue()


def csv_text(chunk: pd.DataFrame, header: bool) -> str:
    """One piece of a table's CSV (what :func:`write_csv` writes for these rows, as text)."""
    return frame_csv_text(_csv_ready(chunk), header)


def csv_bytes(chunk: pd.DataFrame, header: bool, lists: TextLists | None = None) -> bytes:
    """:func:`csv_text` encoded as UTF-8, made as bytes: a sweep's blocks chunk is tens of MB of
    text, and the files want bytes (see :mod:`analysis.engine.csv_text` for how it equals pandas').
    ``lists``: where the chunk's columns of lists of strings are, when they came through an arrow
    file (:mod:`analysis.engine.text_lists`, how :class:`CsvBegun` sends the path texts); their
    fields are then written in compiled code, else they are made lists again."""
    if lists is None:
        return frame_csv_bytes(_csv_ready(chunk), header)
    cells = lists.read()
    given = {position: fields for position, column in cells.items() if (fields := csv_fields(column)) is not None}
    if len(given) == len(cells):  # the chunk holds empty text where the given fields go
        body = csv_bytes_with_fields(_csv_ready(chunk), header, given)
        if body is not None:
            return body
    plain = chunk.copy(deep=False)
    for position, column in cells.items():
        plain.isetitem(position, as_lists(column))
    return frame_csv_bytes(_csv_ready(plain), header)


def write_csv_part(chunk: pd.DataFrame, header: bool, path: Path, lists: TextLists | None = None) -> Path:
    """:func:`csv_bytes` of ``chunk`` written to ``path`` (what a worker does with one piece)."""
    path.write_bytes(csv_bytes(chunk, header, lists))
    return path


def _write_text(chunk: pd.DataFrame, header: bool, handle: BinaryIO) -> None:
    handle.write(csv_bytes(chunk, header))


def _copy_part(future: Future[Path], handle: BinaryIO) -> None:
    """Copy a worker's part file into ``handle`` (waiting for it) and remove it."""
    part = future.result()
    with open(part, "rb") as source:
        _append_file(source, handle)
    part.unlink()


def _append_file(source: BinaryIO, handle: BinaryIO) -> None:
    """Append ``source``'s bytes to ``handle``: by ``os.sendfile`` where both are files (the kernel
    copies them, no round trip through this process: a sweep's blocks CSV is 255 MB, copied at the
    very end of ``analyze``), else by reading and writing."""
    try:
        target = handle.fileno()
        size = os.fstat(source.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        shutil.copyfileobj(source, handle, 1 << 20)
        return
    handle.flush()
    sent = 0
    try:
        while sent < size:
            count = os.sendfile(target, source.fileno(), sent, size - sent)
            if count == 0:
                break
            sent += count
    except OSError as exc:
        if sent or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
        shutil.copyfileobj(source, handle, 1 << 20)
        return
    handle.seek(0, os.SEEK_END)  # the buffered handle's idea of its position, after the kernel's writes
    if sent < size:  # the part shrank under us: never silently short
        raise OSError(errno.EIO, f"copied {sent} of {size} bytes of {getattr(source, 'name', 'a part')}")


def _csv_ready(table: pd.DataFrame) -> pd.DataFrame:
    """Lists become JSON text (``json.dumps``) so the CSV stays one value per cell and is parseable.

    Only object columns are looked at (a numeric, boolean, string or date column cannot hold a
    list; other extension dtypes take the general way), each by the set of its value types, not
    one ``isinstance`` per cell: on a sweep's blocks table that check, not the writing, was most
    of the time."""
    out = table.copy()
    for column in out.columns:
        series = out[column]
        if series.dtype == object:
            values = series.to_numpy()
            kinds = set(map(type, values))
            if kinds == {list}:  # the blocks' list columns: no cell to test
                texts = _json_int_lists(values)
                out[column] = pd.Series(list(map(_json_list, values)) if texts is None else texts,
                                        index=series.index, dtype=object)
            elif any(issubclass(kind, (list, tuple)) for kind in kinds):
                out[column] = pd.Series([_json_list(v) if isinstance(v, (list, tuple)) else v for v in values],
                                        index=series.index, dtype=object)
        elif not _cannot_hold_lists(series) and series.map(lambda v: isinstance(v, (list, tuple))).any():
            out[column] = series.map(lambda v: json.dumps(list(v)) if isinstance(v, (list, tuple)) else v)
    return out


def _cannot_hold_lists(series: pd.Series) -> bool:
    """A column whose every value is a number, a bool, a string, a date or missing."""
    return (pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)
            or isinstance(series.dtype, pd.StringDtype) or pd.api.types.is_datetime64_any_dtype(series))


_NONE = type(None)


def _json_list(value: list[object] | tuple[object, ...]) -> str:
    """``json.dumps(list(value))``, built directly for lists of plain strings (or None) and of plain
    ints (the blocks' path texts, answers and lengths); anything else goes through ``json.dumps``."""
    try:  # strings only (the encoder json.dumps uses for them refuses anything else)
        return "[" + ", ".join(map(encode_basestring_ascii, value)) + "]"  # type: ignore[arg-type]
    except TypeError:
        pass
    kinds = set(map(type, value))
    if kinds <= {str, _NONE}:
        return "[" + ", ".join("null" if v is None else encode_basestring_ascii(v) for v in value) + "]"  # type: ignore[arg-type]
    if kinds <= {int}:
        return "[" + ", ".join(map(int.__repr__, value)) + "]"  # type: ignore[arg-type]
    return json.dumps(list(value))


def _json_int_lists(lists: np.ndarray) -> list[str] | None:
    """:func:`_json_list` of every cell, made in arrow, when each cell is a list of plain ints and
    None (the blocks' path lengths and answer classes); ``None`` otherwise.

    Exact: ``json.dumps`` writes an int as ``int.__repr__`` and None as ``null``, arrow's cast of
    an int64 to text gives the same digits, and an int beyond int64 makes arrow refuse the column.
    A Python join per cell cost 2.5 us, most of a chunk's list columns after the path texts."""
    if not set(map(type, chain.from_iterable(lists))) <= {int, _NONE}:
        return None
    try:
        arrays = pa.array(list(lists), type=pa.list_(pa.int64()))
    except (pa.ArrowException, OverflowError):
        return None
    items = pc.fill_null(pc.cast(arrays.values, pa.string()), "null")
    joined = pc.binary_join(pa.ListArray.from_arrays(arrays.offsets, items), ", ")
    return pc.binary_join_element_wise("[", joined, "]", "").to_pylist()  # type: ignore[no-any-return]


def _show(title: str, table: pd.DataFrame, columns: list[str]) -> None:
    """One table as text: every missing value ``null`` (as in the JSON and CSV: never ``None`` beside
    ``null``), floats to 4 decimals, names from runs through :func:`terminal_text`; cut to fit a
    120-column terminal, each part repeating the run and task (:func:`fit_columns`; the CSV has it whole)."""
    print(f"\n== {title} ==")
    view = table[[c for c in columns if c in table]]
    if view.empty:
        print("(none)")
        return
    keys = sum(1 for c in view.columns[:2] if c in ("run", "task", "model_family"))
    rows = [[str(c) for c in view.columns]]
    rows += [[_cell(v) for v in record] for record in view.itertuples(index=False, name=None)]
    print("\n".join(fit_columns(rows, keys=max(keys, 1))))


def _cell(value: Any) -> str:
    """A value as the text tables show it (see :func:`_show`)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4f}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return terminal_text(value)


def incomplete_sentence(analysis: Analysis) -> str | None:
    """The sentence under the structure table when some run × task is incomplete (None otherwise)."""
    if analysis.runs.empty or analysis.runs["complete"].all():
        return None
    n = int((~analysis.runs["complete"]).sum())
    treated = ("they are included in the drift trends on request" if analysis.include_incomplete else
               f"their numbers cover only the samples held and they are left out of the drift trends; "
               f"pass {INCLUDE_FLAG} to include them")
    return (f"{MARK}: {n} run × task row(s) lack samples their run.json declares (what is missing is in the "
            f"notes); {treated}.")


def print_tables(analysis: Analysis, notes: Sequence[str]) -> None:
    """The human-readable report: structure, diversity and roles, drift, notes."""
    view = analysis.runs
    if "complete" in view:
        view = view.assign(complete=["yes" if ok else MARK for ok in view["complete"]])
    _show("Structure (per run × task)", view, _STRUCTURE_VIEW)
    if (sentence := incomplete_sentence(analysis)) is not None:
        print(sentence)
    _show("Path diversity and block roles", analysis.runs, _DIVERSITY_VIEW)
    if not analysis.drift_trends.empty:
        _show("Drift over training (Spearman vs step)", analysis.drift_trends, _TREND_VIEW)
    if notes:
        print("\n== Notes ==")
        for note in notes:
            print(f"- {terminal_text(note)}")
