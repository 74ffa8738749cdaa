"""``write_tables`` writes the bytes a plain ``json.dumps`` per list cell gives, on every kind of column."""

from __future__ import annotations

import json
import math
from collections import namedtuple
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.pipeline import output
from analysis.pipeline.output import CSV_CHUNK, _json_list, write_csv, write_tables

Pair = namedtuple("Pair", "a b")


def _reference_csv_ready(table: pd.DataFrame) -> pd.DataFrame:
    """Every cell checked, every list through json.dumps: the definition the fast way must equal."""
    out = table.copy()
    for column in out.columns:
        if out[column].map(lambda v: isinstance(v, (list, tuple))).any():
            out[column] = out[column].map(lambda v: json.dumps(list(v)) if isinstance(v, (list, tuple)) else v)
    return out


def _reference_csv(table: pd.DataFrame, path: Path) -> bytes:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        for start in range(0, max(len(table), 1), CSV_CHUNK):
            _reference_csv_ready(table.iloc[start:start + CSV_CHUNK]).to_csv(handle, index=False, header=start == 0)
    return path.read_bytes()


def _table(n: int, parquet_safe: bool = False) -> pd.DataFrame:
    """Every kind of cell; ``parquet_safe``: without the lone surrogate and the mixed column parquet refuses."""
    rng = np.random.default_rng(0)
    words = ["plain", "with \"quotes\", commas", "new\nline", "é ∑ 漢字", "tab\tand \\ backslash", "\x00\x1f ctl",
             "\ud83d lone surrogate", "", "<Path>x</Path>", "😀"]
    if parquet_safe:
        words = [w for w in words if "\ud83d" not in w]
    cells: list[object] = []
    for i in range(n):
        kind = i % 9
        if kind == 0:
            cells.append([words[j % len(words)] for j in range(i % 5)])
        elif kind == 1:
            cells.append([None if j % 2 else words[j] for j in range(3)])
        elif kind == 2:
            cells.append([int(x) for x in rng.integers(-10**12, 10**12, 3)])
        elif kind == 3:
            cells.append([1.5, math.nan, math.inf, -math.inf, True, None, np.float64(0.1)])
        elif kind == 4:
            cells.append(("tuple", 1, [2, ["nested"]], {"k": 1}))
        elif kind == 5:
            cells.append(Pair("a", 2))
        elif kind == 6:
            cells.append(None if i % 2 else math.nan)
        elif kind == 7:
            cells.append(np.arange(3))  # not a list: written as pandas writes an array
        else:
            cells.append("a string among lists")
    frame = pd.DataFrame({
        "mixed": pd.Series(cells, dtype=object),
        "texts": pd.Series([[words[(i + j) % len(words)] for j in range(2)] for i in range(n)], dtype=object),
        "answers": pd.Series([None if i % 7 == 0 else [str(i), None] for i in range(n)], dtype=object),
        "lengths": pd.Series([[i, i + 1] for i in range(n)], dtype=object),
        "bools": pd.Series([[True, False]] * n, dtype=object),
        "plain_object": pd.Series([None if i % 3 else f"s{i}" for i in range(n)], dtype=object),
        "s": pd.Series([f"x{i}" if i % 4 else None for i in range(n)], dtype="str"),
        "i": pd.Series(range(n), dtype="int64"),
        "nullable": pd.Series([None if i % 5 == 0 else i for i in range(n)], dtype="Int64"),
        "f": rng.random(n),
        "b": [bool(i % 2) for i in range(n)],
    })
    return frame.drop(columns=["mixed"]) if parquet_safe else frame


class _Tables:
    def __init__(self, tables: dict[str, pd.DataFrame]) -> None:
        self._tables = tables

    def tables(self) -> dict[str, pd.DataFrame]:
        return self._tables


def test_csv_equals_the_plain_way_byte_for_byte(tmp_path: Path) -> None:
    output.CSV_CHUNK = 997  # several chunks, the last one short
    try:
        for n in (2 * 997 + 5, 0, 1):
            table = _table(n)
            write_csv(table, tmp_path / "fast.csv")
            assert (tmp_path / "fast.csv").read_bytes() == _reference_csv(table, tmp_path / "reference.csv"), n
    finally:
        output.CSV_CHUNK = CSV_CHUNK
    text = (tmp_path / "fast.csv").read_text(encoding="utf-8")
    assert '"[""plain"", ""with \\""quotes\\"", commas""]"' in text  # a list cell really became JSON


def test_written_tables_equal_the_plain_way_byte_for_byte(tmp_path: Path) -> None:
    tables = {"big": _table(3000, parquet_safe=True), "empty": _table(0, parquet_safe=True)}
    written = write_tables(_Tables(tables), tmp_path / "out")  # type: ignore[arg-type]
    assert [p.name for p in written] == ["big.parquet", "empty.parquet"]
    for name, table in tables.items():
        assert (tmp_path / "out" / f"{name}.csv").read_bytes() == _reference_csv(table, tmp_path / f"{name}.csv")
        table.to_parquet(tmp_path / f"{name}.parquet", index=False)
        assert (tmp_path / "out" / f"{name}.parquet").read_bytes() == (tmp_path / f"{name}.parquet").read_bytes()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(), st.integers(), st.booleans(), st.floats()), max_size=6))
