"""CSV fields of ``json.dumps`` of lists of strings, compiled: a sweep's path texts as the blocks CSV writes them.

Why: the blocks table's ``path_texts`` column (every path of every block, 250 MB of CSV in a sweep
of 96,000 responses) was the largest part of writing the analysis. As Python lists it crossed to the
worker processes by pickle (a string object made and freed per path on each side), became JSON
text a cell at a time, and then went through three more passes in arrow to be quoted. Here the
column travels as one arrow ``large_list<large_string>`` (its buffers pickle as bytes) and each
cell's final CSV field is written by one compiled pass over its UTF-8 bytes.

The field is byte for byte what the plain way writes (``tests/analysis/engine/test_json_fields.py``
checks it against ``json.dumps`` and the ``csv`` module on random text of every plane):

* the JSON is ``json.dumps(cell)`` with its defaults: ``[`` and ``]``, elements joined by ``", "``,
  ``null`` for a missing element, each string in double quotes with ``ensure_ascii`` escapes:
  ``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``, ``\\b``, ``\\f``; every other code point below U+0020,
  U+007F and every code point above it as ``\\uXXXX`` in lower-case hex, a code point above U+FFFF as
  its UTF-16 surrogate pair;
* the CSV quoting is ``QUOTE_MINIMAL``'s: the JSON holds no line break, so a field is quoted exactly
  when it holds a ``"`` (some element is a string) or a ``,`` (two elements or more), and each ``"``
  is then doubled;
* no field starts like a formula (it starts with ``[``), so :mod:`analysis.engine.csv_text`'s
  neutralising never applies.

numba compiles the kernel on its first call (``cache=True``: once per installation, as the BLEU
kernel); where numba cannot be imported the caller writes the JSON in Python
(:func:`analysis.pipeline.output.csv_bytes`), with the same bytes.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

#: Lower-case hex digits, as ``json``'s ``\\uXXXX`` escapes write them.
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
#: What each byte of a string's UTF-8 is to the escaper: copied as it is (0), the double quote (1),
#: a two-character escape (2), ``\\u00XX`` (3), a continuation byte (4), the lead byte of a sequence
#: of two (5), three (6) or four (7) bytes.
_KIND = np.zeros(256, dtype=np.uint8)
_KIND[:32] = 3
_KIND[127] = 3
_KIND[34] = 1
_KIND[0x80:0xC0] = 4
_KIND[0xC0:0xE0] = 5
_KIND[0xE0:0xF0] = 6
_KIND[0xF0:] = 7
#: The escape letter of each two-character escape.
_SHORT_ESCAPE = np.zeros(128, dtype=np.uint8)
for _byte, _letter in zip(b'\\\n\r\t\b\f', b'\\nrtbf', strict=True):
    _KIND[_byte] = 2
    _SHORT_ESCAPE[_byte] = _letter

def list_column_fields(cells: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The CSV field of ``json.dumps`` of each cell of a list-of-strings column (see the module
    docstring), as a ``large_string`` array. ``cells``: ``list`` or ``large_list`` of ``string`` or
    ``large_string``, no missing cell (a missing *element* is ``null``)."""
    if isinstance(cells, pa.ChunkedArray):
        cells = cells.combine_chunks() if cells.num_chunks != 1 else cells.chunk(0)
    cells = cells.cast(pa.large_list(pa.large_string()))
    if cells.null_count:
        raise ValueError("a missing cell in a list column: its CSV field is pandas' to write")
    values = cells.values  # every element of the child array: the cells' offsets index into it
    list_offsets = np.frombuffer(cells.buffers()[1], dtype=np.int64)[cells.offset:cells.offset + len(cells) + 1]
    string_offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset:values.offset + len(values) + 1]
    text = values.buffers()[2]
    data = np.zeros(0, np.uint8) if text is None else np.frombuffer(text, dtype=np.uint8)
    present = np.asarray(values.is_valid(), dtype=np.bool_) if values.null_count else np.ones(len(values), np.bool_)
    out_offsets, out = _fields(list_offsets, string_offsets, data, present, _KIND, _SHORT_ESCAPE, _HEX)
    return pa.LargeStringArray.from_buffers(len(cells), pa.py_buffer(out_offsets), pa.py_buffer(out))


