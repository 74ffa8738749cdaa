"""A frame's CSV text built with pyarrow compute, byte for byte what ``DataFrame.to_csv`` writes
once string cells that a spreadsheet would run as a formula are neutralised.

Formulas (the one deliberate difference from pandas): a *string* cell, or column label, starting
with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (OWASP's advice
on CSV injection; the rule and its reasons: :mod:`analysis.common.safe_text` and :func:`csv_cell`), unless it is a
plain decimal number such as ``-1.5``. Numbers in numeric columns, and the numbers of an object
column, are never touched. So the bytes are ``to_csv``'s of the frame with that rule applied to
its string cells and labels, in both paths below.

Why: the analysis' CSV files are a contract (their bytes are what pandas' ``to_csv(index=False)``
writes), but on a sweep's blocks table (250 MB of CSV) pandas spends most of the CSV's time in the
``csv`` module, one Python call per cell. Here each column becomes an arrow string array of its
cell texts, quoted where needed, and the rows are joined in arrow; any column of a kind not
handled below sends the whole frame to pandas' own ``to_csv``, so the text is always pandas'.

The rules (pandas 3.1 ``get_values_for_csv`` and Python's ``csv`` writer, ``QUOTE_MINIMAL``,
``lineterminator="\\n"``; each checked against ``to_csv`` in ``tests/analysis/test_csv_text.py``):

* numpy ints: the decimal digits; numpy bools: ``True`` / ``False``.
* numpy floats: ``values.astype(str)`` (numpy's shortest repr: ``1e-05``, ``1e+16``, ``-0.0``,
  ``inf``), NaN as the empty field: the very call pandas makes. For float64 the same text is
  ``float.__repr__`` of each value (numpy's float64 ``str`` is Python's repr: the shortest digits
  that round-trip, scientific below 1e-4 and from 1e16), three times faster than numpy's
  formatting (a sweep's pairs and blocks hold 500,000 floats); float32 and float16 keep numpy's,
  whose shortest digits are those of the narrower type.
* nullable ``Int*`` / ``boolean`` and ``str`` / ``string`` columns: the value's text, NA empty.
* object columns whose every value is exactly ``str``, ``int``, ``float``, ``bool`` or ``None``: the
  string, ``str(int)``, ``repr(float)``, ``True`` / ``False``, and the empty field for ``None`` and
  NaN (a column of verdicts that may be undefined, such as ``responses.consistent``, is such a column).
* a field is quoted when it holds ``,``, ``"`` or ``\\n`` (not ``\\r``, not other controls, not
  ``\\u2028`` or ``\\x85``), with each ``"`` doubled; a row whose only field is empty is ``""``.
* the header is the one pandas writes for the frame's labels (``to_csv`` of no rows).

Everything else (datetimes, categories, nullable floats, object columns holding other values, no
columns at all, a string arrow cannot hold such as a lone surrogate) is written by pandas.
"""

from __future__ import annotations

import re
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: A plain decimal number: a spreadsheet reads it as the number, so it is left alone.
PLAIN_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_PLAIN_NUMBER_RE = re.compile(PLAIN_NUMBER)


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet cannot run: a string that starts like a formula gets a leading
    ``'``; every other value (numbers, None, plain-number strings) is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER_RE.fullmatch(value):
        return "'" + value
    return value


_NEEDS_QUOTES = '[,"\n]'
_FORMULA_START = "^[=+\\-@\t\r]"
_PLAIN_NUMBER = f"^{PLAIN_NUMBER}$"
_PLAIN_OBJECT = frozenset({str, type(None)})
_TEXT_OBJECT = frozenset({str, int, float, bool, type(None)})


def _text(value: str) -> pa.Scalar:
    """A large-string scalar (arrow's joins want the separator of their inputs' type)."""
    return pa.scalar(value, pa.large_string())


