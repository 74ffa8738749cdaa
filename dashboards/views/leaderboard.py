"""Leaderboard: the numbers ``report`` and ``leaderboard`` give, with intervals and paired comparisons.

The table comes from :func:`analysis.leaderboard.compute_leaderboard` on the selected runs and
tasks. When the runs are not comparable (different problems or k) it says why and, unless the
user asks to compare on the shared problems only, falls back to each run's own ``report``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboards.components import fmt, fmt_interval, md_escape, text_table
from dashboards.data import Context, context
from dashboards.tables import leaderboard_rows, report_rows
from pr1_eval.errors import Pr1EvalError


def leaderboard_document(ctx: Context, baseline: str | None, intersect: bool) -> dict[str, Any] | str:
    """The leaderboard document, or why it could not be built (a one-line reason)."""
    try:
        from analysis.leaderboard import compute_leaderboard
    except ImportError:
        return "the leaderboard module (analysis.leaderboard) is not installed"
    from analysis.loader import LoadedRuns

    def compute() -> dict[str, Any] | str:
        selected = LoadedRuns(samples=ctx.samples(), blocks=ctx.loaded.blocks.iloc[0:0], run_info=ctx.loaded.run_info)
        try:
            return compute_leaderboard(selected, baseline=baseline, tasks=ctx.tasks, intersect=intersect).document
        except Pr1EvalError as exc:
            return str(exc)

    return ctx.cached("leaderboard", compute, baseline, intersect)


def shown(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows as text: numbers with four decimals, counts as integers, intervals as [lo, hi]."""
    out = rows.copy()
    for column in out.columns:
        if column.endswith("ci95"):
            out[column] = [fmt_interval(v) if isinstance(v, list) else "—" for v in out[column]]
        elif column in ("step", "rank", "k") or column.startswith("n_"):
            out[column] = [fmt(None if v is None or pd.isna(v) else int(v)) for v in out[column]]
        elif pd.api.types.is_numeric_dtype(out[column]) or out[column].map(lambda v: isinstance(v, float)).any():
            out[column] = [fmt(v) for v in out[column]]
    return out.fillna("—").astype(str)


def comparison_table(document: dict[str, Any]) -> pd.DataFrame:
    rows = [{"run": c["run"], "baseline": c["baseline"], "task": c["task"], "n_problems": str(c["n_problems"]),
             "Δ mean@K": fmt(c["delta"]), "ci95": fmt_interval(c["ci95"]), "p": fmt(c["p_value"]),
             "p (Holm)": fmt(c["p_holm"]), "test": str(c["test"])} for c in document["comparisons"]]
    return pd.DataFrame(rows)


def render() -> None:
    ctx = context()
    st.title("Leaderboard")
    st.caption("Per task: mean@K with its 95 % bootstrap interval over problems, unbiased pass@K, the paper's "
               "Pass@K (VERL's bootstrap best@K), maj@K and the parallel ratio — the numbers of `pr1-eval report` "
               "and `pr1-eval leaderboard`, with K the runs' samples per problem.")
    with st.sidebar:
        baseline_choice = st.selectbox("Baseline for comparisons", ["automatic", *ctx.runs], key="lb_baseline")
        intersect = st.toggle("Compare on shared problems only", value=False, key="lb_intersect",
                              help="cut every run to the tasks and problems all selected runs share")
    baseline = None if baseline_choice == "automatic" else baseline_choice
    with st.spinner(f"Computing the leaderboard of {len(ctx.runs)} run(s) (metrics, intervals, paired tests)…"):
        document = leaderboard_document(ctx, baseline, intersect)
    if isinstance(document, str):
        st.warning("Paired leaderboard unavailable: " + md_escape(document))
        st.subheader("Per-run report")
        rows = ctx.cached("report_rows", lambda: report_rows(ctx.loaded, ctx.runs, ctx.tasks))
        text_table(shown(rows))
        return
    text_table(shown(leaderboard_rows(document)))
    st.caption(f"Sorted by the average mean@K ({md_escape(document['average_convention'])}); "
               "'tied with above' marks a row not significantly below the one above it (paired sign-flip test, "
               f"p ≥ {document['alpha']}).")
    if document["comparisons"]:
        st.subheader("Paired comparisons against the baseline")
        text_table(comparison_table(document))
    for note in document["notes"]:
        st.text(f"note: {note}")


render()
