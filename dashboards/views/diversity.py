"""Diversity and roles: are sibling paths really different, and does a block explore or verify?

BLEU (symmetrised sacrebleu, 0–1) and, on request, embedding cosine per pair of sibling paths
come from :func:`analysis.pipeline.scheduled.pairs_of`; roles from :func:`analysis.pipeline.scheduled.roles_of`
and :func:`analysis.structure.roles.role_shares`. The most and least similar pairs link to the trace viewer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.common.safe_text import plot_text, plot_texts
from analysis.structure.roles import ROLES, role_shares
from dashboards.components import fmt, text_table, trace_link
from dashboards.data import Context, context
from dashboards.diversity_sample import pair_sample, role_sample, sample_note
from dashboards.tables import binned

N_LINKS = 5


def histogram(pairs: pd.DataFrame, column: str, title: str) -> go.Figure:
    edges = np.linspace(0.0, 1.0, 26)
    edges[-1] = 1.0 + 1e-9
    fig = go.Figure()
    for run, group in pairs.groupby("run"):
        values = group[column].dropna()
        if len(values):
            fig.add_trace(go.Bar(x=[f"{e:.2f}" for e in edges[:-1]], y=binned(values, edges),
                                 name=plot_text(f"{run} (mean {values.mean():.4f}, n={len(values)})")))
    fig.update_layout(title=title, barmode="group", xaxis_title=column, yaxis_title="share of pairs", height=340,
                      margin={"t": 50, "b": 40, "l": 40, "r": 10}, legend={"orientation": "h", "y": -0.3})
    return fig


def summary_table(pairs: pd.DataFrame, blocks: pd.DataFrame, ctx: Context) -> pd.DataFrame:
    """Per run × task: whether it is complete, pairs, mean BLEU and cosine, and the share of each block role."""
    keys = ["run", "task"]
    means = pairs.groupby(keys).agg(n_pairs=("bleu", "size"), bleu_mean=("bleu", "mean"),
                                    cosine_mean=("cosine", "mean")).reset_index()
    table_ = role_shares(blocks, by=keys).merge(means, on=keys, how="left")
    for column in ["bleu_mean", "cosine_mean", *(f"share_{r}" for r in ROLES)]:
        table_[column] = [fmt(v) for v in table_[column]]
    table_["n_pairs"] = [fmt(None if pd.isna(v) else int(v)) for v in table_["n_pairs"]]
    marked = ctx.mark(table_)
    return marked[["run", "task", "complete", *(c for c in table_.columns if c not in keys)]].astype(str)


def pair_links(pairs: pd.DataFrame, ascending: bool) -> None:
    chosen = pairs.dropna(subset=["bleu"]).sort_values("bleu", ascending=ascending, kind="stable").head(N_LINKS)
    for row in chosen.to_dict("records"):  # plain Python values: the block and path numbers are ints
        block, path_i, path_j = int(row["block_idx"]), int(row["path_i"]), int(row["path_j"])
        trace_link(row["run"], row["task"], row["problem_id"], row["sample_idx"],
                   f"{row['bleu']:.4f} · {row['run']} · {row['task']} · {row['problem_id']} · sample "
                   f"{row['sample_idx']} · block {block + 1}, paths {path_i + 1}–{path_j + 1}")


def render() -> None:
    ctx = context()
    st.title("Diversity and roles")
    with st.sidebar:
        max_blocks = int(st.number_input("Blocks per run × task (0 = all)", min_value=0, value=200, step=100,
                                         key="dv_max_blocks"))
        embeddings = st.toggle("Embedding cosine (loads all-MiniLM-L6-v2)", value=False, key="dv_embeddings")
    if ctx.blocks().empty:
        st.info("No block in the selection: nothing to compare.")
        return
    with st.spinner("Scoring path pairs and block roles…"):
        pairs = pair_sample(ctx, max_blocks, embeddings)
        blocks = role_sample(ctx, max_blocks, embeddings)
    st.caption(f"Computed on {sample_note(ctx, max_blocks)}.")
    text_table(summary_table(pairs, blocks, ctx))
    if (sentence := ctx.incomplete_caption("the Training dynamics trends and the leaderboard ranking")) is not None:
        st.caption(sentence)
    shares = role_shares(blocks, by=["run"])
    fig = go.Figure([go.Bar(x=plot_texts(shares["run"]), y=shares[f"share_{role}"], name=role) for role in ROLES])
    fig.update_layout(title="Block roles (share of blocks)", barmode="stack", yaxis_range=[0, 1.0], height=320,
                      margin={"t": 50, "b": 40})
    left, right = st.columns(2)
    left.plotly_chart(histogram(pairs, "bleu", "Pairwise BLEU of sibling paths"), key="dv_bleu")
    if embeddings:
        right.plotly_chart(histogram(pairs, "cosine", "Pairwise embedding cosine"), key="dv_cosine")
    else:
        right.plotly_chart(fig, key="dv_roles")
    if embeddings:
        st.plotly_chart(fig, key="dv_roles_wide")
    left, right = st.columns(2)
    with left:
        st.subheader("Most similar pairs")
        pair_links(pairs, ascending=False)
    with right:
        st.subheader("Least similar pairs")
        pair_links(pairs, ascending=True)


render()
