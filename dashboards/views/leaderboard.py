"""Leaderboard: the numbers ``report`` and ``leaderboard`` give, with intervals and paired comparisons.

The table comes from :func:`analysis.leaderboard.board.compute_leaderboard` on the selected runs and
tasks. When the runs are not comparable (different problems or k) it says so in one sentence
naming the sidebar toggle that compares them on their shared problems (the differences behind an
expander) and falls back to each run's own ``report``. Incomplete runs (against their run.json)
are left out of the ranking and named, unless the sidebar's include toggle is on; every table
marks them in its ``complete`` column.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from analysis.common.completeness import INCLUDE_LABEL, MARK
from dashboards.components import fmt, fmt_interval, md_escape, run_legend, text_table
from dashboards.data import Context, context
from dashboards.fit import length_unit, relabel, short_run_names, split_leaderboard, variance_table
from dashboards.tables import PARTIAL, leaderboard_rows, notes_apart, report_rows, starred
from pr1_eval.errors import Pr1EvalError
from pr1_eval.report.completeness import LIMIT_MARK

INTERSECT_LABEL = "Compare on shared problems only"


class Unavailable(tuple[str, tuple[str, ...]]):
    """Why the paired leaderboard could not be built: a reason, and for runs that are not comparable
    the differences (shown behind an expander, not as one long line). A tuple, so that a value the
    memo kept from an earlier rerun (when this page module was executed anew) is still recognised."""

    def __new__(cls, reason: str, differences: list[str] | None = None) -> Unavailable:
        return super().__new__(cls, (reason, tuple(differences or ())))


def is_unavailable(value: object) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)


def leaderboard_document(ctx: Context, baseline: str | None, intersect: bool) -> dict[str, Any] | Unavailable:
    """The leaderboard document, or why it could not be built."""
    try:
        from analysis.leaderboard.board import NotComparable, compute_leaderboard
    except ImportError:
        return Unavailable("the leaderboard module (analysis.leaderboard.board) is not installed")
    from analysis.runs.loader import LoadedRuns

    def compute() -> dict[str, Any] | Unavailable:
        selected = LoadedRuns(samples=ctx.samples(), blocks=ctx.loaded.blocks.iloc[0:0], run_info=ctx.loaded.run_info,
                              completeness=ctx.loaded.completeness)
        try:
            return compute_leaderboard(selected, baseline=baseline, tasks=ctx.tasks, intersect=intersect,
                                       include_incomplete=ctx.include_incomplete).document
        except NotComparable as exc:
            advice = (f"Turn on '{INTERSECT_LABEL}' in the sidebar to compare them on the problems they all share"
                      if exc.intersect_helps and not intersect else
                      "Comparing on shared problems cannot align them (no task or problem all share, or "
                      "another answer policy), so select fewer runs in the sidebar")
            return Unavailable(
                f"these runs are not comparable: they differ in problems, k, data or answer policy "
                f"({len(exc.differences)} difference(s), listed below). {advice}; each run's own report follows.",
                exc.differences)
        except Pr1EvalError as exc:
            return Unavailable(str(exc).replace("(--include-incomplete)", f"(the sidebar toggle '{INCLUDE_LABEL}')"))

    return ctx.cached("leaderboard", compute, baseline, intersect, ctx.include_incomplete)


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
             "p (Holm)": fmt(c["p_holm"]), "MDE": fmt(c.get("mde"))}
            for c in document["comparisons"]]
    return pd.DataFrame(rows)


def tests_used(document: dict[str, Any]) -> str:
    """The paired tests behind the p values, named once under the table: a column repeating them on
    every row pushed the table past the page once the MDE column came."""
    return ", ".join(sorted({str(c["test"]) for c in document["comparisons"]}))


def render() -> None:
    ctx = context()
    st.title("Leaderboard")
    st.caption("Per task: mean@K with its 95 % bootstrap interval over problems, unbiased pass@K, best@K_paper (the "
               "paper's Pass@K: VERL's bootstrap best@K on the paper's checker), maj@K and the parallel ratio — the "
               "numbers of `pr1-eval report` and `pr1-eval leaderboard`, under their names, with K the runs' samples "
               "per problem.")
    with st.sidebar:
        baseline_choice = st.selectbox("Baseline for comparisons", ["automatic", *ctx.runs], key="lb_baseline")
        intersect = st.toggle(INTERSECT_LABEL, value=False, key="lb_intersect",
                              help="cut every run to the tasks and problems all selected runs share")
    baseline = None if baseline_choice == "automatic" else baseline_choice
    with st.spinner(f"Computing the leaderboard of {len(ctx.runs)} run(s) (metrics, intervals, paired tests)…"):
        document = leaderboard_document(ctx, baseline, intersect)
    if is_unavailable(document) or not isinstance(document, dict):
        reason, differences = document
        st.warning("Paired leaderboard unavailable: " + md_escape(reason))
        if differences:
            with st.expander("What differs"):
                for line in differences:
                    st.text(line)
        render_report(ctx)
        return
    render_excluded(document)
    rows = leaderboard_rows(document)
    complete = {run["name"]: run.get("complete", True) for run in document["runs"]}
    limited = {run["name"]: bool(run.get("limited")) for run in document["runs"]}
    rows.insert(list(rows.columns).index("task") + 1, "complete",
                [("yes" if complete.get(r, True) else MARK) + (f" {LIMIT_MARK}" if limited.get(r) else "")
                 for r in rows["run"]])
    labels = short_run_names(ctx.runs)
    ranking, latency, other = split_leaderboard(relabel(rows, labels), length_unit(document))
    text_table(shown(ranking))
    run_legend(labels)
    st.caption(f"Sorted by the average mean@K ({md_escape(document['average_convention'])}); "
               "'tied with above' marks a row not significantly below the one above it (paired sign-flip test, "
               f"p ≥ {document['alpha']}). Answer policy of every run: "
               f"{md_escape(str(document.get('answer_policy', 'paper')))}.")
    if len(latency.columns):
        st.subheader("Token latency")
        text_table(shown(latency))
        st.caption("Per sample, the mean response length and the mean critical path (what a parallel engine waits "
                   "for); speedup = mean response length / mean critical path with its 95 % bootstrap interval, then "
                   "its median and 90th percentile over problems and over correct and wrong samples; the losing "
                   "share is the share of all length spent in paths shorter than their block's longest.")
    if len(other.columns):
        with st.expander("More metrics: " + ", ".join(c for c in other.columns if c not in ranking.columns)):
            text_table(shown(other))
    variance = variance_table(relabel(rows, labels))
    if len(variance.columns):
        with st.expander("Variance of mean@K: standard error, between and within problems, required k"):
            text_table(shown(variance))
            st.caption("se² = between + within; required k: the samples per problem past which more narrow the "
                       "interval by at most about 5 % (docs: Metrics).")
    if document["comparisons"]:
        st.subheader("Paired comparisons against the baseline")
        text_table(relabel(comparison_table(document), labels))
        st.caption(f"p: {md_escape(tests_used(document))}; MDE: the smallest difference of mean@K this comparison "
                   "detects with 80 % power at the 5 % level (2.80 × SD of the per-problem differences / √problems).")
    if document["notes"]:
        with st.expander(f"{len(document['notes'])} note(s)"):
            for note in document["notes"]:
                st.text(note)


def render_report(ctx: Context) -> None:
    """Each run's own report per task (runs that are not comparable): an incomplete row's partial
    numbers starred as ``pr1-eval report`` stars them, long notes below the table, runs by label."""
    st.subheader("Per-run report")
    rows = ctx.cached("report_rows", lambda: report_rows(ctx.loaded, ctx.runs, ctx.tasks))
    partial = rows.pop(PARTIAL) if PARTIAL in rows else pd.Series(False, index=rows.index)
    if len(rows):
        rows = ctx.mark(rows)
        rows = rows[["run", "task", "complete", *(c for c in rows.columns if c not in ("run", "task", "complete"))]]
    labels = short_run_names(ctx.runs)
    rows, notes = notes_apart(relabel(rows, labels))
    numbers = [c for c in rows.columns if c not in ("run", "task", "complete", "k", "n_problems", "note")]
    text_table(starred(shown(rows), partial, numbers))
    run_legend(labels)
    if partial.any():
        st.caption("Numbers marked * are partial, as in `pr1-eval report`: they cover only the problems that "
                   "hold all k samples of an incomplete run × task.")
    for note in notes:
        st.caption(md_escape(note))
    if (sentence := ctx.incomplete_caption("the ranking")) is not None:
        st.caption(sentence)


def render_excluded(document: dict[str, Any]) -> None:
    """One sentence naming the incomplete runs left out (or ranked on request), details behind an expander."""
    excluded = document.get("excluded") or []
    ranked = [run for run in document["runs"] if not run.get("complete", True)]
    if excluded:
        names = ", ".join(md_escape(e["name"]) for e in excluded)
        st.warning(f"{len(excluded)} run(s) left out of the ranking, {MARK} (they lack samples their run.json "
                   f"declares): {names}. Turn on '{INCLUDE_LABEL}' in the sidebar to rank them on what they hold.")
    elif ranked:
        st.warning(f"{len(ranked)} run(s) ranked on request though {MARK} (they lack samples their run.json declares "
                   f"({', '.join(md_escape(r['name']) for r in ranked)}); their numbers cover the problems that hold "
                   "all K samples.")
    if excluded or ranked:
        with st.expander("What is missing"):
            for entry in [*excluded, *ranked]:
                for line in entry["missing"]:
                    st.text(f"{entry['name']}: {line}")


render()
