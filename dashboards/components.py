"""Display helpers that keep run data inert on every page.

Responses, paths, answers, problem texts, run and task names, problem ids, model paths and
families, finish reasons and the notes built from them are untrusted text, written by a model
or by whoever produced an imported file. How each Streamlit element treats text (Streamlit
1.67): ``st.text``, ``st.code`` and ``st.dataframe`` cells (drawn on a canvas) show it exactly;
``st.markdown``, ``st.caption``, ``st.table`` cells, alerts, ``st.metric`` values and widget
labels parse it as GitHub-flavoured Markdown *with autolinking*. So long texts and anything a
reader copies go through the literal elements; the short labels that only exist as Markdown
pass data through :func:`md_escape` (:func:`analysis.common.safe_text.markdown_text`: escaped, and
autolinks broken with an invisible word joiner; its docstring gives the reasons). plotly
labels go through :func:`analysis.common.safe_text.plot_text`. Nothing here ever enables
``unsafe_allow_html``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import numpy as np
import pandas as pd
import streamlit as st

from analysis.common.safe_text import markdown_plain, markdown_text

TRACE_PAGE = "views/trace_viewer.py"


#: A formula of problem text: ``$$…$$`` or ``$…$`` on one line.
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
#: What a formula must not hold to be rendered: anything a link could start from, or KaTeX's
#: commands that reach outside the formula (left as literal text instead).
_MATH_UNSAFE = re.compile(r"://|www\.|@|\\(?:href|url|html|includegraphics|class|id|style|data)", re.I)


def latex_markdown(text: Any) -> str:
    """Problem text as Markdown whose only markup is its formulas: each ``$…$`` / ``$$…$$`` is kept
    for Streamlit's KaTeX, everything else is :func:`md_escape`d line by line (line breaks kept).

    Why: benchmark problems are written in LaTeX (``$17_b$ is a divisor of $97_b$``), which reads
    badly raw; the rest of the text is still untrusted and shown literally. A formula holding a
    link start or a KaTeX command that reaches outside the formula (``\\href``) stays literal text."""
    raw = str(text)
    parts, last = [], 0
    for found in _MATH.finditer(raw):
        body = (found.group(1) or found.group(2)).replace("\n", " ").strip()
        if not body or _MATH_UNSAFE.search(body):
            continue
        parts += [_escaped_lines(raw[last:found.start()]), f"$${body}$$" if found.group(1) else f"${body}$"]
        last = found.end()
    parts.append(_escaped_lines(raw[last:]))
    return "".join(parts)


def _escaped_lines(text: str) -> str:
    return "  \n".join(markdown_text(line) if line else "" for line in text.split("\n"))


def md_escape(text: Any) -> str:
    """``text`` for a Markdown element, shown literally (:func:`analysis.common.safe_text.markdown_text`)."""
    return markdown_text(text)


def md_unescape(text: str) -> str:
    """What a reader sees of :func:`md_escape`'s output (newlines aside)."""
    return markdown_plain(text)


def widget_default(key: str, value: Any) -> Any:
    """``value`` as a widget's default, or ``None`` once Session State holds the widget's key.

    Streamlit logs a warning with a 40-line stack (once per process) when a widget gets a
    default *and* a value set through ``st.session_state`` (a deep link, a remembered filter);
    the Session State value wins anyway, so the default is left out then."""
    return None if key in st.session_state else value


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


def run_legend(labels: dict[str, str]) -> None:
    """The full name of every run a table shows by a shortened label (:func:`dashboards.fit.short_run_names`),
    behind an expander right below the table; nothing when no label was shortened."""
    pairs = [(label, name) for name, label in labels.items() if label != name]
    if not pairs:
        return
    with st.expander(f"Full run names ({len(pairs)} shortened in the tables; … stands for what they all share or a cut)"):
        for label, name in pairs:
            st.text(f"{label}  =  {name}")


def path_length(info: dict[str, Any] | None, j: int, text: str) -> str:
    """Path ``j``'s length in tokens where the blocks frame counted them (the unit of the block's span
    in the header), else in characters, saying so."""
    lengths = None if info is None else info.get("path_token_lengths")
    if lengths is not None and j < len(lengths) and lengths[j] is not None and not pd.isna(lengths[j]):
        return f"{int(lengths[j])} tokens"
    counted = info is not None and info.get("token_start") is not None
    return f"{len(text)} characters" + (" (no tokenizer for path tokens)" if counted else "")
