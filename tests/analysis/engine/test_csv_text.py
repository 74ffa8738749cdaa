"""The arrow-built CSV text is byte for byte ``DataFrame.to_csv(index=False)``, on every kind of
column it writes itself, and the frames it cannot write go to pandas whole; the one deliberate
difference is the formula rule (a string cell or label starting with ``= + - @``, tab or CR, and
not a plain number, gets a leading ``'``), applied here by hand to the frame pandas writes."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.engine.csv_text import _arrow_body, frame_csv_bytes, frame_csv_text

TRICKY = ["\u2028", "\u2029", "\x85", "\xa0", "\u3000", "\ufeff", "é", "漢", "😀", "\x1c", "\x1e"]
CODE_POINTS = [chr(c) for c in range(128)] + TRICKY


def _formula_safe(value: object) -> object:
    """OWASP's rule, written out here independently of the module: a string that starts like a
    formula and is not a plain number gets a leading quote."""
    number = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
    if isinstance(value, str) and value[:1] and value[0] in "=+-@\t\r" and not re.fullmatch(number, value, re.ASCII):
        return "'" + value
    return value


def _by_hand(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.set_axis([_formula_safe(c) for c in frame.columns], axis=1)
    for i, dtype in enumerate(frame.dtypes):
        if (isinstance(dtype, np.dtype) and dtype.kind == "O") or isinstance(dtype, (pd.StringDtype, pd.CategoricalDtype)):
            kind = object if isinstance(dtype, pd.CategoricalDtype) else dtype
            out.isetitem(i, pd.Series([_formula_safe(v) for v in frame.iloc[:, i].astype(object)], dtype=kind,
                                        index=frame.index))
    return out


def _pandas(frame: pd.DataFrame, header: bool) -> bytes:
    return str(_by_hand(frame).to_csv(index=False, header=header)).encode("utf-8")


def _assert_fast_and_equal(frame: pd.DataFrame) -> None:
    """Written by arrow (not by the fallback, which would make the comparison empty) and equal."""
    assert _arrow_body(frame) is not None, frame.dtypes
    for header in (True, False):
        expected = _pandas(frame, header)
        assert frame_csv_bytes(frame, header) == expected, header
        assert frame_csv_text(frame, header) == expected.decode("utf-8"), header


def _texts() -> list[str]:
    """Each code point alone, at either end and inside, next to a quote and next to a comma."""
    out = []
    for ch in CODE_POINTS:
        out += [ch, f"{ch}x", f"x{ch}", f"a{ch}b", f'"{ch}', f"{ch},", ch * 3, f" {ch} "]
    return out


def test_every_ascii_code_point_and_the_tricky_ones_in_strings() -> None:
    texts = _texts()
    missing = [None if i % 11 == 0 else t for i, t in enumerate(texts)]
    frame = pd.DataFrame({
        "object": pd.Series(texts, dtype=object),
        "object_none": pd.Series(missing, dtype=object),
        "str": pd.Series(missing, dtype="str"),
        "string": pd.Series(missing, dtype="string"),
        "python_str": pd.Series(missing, dtype=pd.StringDtype("python", na_value=np.nan)),
    })
    _assert_fast_and_equal(frame)
    for column in frame.columns:  # a lone column: the empty field is written ""
        _assert_fast_and_equal(frame[[column]])
    text = frame_csv_bytes(frame[["object"]], False).decode("utf-8")
    assert '"a""b"\n' in text and '"a,b"\n' in text and '"a\nb"\n' in text and "a\rb\n" in text


def test_formulas_in_string_cells_are_neutralised_and_numbers_are_not() -> None:
    frame = pd.DataFrame({
        "=label": ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx", "-1.5", "+3", "1e-5", ""],
        "n": [-1.5, 2.0, -np.inf, 0.0, 1e-5, -0.0, 3.0, 4.0, 5.0, 6.0],
        "i": [-1, -2, 3, 4, 5, 6, 7, 8, 9, 10],
        "mixed": pd.Series(["-x", -1.5, -7, None, "=1", "a", "-inf", float("-inf"), "@", "-"], dtype=object),
    })
    assert frame_csv_text(frame, True).split("\n") == [
        "'=label,n,i,mixed",
        '"\'=HYPERLINK(""http://x"",""y"")",-1.5,-1,\'-x', "'+1+2,2.0,-2,-1.5", "'-2+3,-inf,3,-7", "'@SUM(A1),0.0,4,",
        "'\tx,1e-05,5,'=1", "'\rx,-0.0,6,a", "-1.5,3.0,7,'-inf", "+3,4.0,8,-inf", "1e-5,5.0,9,'@", ",6.0,10,'-", ""]
    _assert_fast_and_equal(frame)
    string = frame.astype({"=label": "string"})
    assert frame_csv_bytes(string, True) == frame_csv_bytes(frame, True)
    assert frame_csv_bytes(frame.astype({"=label": "category"}), True) == frame_csv_bytes(frame, True)  # pandas' path


def test_which_characters_are_quoted() -> None:
    """The rule the module rests on, stated once outright: only ``,``, ``"`` and ``\\n`` quote."""
    quoted = [ch for ch in CODE_POINTS
              if frame_csv_bytes(pd.DataFrame({"a": [f"x{ch}y"], "b": ["z"]}), False) != f"x{ch}y,z\n".encode()]
    assert quoted == ["\n", '"', ","]


