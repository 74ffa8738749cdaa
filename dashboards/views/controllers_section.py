"""The Efficiency page's section on test-time controllers, for runs that carry probe answers.

Replays the controllers (:mod:`pr1_eval.replay`, the rules of ``pr1-eval replay``) on the selected
probed runs and draws accuracy against tokens (:func:`analysis.efficiency.frontier.frontier_figure`).
Fewer seeds than the command's 100 by default (20), so the page answers in seconds; the caption
says how many were used and points at the command for the full protocol.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.efficiency.frontier import frontier_figure, probed_runs, replay_loaded
from dashboards.components import text_table
from dashboards.data import Context
from pr1_eval.replay.specs import DEFAULT_SPECS

DEFAULT_SEEDS = 20
MAX_SEEDS = 100


def render_controllers(ctx: Context) -> None:
    """The section, or nothing when no selected run holds probe answers."""
    samples = ctx.samples()
    if not probed_runs(samples):
        return
    st.subheader("Test-time controllers (replayed on recorded branches)")
    chosen = st.multiselect("Controllers", list(DEFAULT_SPECS), default=list(DEFAULT_SPECS), key="ctl_specs")
    seeds = min(MAX_SEEDS, int(st.number_input(f"Branch orders (seeds, at most {MAX_SEEDS})", min_value=1,
                                               value=DEFAULT_SEEDS, step=1, key="ctl_seeds")))
    if not chosen:
        st.info("Choose at least one controller.")
        return
    rows = ctx.cached("controllers", lambda: replay_loaded(samples, chosen, seeds), tuple(chosen), seeds)
    st.plotly_chart(frontier_figure(rows), key="ctl_frontier")
    table = pd.DataFrame([{"run/task": r.source, "controller": r.controller, "accuracy %": f"{r.acc:.2f}",
                           "tokens/question": f"{int(r.tokens):,}", "sequential": f"{int(r.seq_tokens):,}",
                           "branches read": f"{r.branches:.1f}"} for r in rows])
    text_table(table)
    st.caption(f"Means over {seeds} seeded branch orders; correct = the answer string equals the gold, tokens as the "
               "Parallel-Probe authors count them. `pr1-eval replay RUN` gives the full 100-seed protocol and the "
               "authors' figures beside ours.")
