"""Sample columns a run stored before they existed, derived on read from what it did store.

Why on read and not by rewriting: a stored run is evidence (its parts carry checksums, other tools
may hold it open), and a reader must see the same columns whichever version wrote the run. So
:meth:`pr1_eval.store.run_store.RunStore.read_table` fills a part that lacks the token-latency
columns (``critical_path``, ``response_length``, ``losing_path_length``, ``length_unit``) from its
``response`` text here, instead of leaving them null.

Decision on the unit: they are counted in **characters** (``length_unit`` 'char') whatever the
sample's ``position_unit``. An older token-unit run stored block token positions but not the token
range of each path, and reloading its tokenizer on every read would be slow and may not be possible
(the model folder moved); scaling characters to tokens would be a guess. The speedup, a ratio, is
nearly the same in either unit; a length in characters is never shown as tokens, because every
figure names ``length_unit``. A regrade keeps structure fields as read, so it stores these
character counts (marked 'char'); generating the run again, or re-importing it with ``--tokenizer``,
gives tokens.
"""

from __future__ import annotations

import pyarrow as pa

from pr1_eval.protocol.critical_path import text_path_lengths

#: The columns derived here, and the one whose absence from a part says the part predates them.
DERIVED_LENGTHS = ("critical_path", "response_length", "losing_path_length", "length_unit")
_MARKER = "critical_path"
_TYPES = {"critical_path": pa.int64(), "response_length": pa.int64(), "losing_path_length": pa.int64(),
          "length_unit": pa.string()}


def lacks_lengths(present: list[str], columns: list[str] | None) -> bool:
    """Whether a part with ``present`` columns, read for ``columns`` (None: all), needs them derived."""
    return _MARKER not in present and (columns is None or any(c in DERIVED_LENGTHS for c in columns))


def with_lengths(table: pa.Table, columns: list[str] | None) -> pa.Table:
    """``table`` (read with its ``response`` column) plus the derived columns that ``columns`` asks
    for (all when None); ``response`` is dropped again when it was not asked for."""
    found = [text_path_lengths(text) for text in table.column("response").to_pylist()]
    values = {
        "critical_path": [None if f is None else f.critical_path for f in found],
        "response_length": [None if f is None else f.response_length for f in found],
        "losing_path_length": [None if f is None else f.losing_path_length for f in found],
        "length_unit": [None if f is None else f.unit for f in found],
    }
    for name in DERIVED_LENGTHS:
        if (columns is None or name in columns) and name not in table.column_names:  # one stored: kept
            table = table.append_column(pa.field(name, _TYPES[name]), pa.array(values[name], _TYPES[name]))
    if columns is not None and "response" not in columns:
        table = table.drop_columns(["response"])
    return table
