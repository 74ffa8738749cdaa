"""A table's columns of lists of strings handed to the CSV workers through one arrow file, not pickled.

Why: a sweep's blocks table holds every path text in ``path_texts`` (lists of strings, 250 MB of
CSV for 96,000 responses). Its CSV is made in worker processes (:class:`analysis.pipeline.output.
CsvBegun`), and as Python lists each chunk was pickled string by string in this process and built
again, object by object, in the worker (0.2 s of a worker's CPU per 20,000 rows), before becoming
JSON a cell at a time. Here the table is converted to arrow once (the conversion its parquet needs
anyway), those columns are written to one arrow IPC file beside the CSV parts (a copy of their
buffers, 0.05 s for the sweep), and each worker maps the file and writes its rows' fields in one
compiled pass (:mod:`analysis.engine.json_fields`); the chunk it is sent holds an empty column in
their place.

The bytes do not change: the fields are those ``json.dumps`` and the ``csv`` module write
(``tests/analysis/engine/test_json_fields.py``); where the compiled pass is not available (no numba)
the worker turns its rows back into the very lists they came from and writes them the plain way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

_STRING_LISTS = (pa.list_(pa.string()), pa.large_list(pa.string()), pa.list_(pa.large_string()),
                 pa.large_list(pa.large_string()))


def text_list_positions(table: pd.DataFrame, arrow: pa.Table) -> dict[int, str]:
    """The positions of ``table``'s columns whose every cell is a ``list`` of strings (and ``None``):
    object columns of lists that arrow converted to a list of strings; each with the name it gets in
    the file (by position: a table may hold two columns of one name). A column with a missing cell,
    a tuple or an array among its lists stays as it is (pandas writes those)."""
    found: dict[int, str] = {}
    for position, field in enumerate(arrow.schema):
        series = table.iloc[:, position]
        if field.type in _STRING_LISTS and series.dtype == object and set(map(type, series.to_numpy())) == {list}:
            found[position] = f"c{position}"
    return found


@dataclass(frozen=True)
class TextLists:
    """Where a CSV chunk's lists of strings are: rows ``start:stop`` of the columns ``columns``
    (position in the chunk -> column name in the file) of the arrow file ``path``."""

    path: Path
    columns: dict[int, str]
    start: int
    stop: int

    def read(self) -> dict[int, pa.Array]:
        """Each column's rows, mapped from the file (no copy)."""
        table = pa.ipc.open_file(pa.memory_map(str(self.path))).read_all()  # the map lives as long as its buffers
        rows = table.slice(self.start, self.stop - self.start)
        return {position: rows.column(name).combine_chunks() for position, name in self.columns.items()}


def write_text_lists(arrow: pa.Table, columns: dict[int, str], path: Path) -> None:
    """The columns of ``arrow`` at the positions of ``columns`` as one arrow IPC file at ``path``,
    under the names ``columns`` gives them."""
    selected = arrow.select(list(columns)).rename_columns(list(columns.values()))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, selected.schema) as writer:
        writer.write_table(selected)


def placeholder(rows: int) -> np.ndarray:
    """What a chunk holds in place of a column sent through the file: empty text (pickled as one
    string and references to it)."""
    return np.full(rows, "", dtype=object)


def csv_fields(cells: pa.Array) -> pa.Array | None:
    """The CSV field of ``json.dumps`` of each list of ``cells``, written by
    :func:`analysis.engine.json_fields.list_column_fields`; ``None`` where numba cannot be imported
    or cannot keep its cache (the caller writes the lists the plain way)."""
    try:
        from analysis.engine.json_fields import list_column_fields
    except (ImportError, RuntimeError, OSError):
        return None
    return list_column_fields(cells)


def as_lists(cells: pa.Array) -> np.ndarray:
    """``cells`` back as the object column of lists they were made from."""
    out = np.empty(len(cells), dtype=object)
    for row, cell in enumerate(cells.to_pylist()):
        out[row] = cell
    return out
