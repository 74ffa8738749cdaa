"""The Training page's view of a training job's own steps (one run per step: rollouts, validation).

The numbers are :mod:`analysis.runs.steps`' step table (each step's summary from its run.json,
or computed from its samples once), so a job of 300 steps draws from 600 small JSON reads and
redraws from memory. First the paper's training-dynamics figures side by side (parallel ratio,
the relative position of the first ``<Parallel>`` with its trend test, accuracy), with the
curriculum's stage boundaries and reward switch marked; then every other per-step curve; the
trend test of each (Spearman's ρ against step, :func:`analysis.structure.drift.metric_trend`); and the
values per step. Training rollouts and validation are separate series, never pooled.

A step run that is not complete (``status`` other than complete: a step still being written, a
killed import) is left out of the points and trends unless the sidebar toggle lets it in, and is
marked in the values table either way.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.common.completeness import MARK
from analysis.common.safe_text import plot_text
from analysis.runs.steps import (
    KIND_LABELS,
    MAX_DIVERSITY_STEPS,
    SEED,
    STEP_METRICS,
    boundaries,
    job_notes,
    parse_steps,
    step_table,
    step_trends,
    with_diversity,
)
from dashboards.components import fmt, md_escape, table, text_table
from dashboards.data import Context

#: The paper's three figures, drawn first and side by side.
PAPER_FIGURES = ("parallel_ratio", "first_block_rel_pos", "accuracy")
KIND_COLOURS = {"train": "#1f77b4", "validation": "#d62728"}
VALUE_COLUMNS = ["job", "kind", "step", "complete", "stage", "reward_mode", *STEP_METRICS, "blocks_sampled", "k",
                 "n_samples", "summary_source"]


def job_steps(ctx: Context, max_blocks: int) -> pd.DataFrame:
    """Every step run of the job(s) with its summary and sampled path diversity (memoised)."""

    def compute() -> pd.DataFrame:
        dirs = [Path(d) for d in ctx.training]
        steps = step_table(dirs, [ctx.training[d] for d in ctx.training])
        return with_diversity(steps, ctx.training, max_blocks)

    return ctx.cached("job_steps", compute, max_blocks)


def figure(steps: pd.DataFrame, metric: str, marks: list[tuple[int, str]], title: str | None = None) -> go.Figure:
    """One metric over steps, a line per kind, the stage boundaries as dashed vertical lines;
    ``title`` is plotly markup already made safe (:func:`trend_title`), else the metric's label."""
    fig = go.Figure()
    for kind, group in steps.groupby("kind", sort=True):
        values = pd.to_numeric(group[metric], errors="coerce")
        if values.notna().any():
            fig.add_trace(go.Scatter(x=group["step"], y=values, mode="lines+markers", name=KIND_LABELS[str(kind)],
                                     line={"color": KIND_COLOURS.get(str(kind))}, marker={"size": 4},
                                     connectgaps=True))
    for step, label in marks:
        fig.add_vline(x=step, line_dash="dash", line_color="#555", annotation_text=plot_text(label),
                      annotation_position="top left", annotation_font_size=10)
    fig.update_layout(title=title or plot_text(STEP_METRICS[metric]), xaxis_title="training step", height=360,
                      margin={"t": 80, "b": 40, "l": 40, "r": 10}, legend={"orientation": "h", "y": -0.3})
    return fig


def trend_title(trends: pd.DataFrame, metric: str) -> str:
    """The metric's label with ρ and p of each series, as the paper's position figure states them
    (plotly markup: the label and the values escaped, the line break and small print plotly's own)."""
    parts = []
    chosen = trends[trends["metric"] == metric]
    for kind, rho, p in zip(chosen["kind"], chosen["spearman_rho"], chosen["p_value"], strict=True):
        if rho is not None and not pd.isna(rho):
            parts.append(f"{kind}: ρ = {float(rho):+.2f}, p = {fmt(p, 3)}")
    label = plot_text(STEP_METRICS[metric])
    return f"{label}<br><sup>{plot_text('; '.join(parts))}</sup>" if parts else label