def _floats() -> np.ndarray:
    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
             1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 9.999999999999999e-05, 0.0001, 0.1, 0.3, 1 / 3, 1.0, -1.0,
             123456789012345678.0, 2.0**53, 2.0**53 + 2, 7.93e-05, 1e-7, 1e22, 1e21, 0.5, 100.0, 1e100]
    bits = rng.integers(0, 2**63, 2000, dtype=np.int64).view(np.float64)  # every exponent, subnormals, NaNs
    scaled = rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000)
    digits = rng.integers(0, 6, 500)
    rounded = np.array([round(v, int(d)) for v, d in zip(rng.random(500) * 1000, digits, strict=True)])
    return np.concatenate([edges, bits, scaled, rounded])


def test_floats_of_every_magnitude() -> None:
    values = _floats()
    with np.errstate(over="ignore"):
        frame = pd.DataFrame({"f64": values, "f32": values.astype(np.float32), "f16": values.astype(np.float16)})
    _assert_fast_and_equal(frame)
    _assert_fast_and_equal(frame[["f64"]])
    text = frame_csv_bytes(frame[["f64"]].iloc[:12], False).decode()
    assert text.splitlines() == ["0.0", "-0.0", "inf", "-inf", '""', "5e-324", "-5e-324", "2.2250738585072014e-308",
                                 "1.7976931348623157e+308", "1e+16", "1000000000000000.0", "9999999999999998.0"]


def test_ints_and_bools() -> None:
    rng = np.random.default_rng(3)
    ints = np.concatenate([[0, -1, 1, np.iinfo(np.int64).min, np.iinfo(np.int64).max],
                           rng.integers(-2**63, 2**63 - 1, 300, dtype=np.int64)])
    n = len(ints)
    frame = pd.DataFrame({
        "int64": ints,
        "int8": ints.astype(np.int8),
        "uint64": np.concatenate([[np.iinfo(np.uint64).max], rng.integers(0, 2**64 - 1, n - 1, dtype=np.uint64)]),
        "uint16": ints.astype(np.uint16),
        "bool": ints % 3 == 0,
        "Int64": pd.Series([None if i % 4 == 0 else int(v) for i, v in enumerate(ints)], dtype="Int64"),
        "UInt8": pd.Series([None if i % 5 == 0 else i % 256 for i in range(n)], dtype="UInt8"),
        "boolean": pd.Series([None if i % 3 == 0 else bool(i % 2) for i in range(n)], dtype="boolean"),
    })
    _assert_fast_and_equal(frame)
    for column in ("Int64", "boolean"):  # NA alone in its row
        _assert_fast_and_equal(frame[[column]])
    assert frame_csv_bytes(frame[["Int64", "boolean"]].iloc[:3], True) == b'Int64,boolean\n,\n-1,True\n1,False\n'


def test_object_columns_of_strings_numbers_and_none() -> None:
    cells: list[object] = ["x,y", None, 7, -2**80, 1.5, float("nan"), float("inf"), 0.1, 1e16, "", 'q"', 10**30]
    frame = pd.DataFrame({"mixed": pd.Series(cells * 3, dtype=object),
                          "none": pd.Series([None] * len(cells) * 3, dtype=object),
                          "ints": pd.Series([i * 10**15 - 7 for i in range(len(cells) * 3)], dtype=object)})
    _assert_fast_and_equal(frame)
    _assert_fast_and_equal(frame[["mixed"]])
    _assert_fast_and_equal(frame[["none"]])


def test_object_columns_of_bools_and_none() -> None:
    """A verdict that may be undefined (``responses.consistent``: True, False or None) is written
    here, as pandas writes it: ``True``, ``False`` and the empty field."""
    verdicts = pd.Series([True, False, None, True, None, False] * 5, dtype=object)
    frame = pd.DataFrame({"consistent": verdicts, "mixed": pd.Series([True, 1, 1.5, "=x", None, False] * 5, dtype=object),
                          "n": range(30)})
    _assert_fast_and_equal(frame)
    _assert_fast_and_equal(frame[["consistent"]])
    assert frame_csv_bytes(frame[["consistent"]].iloc[:3], False) == b'True\nFalse\n""\n'


