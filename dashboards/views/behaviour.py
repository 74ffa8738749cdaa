"""Behaviour: how the selected runs branch — distributions of blocks, paths, tokens inside blocks,
block positions, accuracy with and without a block, and format-check failures by kind.

Per-run figures come from :func:`analysis.structure.branching.structure_stats` (run × task) and the loader's
blocks frame; histograms are binned here (shares of each run's responses or blocks), so a run
with more samples does not dwarf the others and the browser receives bins, not 96,000 points.
Each run × task row says whether it holds every sample its run.json declares (``complete``); a
declared task with no sample gets a row too, so a task that never started does not vanish.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.common.safe_text import plot_text
from analysis.structure.branching import mark_unmeasurable, structure_stats, unmeasured_runs
from dashboards.components import fmt, md_escape, run_legend, text_table
from dashboards.data import Context, context
from dashboards.fit import relabel, short_run_names
from dashboards.tables import bar_label, binned, format_failures

UNIT_NAMES = {"char": "characters", "token": "tokens", "mixed": "tokens for some runs, characters for others"}
ACCURACY_VIEW = ["run", "task", "complete", "n_samples", "n_scored", "accuracy", "accuracy_with_block",
                 "accuracy_without_block"]
STATS_VIEW = ["run", "task", "complete", "parallel_ratio", "blocks_per_response", "paths_per_block", "in_block_share",
              "first_block_rel_pos", "block_rel_pos", "position_unit", "format_ok_ratio"]


def formatted(stats: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    view = stats[columns].copy()
    for column in columns[3:]:
        view[column] = [fmt(v) for v in view[column]]
    return view.astype(str)


def with_completeness(ctx: Context, stats: pd.DataFrame) -> pd.DataFrame:
    """``stats`` with the ``complete`` mark, plus a row (no numbers) for each selected declared task
    that holds no sample."""
    cells = ctx.selected_completeness()
    held = set(zip(stats["run"].astype(str), stats["task"].astype(str), strict=True))
    absent = cells[[(str(r), str(t)) not in held for r, t in zip(cells["run"], cells["task"], strict=True)]]
    if len(absent):
        stats = pd.concat([stats, absent[["run", "task"]].assign(n_samples=0, n_scored=0)], ignore_index=True)
        order = {run: i for i, run in enumerate(dict.fromkeys(stats["run"]))}  # beside its run's other tasks
        stats = stats.iloc[stats["run"].map(order).argsort(kind="stable")].reset_index(drop=True)
    return ctx.mark(stats)


def bars(title: str, x_title: str, labels: list[str], shares: dict[str, np.ndarray]) -> go.Figure:
    fig = go.Figure([go.Bar(x=labels, y=values, name=plot_text(run)) for run, values in shares.items()])
    fig.update_layout(title=plot_text(title), xaxis_title=plot_text(x_title), yaxis_title="share", barmode="group",
                      margin={"t": 50, "b": 40, "l": 40, "r": 10}, **legend_below(len(shares)))
    return fig


def legend_below(entries: int) -> dict[str, Any]:
    """Layout for a legend of ``entries`` runs under a half-width chart: its top anchored below the axis title,
    and the figure taller by a row per entry (a run's name fills a row of a half-width column). With a fixed
    height, ten runs' legend scrolled inside the figure and its first rows sat on the axis title."""
    return {"height": 300 + 20 * entries, "legend": {"orientation": "h", "yanchor": "top", "y": -0.34, "x": 0}}


def count_shares(frame: pd.DataFrame, column: str, cap: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """Share of each run's rows with value 0, 1, …, cap-1 and ≥ cap."""
    labels = [str(i) for i in range(cap)] + [f"≥{cap}"]
    edges = np.arange(cap + 2) - 0.5
    edges[-1] = np.inf
    return labels, {str(run): binned(group[column].astype(float), edges) for run, group in frame.groupby("run")}


def block_lengths(blocks: pd.DataFrame) -> tuple[pd.Series, str]:
    """Length of each block (<Parallel> to </Parallel>): tokens when every block has token positions."""
    if len(blocks) and blocks["token_start"].notna().all() and blocks["token_end"].notna().all():
        return (blocks["token_end"].astype(float) - blocks["token_start"].astype(float)), "tokens"
    return (blocks["char_end"] - blocks["char_start"]).astype(float), "characters"


def render_distributions(ctx: Context) -> None:
    samples, blocks = ctx.samples(), ctx.blocks()
    unmeasured = unmeasured_runs(ctx.loaded.run_info)  # answers only, stripped tags: 0 blocks is no measurement
    samples = samples[~samples["run"].astype(str).isin(list(unmeasured))]
    left, right = st.columns(2)
    labels, shares = count_shares(samples, "n_blocks", 5)
    left.plotly_chart(bars("Blocks per response", "blocks", labels, shares), key="bh_blocks")
    if blocks.empty:
        right.info("No block in the selection.")
        return
    labels, shares = count_shares(blocks, "n_paths", 5)
    right.plotly_chart(bars("Paths per block", "paths", labels, shares), key="bh_paths")
    left, right = st.columns(2)
    edges = np.linspace(0.0, 1.0, 21)
    edges[-1] = 1.0 + 1e-9
    positions = {str(run): binned(group["rel_start"], edges) for run, group in blocks.groupby("run")}
    left.plotly_chart(bars("Relative position of every block", "position of <Parallel> in the response",
                           [f"{e:.2f}" for e in edges[:-1]], positions), key="bh_positions")
    lengths, unit = block_lengths(blocks)
    top = max(float(np.nanpercentile(lengths, 99)), 1.0)
    length_edges = np.linspace(0.0, top, 21)
    length_edges[-1] = np.inf
    per_run = {str(run): binned(lengths[group.index], length_edges) for run, group in blocks.groupby("run")}
    right.plotly_chart(bars(f"{unit.capitalize()} inside each block", unit,
                            [f"{e:.0f}" for e in length_edges[:-1]], per_run), key="bh_lengths")


def render() -> None:
    ctx = context()
    st.title("Behaviour")
    with st.spinner("Computing structure statistics…"):
        stats = ctx.cached("structure_stats", lambda: with_completeness(ctx, mark_unmeasurable(
            structure_stats(ctx.samples(), by=["run", "task"]), ctx.loaded.run_info, fill="n/a")))
    render_distributions(ctx)
    labels = short_run_names(ctx.runs)  # runs named by long paths: the part that tells them apart
    st.subheader("Accuracy with and without a block")
    accuracy = stats.melt(id_vars=["run", "task", "complete"], value_vars=["accuracy_with_block", "accuracy_without_block"])
    fig = go.Figure([go.Bar(x=[plot_text(bar_label(str(r), str(t), str(c)))
                               for r, t, c in zip(group["run"], group["task"], group["complete"], strict=True)],
                            y=pd.to_numeric(group["value"]), name=str(variable).replace("accuracy_", ""))
                     for variable, group in accuracy.groupby("variable")])
    fig.update_layout(barmode="group", yaxis_range=[0, 1.02], height=340, margin={"t": 20, "b": 40},
                      xaxis={"automargin": True})
    st.plotly_chart(fig, key="bh_accuracy")
    text_table(relabel(formatted(stats, ACCURACY_VIEW), labels))
    run_legend(labels)
    if (sentence := ctx.incomplete_caption("the Training dynamics trends and the leaderboard ranking")) is not None:
        st.caption(sentence)
    st.subheader("Structure per run × task")
    text_table(relabel(formatted(stats, STATS_VIEW), labels))
    units = {UNIT_NAMES.get(str(u), str(u)) for u in [*stats["in_block_unit"], *stats["position_unit"]]
             if isinstance(u, str) and u in UNIT_NAMES}  # not the 'n/a' of a run whose structure was not measured
    st.caption(f"Shares inside blocks and positions are measured in {' and '.join(sorted(units)) or 'tokens'} "
               "(tokens when the run stored token positions, else characters).")
    for record in stats[stats["notes"].fillna("").astype(bool)].to_dict("records"):
        st.caption(f"{md_escape(record['run'])} · {md_escape(record['task'])}: {md_escape(record['notes'])}")
    st.subheader("Format-check failures by kind")
    failures = ctx.cached("format_failures", lambda: format_failures(ctx.samples()))
    if failures.empty:
        st.success("Every selected response passes the strict format check.")
    else:
        failures = failures.assign(**{"share of run": [fmt(v) for v in failures["share of run"]]})
        text_table(relabel(failures.astype(str), labels))


render()
