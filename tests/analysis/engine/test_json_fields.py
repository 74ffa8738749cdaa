"""The compiled CSV fields of lists of strings equal what ``json.dumps`` and the ``csv`` module write."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.engine.json_fields import list_column_fields


def _plain_field(cell: list[str | None]) -> str:
    """The field the plain way writes: ``json.dumps`` of the list, quoted by the ``csv`` module
    (``QUOTE_MINIMAL``, as pandas' ``to_csv``), read off a row with a second field after it."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([json.dumps(cell), "next"])
    return buffer.getvalue()[: -len(",next\n")]


_CELLS = st.lists(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=5), max_size=12)


@settings(max_examples=400, deadline=None)
@given(_CELLS, st.sampled_from([pa.large_list(pa.large_string()), pa.list_(pa.string())]))
def test_fields_equal_json_dumps_quoted_by_the_csv_module(cells: list[list[str | None]], kind: pa.DataType) -> None:
    """Every plane of Unicode (hypothesis' text: controls, quotes, backslashes, DEL, astral code
    points written as surrogate pairs), missing elements, empty lists and strings, either arrow width."""
    assert list_column_fields(pa.array(cells, type=kind)).to_pylist() == [_plain_field(c) for c in cells]


@settings(max_examples=100, deadline=None)
@given(_CELLS, st.integers(0, 12), st.integers(0, 12))
def test_a_slice_gives_its_own_rows(cells: list[list[str | None]], start: int, length: int) -> None:
    """Rows of a sliced array (a chunk of a table mapped from its file): its offsets do not start at 0."""
    array = pa.array(cells, type=pa.large_list(pa.large_string())).slice(start, length)
    assert list_column_fields(array).to_pylist() == [_plain_field(c) for c in cells[start:start + length]]


def test_the_escapes_by_hand() -> None:
    """Worked cases: no element (no quotes: no comma, no quote), a missing one, two (a comma:
    quoted), the two-character escapes, a control, DEL, a BMP and an astral code point."""
    cells = [[], [None], [None, None], ["a"], ['say "hi", \\ \n\r\t\b\f\x01\x7f é 😀']]
    assert list_column_fields(pa.array(cells)).to_pylist() == [
        "[]", "[null]", '"[null, null]"', '"[""a""]"',
        '"[""say \\""hi\\"", \\\\ \\n\\r\\t\\b\\f\\u0001\\u007f \\u00e9 \\ud83d\\ude00""]"',
    ]
    assert [_plain_field(c) for c in cells] == list_column_fields(pa.array(cells)).to_pylist()
