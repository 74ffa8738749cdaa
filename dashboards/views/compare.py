"""Compare: two runs (e.g. two steps of one model) problem by problem — which problems flipped
from wrong to right and back, with links to both traces.

Per-problem counts are the report's (c correct of n samples; unscored counts as wrong). A problem
counts as solved when more than half of its samples are correct, or, on request, when any is.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.common.completeness import MARK
from dashboards.components import md_escape, table, trace_link
from dashboards.data import context
from dashboards.tables import default_a, default_b, flips

N_LINKS = 25
CRITERIA = {"majority": "more than half of the samples correct", "any": "at least one sample correct"}


def render_flips(frame: pd.DataFrame, change: str, run_a: str, run_b: str, task: str) -> None:
    rows = frame[frame["change"] == change]
    st.subheader(f"{change}: {len(rows)} problem(s)")
    for row in rows.head(N_LINKS).itertuples(index=False):
        trace_link(run_a, task, row.problem_id, row.open_a, f"A: {row.problem_id} in {run_a} ({row.c_a}/{row.n_a} correct)")
        trace_link(run_b, task, row.problem_id, row.open_b, f"B: {row.problem_id} in {run_b} ({row.c_b}/{row.n_b} correct)")
    if len(rows) > N_LINKS:
        st.caption(f"… and {len(rows) - N_LINKS} more (all in the table below).")


def render() -> None:
    ctx = context()
    st.title("Compare two runs")
    if len(ctx.runs) < 2:
        st.info("Select at least two runs in the sidebar to compare them.")
        return
    with st.sidebar:
        st.subheader("Compare")
        samples = ctx.samples()
        run_a = st.selectbox("Run A (before)", ctx.runs, index=ctx.runs.index(default_a(samples, ctx.runs)),
                             key="cmp_a")
        run_b = st.selectbox("Run B (after)", ctx.runs, index=ctx.runs.index(default_b(samples, ctx.runs, run_a)),
                             key="cmp_b")
        shared = sorted(set(samples.loc[samples["run"] == run_a, "task"]) & set(samples.loc[samples["run"] == run_b, "task"]))
    if not shared:  # said where the reader looks, not only in the sidebar
        st.warning(f"{md_escape(run_a)} and {md_escape(run_b)} share no selected task: pick two runs made on the "
                   "same task in the sidebar.")
        return
    with st.sidebar:
        task = st.selectbox("Task", shared, key="cmp_task")
        criterion = st.radio("Solved means", list(CRITERIA), format_func=CRITERIA.get, key="cmp_criterion")
    frame = ctx.cached("flips", lambda: flips(samples, run_a, run_b, task, criterion), run_a, run_b, task, criterion)
    st.markdown(f"**A** = {md_escape(run_a)} · **B** = {md_escape(run_b)} · task {md_escape(task)}: "
                f"{len(frame)} shared problem(s); solved in A: {int(frame['solved_a'].sum())}, "
                f"in B: {int(frame['solved_b'].sum())}.")
    cells = ctx.completeness.set_index(["run", "task"])
    for run in dict.fromkeys((run_a, run_b)):
        if (run, task) in cells.index and not bool(cells.loc[(run, task), "complete"]):
            st.warning(f"{md_escape(run)} · {md_escape(task)} is {MARK}: it lacks samples its run.json declares "
                       f"({md_escape(str(cells.loc[(run, task), 'missing']))}); only the problems both runs hold are "
                       "compared, and its counts cover only the samples held.")
    left, right = st.columns(2)
    with left:
        render_flips(frame, "wrong → right", run_a, run_b, task)
    with right:
        render_flips(frame, "right → wrong", run_a, run_b, task)
    st.subheader("Every shared problem")
    view = frame.assign(A=[f"{c}/{n}" for c, n in zip(frame["c_a"], frame["n_a"], strict=True)],
                        B=[f"{c}/{n}" for c, n in zip(frame["c_b"], frame["n_b"], strict=True)])
    table(view[["problem_id", "A", "B", "change"]].astype(str))


render()
