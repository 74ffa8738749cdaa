"""Training dynamics: how accuracy and branching move with the checkpoint step, one line per model family.

Structure metrics come from :func:`analysis.stats.structure_stats`, accuracy from the report's
:func:`pr1_eval.report.run_report.run_report` and path diversity from :mod:`analysis.diversity`, all per
(model family, decoding, task, step); each trend is tested with :func:`analysis.drift.trend`
(Spearman's ρ against step, with scipy's and, for few steps, the exact permutation p-value).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.drift import trend
from analysis.safe_text import plot_text
from analysis.stats import structure_stats
from dashboards.components import fmt, text_table
from dashboards.data import Context, context
from dashboards.diversity_sample import pair_sample
from dashboards.tables import is_complete, metric_k
from pr1_eval.report.run_report import run_report

KEYS = ["model_family", "decoding", "task", "step"]
METRICS: dict[str, str] = {
    "mean@K": "mean@K (math-verify)",
    "pass@K": "pass@K (unbiased)",
    "parallel_ratio": "parallel ratio",
    "blocks_per_response": "blocks per response",
    "first_block_rel_pos": "first block: relative position",
    "bleu_mean": "path diversity: mean pairwise BLEU",
}


def step_points(ctx: Context, max_blocks: int) -> pd.DataFrame:
    """One row per family × decoding × task × step with every metric of :data:`METRICS`."""
    samples = ctx.samples()
    stepped = samples[samples["step"].notna()]
    if stepped.empty:
        return pd.DataFrame(columns=KEYS + list(METRICS))
    points = structure_stats(stepped, by=KEYS)
    accuracy = []
    for key, group in stepped.groupby(KEYS, sort=True):
        k_values = {ctx.k(str(r)) for r in group["run"].unique()}
        k = k_values.pop() if len(k_values) == 1 else None
        metrics = run_report(group, k)["tasks"][key[2]]
        row = {**dict(zip(KEYS, key, strict=True)), "K": None, "mean@K": None, "pass@K": None}
        kk = metric_k(metrics)
        if is_complete(metrics) and kk:  # an unfinished step has no mean@K (the report says so)
            row.update({"K": kk, "mean@K": metrics.get(f"mean@{kk}"), "pass@K": metrics.get(f"pass@{kk}")})
        accuracy.append(row)
    points = points.merge(pd.DataFrame(accuracy), on=KEYS, how="left")
    pairs = pair_sample(ctx, max_blocks)
    if pairs.empty:
        points["bleu_mean"] = None
    else:
        bleu = pairs.groupby(KEYS, dropna=False)["bleu"].mean().rename("bleu_mean").reset_index()
        points = points.merge(bleu, on=KEYS, how="left")
    return points


def trends(points: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Spearman's ρ of each metric against step, per family × decoding × task."""
    rows = []
    for (family, decoding, task), group in points.groupby(KEYS[:3], sort=True):
        for metric in metrics:
            result = trend(group["step"].astype(float), pd.to_numeric(group[metric], errors="coerce"))
            rows.append({"model_family": family, "decoding": decoding, "task": task, "metric": metric,
                         "n_steps": str(result["n_steps"]), "spearman ρ": fmt(result["spearman_rho"]),
                         "p": fmt(result["p_value"]), "p (exact)": fmt(result["p_value_exact"]),
                         "note": result["note"] or ""})
    return pd.DataFrame(rows)


def figure(points: pd.DataFrame, metric: str) -> go.Figure:
    fig = go.Figure()
    for (family, decoding, task), group in points.groupby(KEYS[:3], sort=True):
        group = group.sort_values("step")
        fig.add_trace(go.Scatter(x=group["step"].astype(float), y=pd.to_numeric(group[metric], errors="coerce"),
                                 mode="lines+markers", name=plot_text(f"{family} · {decoding} · {task}")))
    fig.update_layout(title=METRICS[metric], xaxis_title="checkpoint step", height=360,
                      margin={"t": 50, "b": 40, "l": 40, "r": 10}, legend={"orientation": "h", "y": -0.25})
    return fig


def render() -> None:
    ctx = context()
    st.title("Training dynamics")
    with st.sidebar:
        chosen = st.multiselect("Metrics", list(METRICS), default=list(METRICS), format_func=lambda m: METRICS[m],
                                key="td_metrics")
        max_blocks = int(st.number_input("Blocks per run × task for BLEU (0 = all)", min_value=0, value=200,
                                         step=100, key="td_max_blocks"))
    with st.spinner("Computing metrics per checkpoint step…"):
        points = ctx.cached("step_points", lambda: step_points(ctx, max_blocks), max_blocks)
    if points.empty:
        st.info("None of the selected runs carries a checkpoint step (run.json model.step, or global_step_N in "
                "the model path). Select runs of a training job to see its dynamics.")
        return
    st.caption(f"{points['step'].nunique()} step(s); one line per model family × decoding × task. Path diversity "
               "is the mean symmetrised BLEU (0–1) of sibling paths.")
    columns = st.columns(2)
    for i, metric in enumerate(chosen):
        with columns[i % 2]:
            st.plotly_chart(figure(points, metric), key=f"td_fig_{metric}")
    st.subheader("Trend over steps (Spearman's ρ)")
    text_table(trends(points, chosen))
    st.subheader("Values per step")
    view = points[KEYS + [m for m in chosen if m in points]].copy()
    for metric in chosen:
        view[metric] = [fmt(v) for v in view[metric]]
    view["step"] = view["step"].astype(str)
    text_table(view.astype(str))


render()