def test_json_list_is_json_dumps(values: list[object]) -> None:
    assert _json_list(values) == json.dumps(values)
    assert _json_list(tuple(values)) == json.dumps(values)


_INT_CELLS = st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(_INT_CELLS, max_size=8),
       st.lists(st.one_of(st.integers(), st.booleans(), st.floats(), st.none()), max_size=3))
def test_lists_of_ints_become_what_json_dumps_writes(cells: list[list[int | None]], odd: list[object]) -> None:
    """Lists of plain ints (and None) are made in arrow; any other element (a bool, a float, an int
    beyond int64) leaves the column to the general way: the text is json.dumps' in both cases."""
    for column in (cells, cells + [odd]):
        frame = pd.DataFrame({"lists": pd.Series(column, dtype=object)}) if column else pd.DataFrame({"lists": []})
        values = frame["lists"].to_numpy()
        fast = output._json_int_lists(values)
        if column is cells:
            assert fast == [json.dumps(v) for v in cells]  # the arrow way, not the fallback
        assert list(output._csv_ready(frame)["lists"]) == [json.dumps(v) for v in column]


def test_tables_made_in_workers_equal_the_plain_way_byte_for_byte(tmp_path: Path) -> None:
    """The CSV made in worker processes, part by part, and appended to the table's file by the
    kernel (``os.sendfile``): the bytes of the plain way, the header once, the parts in order."""
    from analysis.engine.workers import analysis_workers

    output.CSV_CHUNK = 997  # several parts, the last one short
    try:
        tables = {"big": _table(3 * 997 + 11, parquet_safe=True), "one": _table(1, parquet_safe=True)}
        with analysis_workers(2) as workers:
            write_tables(_Tables(tables), tmp_path / "out", workers)  # type: ignore[arg-type]
        for name, table in tables.items():
            assert (tmp_path / "out" / f"{name}.csv").read_bytes() == _reference_csv(table, tmp_path / f"{name}.csv")
    finally:
        output.CSV_CHUNK = CSV_CHUNK
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no part left behind


def test_a_part_is_appended_after_what_the_handle_buffered(tmp_path: Path) -> None:
    """``_append_file`` flushes the handle's own buffer first and leaves its position at the end, so
    writes before and after land in order; a handle that is no file (a BytesIO) is copied into."""
    import io

    part = tmp_path / "part"
    part.write_bytes(b"0123456789" * 100_000)
    with open(tmp_path / "whole", "wb") as handle:
        handle.write(b"head,")  # still in the handle's buffer
        with open(part, "rb") as source:
            output._append_file(source, handle)
        assert handle.tell() == 5 + 1_000_000
        handle.write(b",tail")
        with open(part, "rb") as source:
            output._append_file(source, handle)
    assert (tmp_path / "whole").read_bytes() == b"head," + part.read_bytes() + b",tail" + part.read_bytes()
    memory = io.BytesIO(b"x")
    memory.seek(1)
    with open(part, "rb") as source:
        output._append_file(source, memory)  # type: ignore[arg-type]
    assert memory.getvalue() == b"x" + part.read_bytes()


def test_lists_of_strings_sent_through_the_arrow_file_give_the_same_bytes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With workers, a table's columns of lists of strings go to them through one arrow file and
    come back as the same CSV: by the compiled fields, and by the lists made again where numba is
    missing. The parquet, written from the same arrow conversion, is ``to_parquet``'s, attrs included."""
    from analysis.engine import text_lists
    from analysis.engine.workers import analysis_workers

    table = _table(2 * 997 + 3, parquet_safe=True)
    table["conclusions"] = [[None, "é \"x\"", ""][: i % 4] for i in range(len(table))]
    table.attrs = {"source": "test", "n": 3}
    expected = _reference_csv(table, tmp_path / "reference.csv")
    table.to_parquet(tmp_path / "reference.parquet", index=False)
    output.CSV_CHUNK = 997
    try:
        for label in ("compiled", "lists again"):
            if label == "lists again":  # as without numba: the worker makes the lists again (and says so here)
                marker = tmp_path / "made lists"

                def as_lists(cells: object, plain: object = text_lists.as_lists, marker: Path = marker) -> object:
                    marker.touch()
                    return plain(cells)  # type: ignore[operator]

                monkeypatch.setattr(output, "csv_fields", lambda cells: None)
                monkeypatch.setattr(output, "as_lists", as_lists)
            with analysis_workers(2) as workers:
                write_tables(_Tables({"t": table}), tmp_path / label, workers)  # type: ignore[arg-type]
            assert (tmp_path / label / "t.csv").read_bytes() == expected, label
            assert (tmp_path / label / "t.parquet").read_bytes() == (tmp_path / "reference.parquet").read_bytes()
        assert marker.exists()
    finally:
        output.CSV_CHUNK = CSV_CHUNK
    arrow = output._as_arrow(table)
    assert arrow is not None
    positions = text_lists.text_list_positions(table, arrow)  # not the lists of ints, not the column with missing cells
    assert [table.columns[p] for p in positions] == ["texts", "conclusions"]

