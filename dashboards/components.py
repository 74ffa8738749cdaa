"""Display helpers that keep model output inert.

Responses, paths, answers and problem texts are untrusted text written by a model (or by
whoever produced an imported file). They are only ever shown through elements that do not
interpret markup (``st.text``, ``st.code``, tables), never through Markdown or HTML. The few
labels that must be Markdown (link labels, captions) pass data through :func:`md_escape`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import numpy as np
import pandas as pd
import streamlit as st

TRACE_PAGE = "views/trace_viewer.py"
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~$:&=])")
_MD_LINE_START = re.compile(r"^(\s*)(\d*)([-.])(?=\s|$)")
_MD_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()<>#+!|~$:&=.\-])")


def md_escape(text: Any) -> str:
    """``text`` with every Markdown/HTML-significant character backslash-escaped (and a leading
    list marker), newlines flattened: Markdown then shows it literally."""
    escaped = _MD_SPECIAL.sub(r"\\\1", str(text).replace("\n", " "))
    return _MD_LINE_START.sub(lambda m: f"{m.group(1)}{m.group(2)}\\{m.group(3)}", escaped)


def md_unescape(text: str) -> str:
    """The text :func:`md_escape` was given (newlines aside): what a reader sees."""
    return _MD_ESCAPED.sub(r"\1", text)


def fmt(value: Any, digits: int = 4) -> str:
    """A number as the tables show it (``digits`` decimals); '—' when missing."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def fmt_interval(interval: Any, digits: int = 4) -> str:
    """``[lo, hi]`` as text; '—' when there is none."""
    if not interval or len(interval) != 2 or any(v is None for v in interval):
        return "—"
    return f"[{fmt(interval[0], digits)}, {fmt(interval[1], digits)}]"


def trace_link(run: Any, task: Any, problem_id: Any, sample_idx: Any, label: str) -> None:
    """A link to the trace viewer showing this sample (the same deep link a browser can bookmark)."""
    params = {"run": str(run), "task": str(task), "problem": str(problem_id), "sample": str(int(sample_idx))}
    st.page_link(TRACE_PAGE, label=md_escape(label), query_params=params)


def table(frame: pd.DataFrame, *, height: int | Literal["auto"] = "auto") -> None:
    """A long table, scrollable (drawn on a canvas: no Markdown, no HTML, no links)."""
    st.dataframe(frame, hide_index=True, width="stretch", height=height)


def text_table(frame: pd.DataFrame) -> None:
    """A short table drawn as HTML text (readable, searchable, fully visible): ``st.table`` renders
    cells as Markdown, so every cell is escaped first and shows literally."""
    st.table(frame.astype(str).map(md_escape), hide_index=True)