def frame_csv_bytes(frame: pd.DataFrame, header: bool) -> bytes:
    """``frame.to_csv(index=False, header=header)`` encoded as UTF-8 (the same error where that fails)."""
    body = _arrow_body(frame)
    if body is None:
        return str(_neutralised(frame).to_csv(index=False, header=header)).encode("utf-8")
    return (_header(frame) if header else b"") + body


def frame_csv_text(frame: pd.DataFrame, header: bool) -> str:
    """``frame.to_csv(index=False, header=header)``."""
    body = _arrow_body(frame)
    if body is None:
        return str(_neutralised(frame).to_csv(index=False, header=header))
    return ((_header(frame) if header else b"") + body).decode("utf-8")


def _neutralised(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with :func:`csv_cell` applied to every string cell and label (for pandas' writer);
    a column with nothing to change is kept as it is (no dtype is inferred anew)."""
    out = frame.set_axis([csv_cell(label) for label in frame.columns], axis=1)
    for i, dtype in enumerate(frame.dtypes):
        if not (isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype)) or dtype.kind == "O"):
            continue
        cells = frame.iloc[:, i].astype(object).tolist()
        safe = [csv_cell(v) for v in cells]
        if any(a is not b for a, b in zip(safe, cells, strict=True)):
            kind = object if isinstance(dtype, pd.CategoricalDtype) else dtype
            out.isetitem(i, pd.Series(safe, index=frame.index, dtype=kind).array)
    return out


def _header(frame: pd.DataFrame) -> bytes:
    """pandas' own header line: the labels go through the same formatting as values there."""
    empty = frame.iloc[:0]
    labels = [csv_cell(label) for label in empty.columns]
    if labels != list(empty.columns):
        empty = empty.set_axis(labels, axis=1)
    return str(empty.to_csv(index=False, header=True)).encode("utf-8")


def csv_bytes_with_fields(frame: pd.DataFrame, header: bool, given: dict[int, pa.Array]) -> bytes | None:
    """:func:`frame_csv_bytes` where the columns at the positions of ``given`` already have their
    field texts (quoted as the ``csv`` module quotes, no nulls, one per row: e.g. the JSON lists of
    :func:`analysis.engine.json_fields.list_column_fields`); ``None`` when another column is of a kind
    only pandas writes (the caller then writes the frame the plain way)."""
    body = _arrow_body(frame, given)
    if body is None:
        return None
    return (_header(frame) if header else b"") + body


def _arrow_body(frame: pd.DataFrame, given: dict[int, pa.Array] | None = None) -> bytes | None:
    """The rows' text, or ``None`` when some column is of a kind this module does not write."""
    if frame.shape[1] == 0:
        return None
    if len(frame) == 0:
        return b""
    fields: list[pa.Array] = []
    for position in range(frame.shape[1]):
        field = given[position] if given and position in given else _field_texts(frame.iloc[:, position])
        if field is None:
            return None
        fields.append(field)
    if len(fields) == 1:
        rows = pc.if_else(pc.equal(fields[0], ""), _text('""'), fields[0])
    else:
        rows = pc.binary_join_element_wise(*fields, _text(","))
    lines = pc.binary_join_element_wise(rows, _text(""), _text("\n"))
    return _concatenated(lines)


def _concatenated(lines: pa.Array | pa.ChunkedArray) -> bytes:
    """The bytes of every string of ``lines``, one after another (they lie so in its data buffer)."""
    if isinstance(lines, pa.ChunkedArray):
        return b"".join(_concatenated(chunk) for chunk in lines.chunks)
    if len(lines) == 0:
        return b""
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
    start, stop = int(ends[0]), int(ends[-1])
    return bytes(memoryview(data)[start:stop])


def _field_texts(series: pd.Series) -> pa.Array | None:
    """Each cell's field text, quoted as the ``csv`` writer quotes it (no nulls, large strings)."""
    texts = _cell_texts(series)
    if texts is None:
        return None
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = pc.fill_null(texts.cast(pa.large_string()), "")
    return _quoted(texts) if _may_need_quotes(series) else texts


def _formulas_neutralised(texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Strings (every one a string cell) with :func:`csv_cell`'s leading ``'`` where it applies."""
    starts = pc.match_substring_regex(texts, _FORMULA_START)
    if not pc.any(starts).as_py():
        return texts
    needs = pc.and_(starts, pc.invert(pc.match_substring_regex(texts, _PLAIN_NUMBER)))
    return pc.if_else(needs, pc.binary_join_element_wise(_text("'"), texts, _text("")), texts)


def _may_need_quotes(series: pd.Series) -> bool:
    """Numbers and bools never hold a comma, a quote or a newline."""
    dtype = series.dtype
    return not (isinstance(dtype, np.dtype) and dtype.kind in "iufb") and not isinstance(
        series.array, (pd.arrays.IntegerArray, pd.arrays.BooleanArray))


def _quoted(texts: pa.Array) -> pa.Array:
    needs = pc.match_substring_regex(texts, _NEEDS_QUOTES)
    if not pc.any(needs).as_py():
        return texts
    doubled = pc.replace_substring(texts, '"', '""')
    return pc.if_else(needs, pc.binary_join_element_wise(_text('"'), doubled, _text('"'), _text("")), texts)


def _cell_texts(series: pd.Series) -> pa.Array | pa.ChunkedArray | None:
    """The unquoted text of each cell (null where pandas writes the empty field), or ``None``."""
    dtype, values = series.dtype, series.array
    if isinstance(dtype, np.dtype):
        return _numpy_texts(series.to_numpy())
    if isinstance(dtype, pd.StringDtype):
        texts = _arrow_or_none(values)
        return None if texts is None else _formulas_neutralised(texts.cast(pa.large_string()))
    if isinstance(values, pd.arrays.IntegerArray):
        return pc.cast(pa.array(values), pa.large_string())
    if isinstance(values, pd.arrays.BooleanArray):
        return _bool_texts(pa.array(values))
    return None


def _numpy_texts(values: np.ndarray) -> pa.Array | pa.ChunkedArray | None:
    kind = values.dtype.kind
    if kind in "iu":
        return pc.cast(pa.array(values), pa.large_string())
    if kind == "b":
        return _bool_texts(pa.array(values))
    if kind == "f":  # what pandas does (get_values_for_csv): astype(str), for float64 the same as repr
        texts = list(map(float.__repr__, values.tolist())) if values.dtype == np.float64 else values.astype(str)
        return pa.array(texts, type=pa.large_string(), mask=np.isnan(values))
    if kind == "O":
        return _object_texts(values)
    return None


def _object_texts(values: np.ndarray) -> pa.Array | pa.ChunkedArray | None:
    kinds = set(map(type, values))
    if kinds <= _PLAIN_OBJECT:
        texts = _arrow_or_none(values)
        return None if texts is None else _formulas_neutralised(texts)
    if kinds <= _TEXT_OBJECT:
        return _arrow_or_none([csv_cell(v) if type(v) is str else _object_text(v) for v in values])
    return None


def _object_text(value: str | int | float | None) -> str | None:
    """What the ``csv`` writer makes of a cell: ``repr`` for a float, ``str`` otherwise (``True`` for a
    bool); NaN is missing."""
    if value is None or type(value) is str:
        return value  # type: ignore[return-value]
    if type(value) is float:
        return None if value != value else repr(value)
    return str(value)


def _arrow_or_none(values: object) -> pa.Array | pa.ChunkedArray | None:
    """Strings as arrow (``None`` where arrow cannot hold one, e.g. a lone surrogate)."""
    try:
        return cast("pa.Array | pa.ChunkedArray", pa.array(values, type=pa.large_string(), from_pandas=True))
    except (pa.ArrowException, UnicodeError, TypeError, ValueError):
        return None


def _bool_texts(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    return pc.if_else(values, _text("True"), _text("False"))
