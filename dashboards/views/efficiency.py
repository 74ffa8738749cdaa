"""Efficiency: what thinking in parallel buys in latency, for the selected runs.

The tables are :func:`analysis.efficiency.latency.efficiency_tables` and the figures
:mod:`analysis.efficiency.figures`, the very ones ``analyze`` writes as HTML: Mean@k against mean
critical path with each task's accuracy–latency Pareto frontier (each point's hover names its run;
under the figure a link per point opens that run × task in the trace viewer), the per-problem
speedup histogram, and parallel ratio, accuracy and speedup over checkpoint steps (and over a
training job's steps, from the step runs' summaries when they hold a ``speedup``). Then, for
generated runs, the measured wall clock beside the token latency (``wall_s``: the two need not
agree, docs/efficiency.md says why).

Completeness as on every page: an incomplete run × task is marked and kept off the frontier and
the step lines unless the sidebar toggle includes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from analysis.common.completeness import MARK
from analysis.efficiency.figures import frontier_figure, speedup_histogram, training_figure, unit_words
from analysis.efficiency.latency import efficiency_tables, latency_samples, pareto_frontier
from analysis.pipeline.figures import model_name
from analysis.runs.steps import step_table
from analysis.structure.branching import measured_samples
from dashboards.components import TRACE_PAGE, fmt, md_escape, text_table
from dashboards.data import Context, context
from dashboards.views.controllers_section import render_controllers

#: The step summary's speedup (:mod:`pr1_eval.report.step_summary`), drawn for training-step runs.
SPEEDUP = "speedup"
#: Links to the trace viewer drawn under the frontier figure, at most.
MAX_LINKS = 24
POINT_VIEW = ["run", "task", "complete", "step", "n_samples", "accuracy", "critical_path", "response_length", "speedup",
              "parallel_ratio", "on frontier"]


def points_view(points: pd.DataFrame, include_incomplete: bool) -> pd.DataFrame:
    """The points as the table under the frontier shows them (frontier per task and unit, as drawn)."""
    on = pd.Series(False, index=points.index)
    units = points["unit"].fillna("?") if "unit" in points else pd.Series("?", index=points.index)
    for _, group in points.groupby([points["task"], units], sort=True):  # as the figure: a frontier per unit
        eligible = group[group["complete"] | include_incomplete] if "complete" in group else group
        on[eligible.index] = np.array(pareto_frontier(eligible["accuracy"], eligible["critical_path"]), dtype=bool)
    view = points.assign(**{"on frontier": ["★" if v else "" for v in on]})
    if "complete" in view:
        view["complete"] = ["yes" if ok else MARK for ok in view["complete"]]
    view = view[[c for c in POINT_VIEW if c in view]].copy()
    for column in ("accuracy", "critical_path", "response_length", "speedup", "parallel_ratio"):
        view[column] = [fmt(v, 1 if column in ("critical_path", "response_length") else 4) for v in view[column]]
    view["step"] = ["—" if pd.isna(s) else str(int(s)) for s in view["step"]]
    return view.astype(str)


def wall_clock(samples: pd.DataFrame) -> pd.DataFrame:
    """Per run × task with a measured wall clock: mean seconds per sample beside mean critical path."""
    if "wall_s" not in samples or samples["wall_s"].notna().sum() == 0:
        return pd.DataFrame()
    timed = latency_samples(samples[samples["wall_s"].notna()])
    grouped = timed.groupby(["run", "task"], sort=True)
    out = grouped.agg(n=("wall_s", "size"), wall_s=("wall_s", "mean"))
    if "critical_path" in timed:
        out = out.join(grouped["critical_path"].mean())
    return out.reset_index()


def run_links(points: pd.DataFrame) -> None:
    """A trace-viewer link per point (its run × task), frontier or not."""
    for row in points.head(MAX_LINKS).to_dict("records"):
        st.page_link(TRACE_PAGE, label=md_escape(f"traces of {row['run']} · {row['task']}"),
                     query_params={"run": str(row["run"]), "task": str(row["task"])})


def job_steps(ctx: Context) -> pd.DataFrame:
    """The training-step runs' rows (:func:`analysis.runs.steps.step_table`, from their stored
    summaries: no sample is read)."""
    return ctx.cached("efficiency_job_steps", lambda: step_table([Path(d) for d in ctx.training],
                                                                 list(ctx.training.values())))


def render_steps(ctx: Context, tables: dict[str, pd.DataFrame]) -> None:
    st.subheader("Over training steps")
    figure = training_figure(tables["steps"], title="Over checkpoint steps", family_name=model_name)
    if figure is None:
        st.info("None of the selected runs with a critical path carries a checkpoint step.")
    else:
        st.plotly_chart(figure, key="ef_steps")
    if not ctx.training:
        return
    steps = job_steps(ctx)
    if SPEEDUP not in steps or steps[SPEEDUP].notna().sum() == 0:
        st.caption("The training job's step summaries hold no speedup (summaries written before it was recorded).")
        return
    figure = training_figure(steps, keys=("job", "kind"), title="Training steps")
    if figure is not None:
        st.plotly_chart(figure, key="ef_job_steps")


def render(ctx: Context) -> None:
    st.title("Efficiency")
    measured, unmeasured = measured_samples(ctx.samples(), ctx.loaded.run_info)
    for note in unmeasured:  # answers-only imports, stripped tags: no latency, never "speedup 1.00x"
        st.caption(md_escape(note))
    tables = ctx.cached("efficiency", lambda: efficiency_tables(measured, ctx.selected_completeness(),
                                                                ctx.include_incomplete), ctx.include_incomplete)
    points = tables["points"]
    if points.empty:
        st.info("No selected sample has a critical path: every response with text gets one from its parsed blocks "
                "(runs stored before it existed, on read); the selected samples have no text.")
        render_controllers(ctx)
        return
    unit = unit_words(points)
    st.caption(f"Token latency: the {unit} on the critical path (main line, the longest path of each block, the "
               "summaries), what an engine running sibling paths side by side waits for. Speedup: mean length / mean "
               "critical path (a ratio of means). Wall-clock gains on a batching server are smaller "
               "(docs/guides/efficiency.md).")
    if (sentence := ctx.incomplete_caption("the frontier and the step lines")) is not None:
        st.caption(sentence)
    st.subheader("Accuracy against token latency")
    st.plotly_chart(frontier_figure(points, include_incomplete=ctx.include_incomplete), key="ef_frontier")
    text_table(points_view(points, ctx.include_incomplete))
    run_links(points)
    st.subheader("Speedup per problem")
    histogram = speedup_histogram(tables["problems"], points=points)
    if histogram is not None:
        st.plotly_chart(histogram, key="ef_hist")
    render_steps(ctx, tables)
    timed = wall_clock(ctx.samples())
    if not timed.empty:
        st.subheader("Wall clock (generated runs)")
        text_table(timed.assign(wall_s=[fmt(v) for v in timed["wall_s"]],
                                **({"critical_path": [fmt(v, 1) for v in timed["critical_path"]]}
                                   if "critical_path" in timed else {})).astype(str))
        st.caption("Seconds from a sample's first engine call to the one that finished it, batch-mates included.")
    render_controllers(ctx)


render(context())