def test_empty_frames_slices_and_headers() -> None:
    frame = pd.DataFrame({"a,b": ["1", "2", "3"], "": [1, 2, 3], "q\"": [0.5, np.nan, 2.0], 3: [True, False, True]})
    _assert_fast_and_equal(frame)
    _assert_fast_and_equal(frame.iloc[1:])  # a slice: arrow arrays with an offset
    _assert_fast_and_equal(frame[[""]])  # header of one empty label: ""
    for empty in (frame.iloc[:0], frame[[""]].iloc[:0]):
        assert frame_csv_bytes(empty, True) == _pandas(empty, True)
        assert frame_csv_bytes(empty, False) == b""
    duplicated = pd.concat([frame, frame], axis=1)
    _assert_fast_and_equal(duplicated)


UNHANDLED = {
    "datetime": pd.Series(pd.to_datetime(["2024-01-02 00:00:00", None, "2024-03-04 05:06:00"], format="ISO8601")),
    "timedelta": pd.Series(pd.to_timedelta([1, None, 3], unit="s")),
    "category": pd.Series(["a", "b,c", None], dtype="category"),
    "Float64": pd.Series([0.1, None, 1e16], dtype="Float64"),
    "complex": pd.Series([1 + 2j, 0j, -1j]),
    "object_numpy_scalars": pd.Series([np.float64(0.1), np.int64(3), None], dtype=object),
    "object_other": pd.Series([b"bytes", Decimal("1.10"), dt.date(2024, 1, 2)], dtype=object),
    "object_lists": pd.Series([[1, 2], "x", None], dtype=object),
}


@pytest.mark.parametrize("kind", sorted(UNHANDLED))
def test_an_unhandled_column_sends_the_frame_to_pandas(kind: str) -> None:
    frame = pd.DataFrame({"n": [1, 2, 3], "s": ["a", 'b"', "c\n"], kind: UNHANDLED[kind]})
    assert _arrow_body(frame) is None
    for header in (True, False):
        assert frame_csv_bytes(frame, header) == _pandas(frame, header)
        assert frame_csv_text(frame, header) == _by_hand(frame).to_csv(index=False, header=header)


def test_no_columns_and_lone_surrogates_go_to_pandas() -> None:
    for frame in (pd.DataFrame(), pd.DataFrame(index=range(3))):
        assert _arrow_body(frame) is None
        assert frame_csv_bytes(frame, True) == _pandas(frame, True)
    frame = pd.DataFrame({"s": pd.Series(["ok", "\ud83d alone"], dtype=object)})
    assert _arrow_body(frame) is None
    assert frame_csv_text(frame, True) == frame.to_csv(index=False)  # the same text pandas gives
    with pytest.raises(UnicodeEncodeError):  # and the same error its encoding gives
        frame_csv_bytes(frame, True)


_ALPHABET = st.sampled_from(CODE_POINTS + ["a", "b", " "] * 5)
_TEXT = st.text(_ALPHABET, max_size=6)


def _column(kind: str, n: int) -> st.SearchStrategy[pd.Series]:
    floats = st.floats(allow_nan=True, allow_infinity=True)
    cells: dict[str, st.SearchStrategy[object]] = {
        "object": st.one_of(st.none(), _TEXT), "str": st.one_of(st.none(), _TEXT), "int64": st.integers(-2**63, 2**63 - 1),
        "bool": st.booleans(), "Int64": st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
        "boolean": st.one_of(st.none(), st.booleans()), "float64": floats,
        "mixed": st.one_of(st.none(), _TEXT, st.integers(), floats),
    }
    dtype = {"mixed": object, "float64": np.float64}.get(kind, kind)
    return st.lists(cells[kind], min_size=n, max_size=n).map(lambda values: pd.Series(values, dtype=dtype))


@st.composite
def _frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 6))
    kinds = draw(st.lists(st.sampled_from(["object", "str", "int64", "bool", "Int64", "boolean", "float64", "mixed"]),
                          min_size=1, max_size=4))
    names = draw(st.lists(_TEXT, min_size=len(kinds), max_size=len(kinds), unique=True))
    return pd.DataFrame({name: draw(_column(kind, n)).array for name, kind in zip(names, kinds, strict=True)}, index=range(n))


@settings(max_examples=300, deadline=None)
@given(_frames(), st.booleans())
def test_any_frame_of_handled_columns_is_what_pandas_writes(frame: pd.DataFrame, header: bool) -> None:
    assert _arrow_body(frame) is not None
    assert frame_csv_bytes(frame, header) == _pandas(frame, header)
