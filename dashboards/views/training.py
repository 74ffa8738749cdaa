"""Training dynamics: a training job's own steps (:mod:`dashboards.training_job`), then how accuracy
and branching move with the checkpoint step of evaluated checkpoints, one line per model family.

Training-step runs (a job's rollouts or validation, one run per step) appear only in the first
part; the checkpoint part is about runs that evaluated a checkpoint.

Structure metrics come from :func:`analysis.structure.branching.structure_stats`, accuracy from the report's
:func:`pr1_eval.report.run_report.run_report` and path diversity from :mod:`analysis.diversity.paths`, all per
(model family, decoding, task, step); each trend is tested with :func:`analysis.structure.drift.trend`
(Spearman's ρ against step, with scipy's and, for few steps, the exact permutation p-value).

Only complete run × tasks (checked against each run's ``run.json``, :mod:`analysis.common.completeness`)
enter the points and their trends, unless the sidebar toggle includes the incomplete ones; those
points are then marked in the values table, and their mean@K is over the problems that hold all K.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.common.completeness import MARK, cell_flags
from analysis.common.safe_text import plot_text
from analysis.structure.branching import structure_stats
from analysis.structure.drift import metric_trend
from dashboards.components import fmt, text_table
from dashboards.data import Context, context
from dashboards.diversity_sample import pair_sample
from dashboards.training_job import render_job
from pr1_eval.report.run_report import run_report
from pr1_eval.stats.names import metric_name

KEYS = ["model_family", "decoding", "task", "step"]
#: The accuracy columns, named as the report names them at a generic K.
MEAN, PASS = metric_name("mean", "K"), metric_name("pass", "K")
METRICS: dict[str, str] = {
    MEAN: f"{MEAN} (math-verify)",
    PASS: f"{PASS} (unbiased)",
    "parallel_ratio": "parallel ratio",
    "blocks_per_response": "blocks per response",
    "first_block_rel_pos": "first block: relative position",
    "bleu_mean": "path diversity: mean pairwise BLEU",
}


def step_points(ctx: Context, max_blocks: int) -> pd.DataFrame:
    """One row per family × decoding × task × step with every metric of :data:`METRICS`."""
    samples = ctx.trend_samples()
    stepped = samples[samples["step"].notna() & ~samples["run_path"].isin(set(ctx.training))]
    if stepped.empty:
        return pd.DataFrame(columns=KEYS + list(METRICS) + ["complete"])
    stepped = stepped.assign(_complete=cell_flags(stepped, ctx.completeness))
    points = structure_stats(stepped, by=KEYS)
    accuracy = []
    for key, group in stepped.groupby(KEYS, sort=True):
        runs = [str(r) for r in group["run"].unique()]
        k_values = {ctx.k(r) for r in runs}
        k = k_values.pop() if len(k_values) == 1 else None
        complete = bool(group["_complete"].all())
        # checked against the run's own run.json when the point is one complete run; an incomplete
        # point (let in by the toggle) is scored on the problems that hold all K, and marked
        record = ctx.loaded.run_info.get(runs[0]) if complete and len(runs) == 1 else None
        report = run_report(group.drop(columns="_complete"), k, run=record).tasks[str(key[2])]
        row = {**dict(zip(KEYS, key, strict=True)), "K": None, MEAN: None, PASS: None, "complete": complete}
        if (report.complete or not complete) and report.k:  # a complete point that fails the check has no mean@K
            metrics = report.metrics_or_partial  # an incomplete point let in: its partial numbers
            row.update({"K": report.k, MEAN: None if metrics is None else metrics.mean,
                        PASS: None if metrics is None else metrics.pass_at_k})
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
            result = metric_trend(group, metric)  # positions in different units get no trend, and say why
            rows.append({"model_family": family, "decoding": decoding, "task": task, "metric": metric,
                         "n_steps": str(result["n_steps"]), "spearman ρ": fmt(result["spearman_rho"]),
                         "p": fmt(result["p_value"]), "p method": result["p_method"] or "",
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
    if ctx.training:
        render_job(ctx)
    if ctx.loaded.samples.empty or not ctx.runs or not ctx.tasks:
        return
    if ctx.training and set(ctx.loaded.samples["run_path"].unique()) <= set(ctx.training):
        return  # every loaded run is a training step: no evaluated checkpoint to draw
    with st.sidebar:
        chosen = st.multiselect("Metrics", list(METRICS), default=list(METRICS), format_func=lambda m: METRICS[m],
                                key="td_metrics")
        max_blocks = int(st.number_input("Blocks per run × task for BLEU (0 = all)", min_value=0, value=200,
                                         step=100, key="td_max_blocks"))
    with st.spinner("Computing metrics per checkpoint step…"):
        points = ctx.cached("step_points", lambda: step_points(ctx, max_blocks), max_blocks, ctx.include_incomplete)
    if points.empty and ctx.training:
        return
    if points.empty:
        st.info("None of the selected runs carries a checkpoint step (run.json model.step, or global_step_N in "
                "the model path). Select runs of a training job to see its dynamics.")
        return
    if ctx.training:
        st.header("Evaluated checkpoints")
    st.caption(f"{points['step'].nunique()} step(s); one line per model family × decoding × task. Path diversity "
               "is the mean symmetrised BLEU (0–1) of sibling paths.")
    if (sentence := ctx.incomplete_caption("these points and trends")) is not None:
        st.caption(sentence)
    columns = st.columns(2)
    for i, metric in enumerate(chosen):
        with columns[i % 2]:
            st.plotly_chart(figure(points, metric), key=f"td_fig_{metric}")
    st.subheader("Trend over steps (Spearman's ρ)")
    text_table(trends(points, chosen))
    st.subheader("Values per step")
    view = points[KEYS + [m for m in chosen if m in points]].copy()
    view.insert(len(KEYS), "complete", ["yes" if ok else MARK for ok in points["complete"].fillna(True)])
    for metric in chosen:
        view[metric] = [fmt(v) for v in view[metric]]
    view["step"] = view["step"].astype(str)
    text_table(view.astype(str))


render()