@numba.njit(cache=True, nogil=True)
def _fields(list_offsets: np.ndarray, string_offsets: np.ndarray, data: np.ndarray, present: np.ndarray,
            kind: np.ndarray, short_escape: np.ndarray,
            hexdigits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """(offsets, UTF-8 bytes) of every cell's field, in one pass into a buffer sized for the worst
    case (a byte becomes at most six, ``\\u00XX``; an element adds at most eight around its text,
    a row four), of which only the written pages are ever touched."""
    n = len(list_offsets) - 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    if n == 0:
        return offsets, np.zeros(0, dtype=np.uint8)
    first_element, last_element = list_offsets[0], list_offsets[n]
    text_bytes = string_offsets[last_element] - string_offsets[first_element]
    out = np.empty(6 * text_bytes + 8 * (last_element - first_element) + 4 * n, dtype=np.uint8)
    at = 0
    for row in range(n):
        first, last = list_offsets[row], list_offsets[row + 1]
        quoted = last - first >= 2
        for element in range(first, last):
            if present[element]:
                quoted = True
        at = _fill(string_offsets, data, present, first, last, quoted, kind, short_escape, hexdigits, out, at)
        offsets[row + 1] = at
    return offsets, out[:at]


@numba.njit(cache=True, nogil=True, inline="always")
def _put_u(out: np.ndarray, at: int, code: int, hexdigits: np.ndarray) -> int:  # pragma: no cover - compiled
    """``\\uXXXX`` of ``code`` (below 0x10000) at ``at``; the position after it."""
    out[at] = 92  # backslash
    out[at + 1] = 117  # u
    out[at + 2] = hexdigits[(code >> 12) & 15]
    out[at + 3] = hexdigits[(code >> 8) & 15]
    out[at + 4] = hexdigits[(code >> 4) & 15]
    out[at + 5] = hexdigits[code & 15]
    return at + 6


@numba.njit(cache=True, nogil=True)
def _fill(string_offsets: np.ndarray, data: np.ndarray, present: np.ndarray, first: int, last: int, quoted: bool,
          kind: np.ndarray, short_escape: np.ndarray, hexdigits: np.ndarray, out: np.ndarray,
          at: int) -> int:  # pragma: no cover - compiled
    """The field of the cell of elements ``first:last``, written into ``out`` from ``at``; the
    position after it."""
    if quoted:
        out[at] = 34
        at += 1
    out[at] = 91  # [
    at += 1
    for element in range(first, last):
        if element > first:
            out[at] = 44  # ,
            out[at + 1] = 32
            at += 2
        if not present[element]:
            out[at] = 110  # null
            out[at + 1] = 117
            out[at + 2] = 108
            out[at + 3] = 108
            at += 4
            continue
        out[at] = 34
        at += 1
        if quoted:
            out[at] = 34
            at += 1
        i, end = string_offsets[element], string_offsets[element + 1]
        while i < end:
            run = i  # a run of bytes copied as they are, in one slice copy
            while run < end and kind[data[run]] == 0:
                run += 1
            if run > i:
                out[at:at + run - i] = data[i:run]
                at += run - i
                i = run
                if i == end:
                    break
            byte = data[i]
            k = kind[byte]
            if k == 1:
                out[at] = 92
                out[at + 1] = 34
                at += 2
                if quoted:
                    out[at] = 34
                    at += 1
                i += 1
            elif k == 2:
                out[at] = 92
                out[at + 1] = short_escape[byte]
                at += 2
                i += 1
            elif k == 3:
                at = _put_u(out, at, byte, hexdigits)
                i += 1
            elif k == 5:
                at = _put_u(out, at, ((byte & 0x1F) << 6) | (data[i + 1] & 0x3F), hexdigits)
                i += 2
            elif k == 6:
                code = ((byte & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
                at = _put_u(out, at, code, hexdigits)
                i += 3
            else:  # 7 (arrow's strings are valid UTF-8: no stray continuation byte)
                code = (((byte & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6)
                        | (data[i + 3] & 0x3F)) - 0x10000
                at = _put_u(out, at, 0xD800 | (code >> 10), hexdigits)
                at = _put_u(out, at, 0xDC00 | (code & 0x3FF), hexdigits)
                i += 4
        out[at] = 34
        at += 1
        if quoted:
            out[at] = 34
            at += 1
    out[at] = 93  # ]
    at += 1
    if quoted:
        out[at] = 34
        at += 1
    return at