def sidebar() -> tuple[list[str], int, list[int]]:
    with st.sidebar:
        st.markdown("**Training job**")
        chosen = st.multiselect("Step curves", list(STEP_METRICS), default=list(STEP_METRICS),
                                format_func=lambda m: STEP_METRICS[m], key="tj_metrics")
        max_blocks = int(st.number_input("Blocks per step for path diversity (0 = none)", min_value=0, value=50,
                                         step=10, key="tj_max_blocks"))
        typed = st.text_input("Mark steps (e.g. 200)", value="", key="tj_marks",
                              help="stage boundaries to draw when the runs do not record their stage or reward mode")
    return chosen, max_blocks, parse_steps(typed)


def render_job(ctx: Context) -> None:
    """The training-job section of the Training page."""
    chosen, max_blocks, typed = sidebar()
    with st.spinner("Reading the steps' summaries…"):
        every = job_steps(ctx, max_blocks)
    steps = every if ctx.include_incomplete else every[every["complete"]]
    st.header("Training job: its own rollouts, per step")
    kinds = ", ".join(f"{KIND_LABELS[str(k)]}: {int((every['kind'] == k).sum())} step(s)"
                      for k in sorted(every["kind"].unique()))
    stored = int((every["summary_source"] == "stored in run.json").sum())
    st.caption(md_escape(f"{every['job'].nunique()} job(s); {kinds}. Summaries: {stored} stored in run.json, "
                         f"{len(every) - stored} computed from the samples. Accuracy is mean@k over each step's "
                         "samples (math-verify), best@k where a problem holds k > 1 samples."))
    for note in job_notes(every):
        st.caption(md_escape(note))
    incomplete = every[~every["complete"]]
    if len(incomplete):
        treated = "included on request" if ctx.include_incomplete else "left out of the curves and trends"
        st.caption(md_escape(f"{MARK}: {len(incomplete)} step run(s) not complete (still written, or an import "
                             f"killed): {treated}."))
    if max_blocks:
        sampled = int(pd.to_numeric(every["blocks_sampled"], errors="coerce").fillna(0).sum())
        st.caption(md_escape(f"Path diversity: mean symmetrised BLEU (0–1) of sibling paths on a seeded sample "
                             f"(seed {SEED}) of at most {max_blocks} blocks per step, on at most "
                             f"{MAX_DIVERSITY_STEPS} evenly spaced steps of each series: {sampled} blocks in all."))
    if steps.empty:
        st.info("No complete step yet.")
        return
    trends = ctx.cached("job_trends", lambda: step_trends(steps, list(STEP_METRICS)), max_blocks,
                        ctx.include_incomplete)
    for job, group in steps.groupby("job", sort=True):
        marks = boundaries(group, typed)
        job_trends = trends[trends["job"] == job]
        st.subheader(md_escape(f"{job}"))
        if marks:
            st.caption(md_escape("Marked: " + "; ".join(f"step {s}: {label}" for s, label in marks)))
        columns = st.columns(len(PAPER_FIGURES))
        for column, metric in zip(columns, PAPER_FIGURES, strict=True):
            with column:
                title = trend_title(job_trends, metric) if metric == "first_block_rel_pos" else None
                st.plotly_chart(figure(group, metric, marks, title), key=f"tj_paper_{job}_{metric}")
        others = [m for m in chosen if m not in PAPER_FIGURES]
        grid = st.columns(2)
        for i, metric in enumerate(others):
            with grid[i % 2]:
                st.plotly_chart(figure(group, metric, marks), key=f"tj_fig_{job}_{metric}")
    st.subheader("Trend over steps (Spearman's ρ), per job and kind")
    shown = trends[trends["metric"].isin(chosen)].assign(
        metric=lambda f: f["metric"].map(STEP_METRICS), spearman_rho=lambda f: [fmt(v) for v in f["spearman_rho"]],
        p_value=lambda f: [fmt(v) for v in f["p_value"]], n_steps=lambda f: f["n_steps"].astype(str))
    text_table(shown.rename(columns={"spearman_rho": "spearman ρ", "p_value": "p", "p_method": "p method"}))
    st.subheader("Values per step")
    values = every[VALUE_COLUMNS].copy()
    values["complete"] = ["yes" if ok else MARK for ok in values["complete"]]
    values["kind"] = values["kind"].map(KIND_LABELS)
    table(values, height=min(600, 40 + 35 * len(values)))
