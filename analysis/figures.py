"""Plotly figures of an analysis, each written as one standalone HTML file (plotly.js inlined)
so it opens offline, from an e-mail or a CI artifact, with no server and no network.

With checkpoint steps the behaviour figures are lines against step (one line per family ×
decoding × task), which is how the paper's drift claim is read; without steps they are bars
per run × task, so a single run still gets its picture.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from analysis.roles import ROLES
from analysis.summary import Analysis

FIGURE_FILES: tuple[str, ...] = ("parallel_ratio.html", "block_position.html", "role_shares.html",
                                 "bleu_hist.html", "cosine_hist.html")


def write_figures(analysis: Analysis, out_dir: str | Path) -> tuple[list[Path], list[str]]:
    """Write the figures that have data; returns the files written and a note per figure skipped."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, go.Figure | None] = {
        "parallel_ratio.html": _metric_figure(analysis, ["parallel_ratio"], "Parallel ratio"),
        "block_position.html": _metric_figure(analysis, ["block_rel_pos", "first_block_rel_pos"],
                                              "Relative position of <Parallel> (all blocks, first block)"),
        "role_shares.html": _metric_figure(analysis, [f"share_{r}" for r in ROLES], "Block roles (share of blocks)"),
        "bleu_hist.html": _histogram(analysis.pairs, "bleu", "Pairwise BLEU of sibling paths (0–1)"),
        "cosine_hist.html": _histogram(analysis.pairs, "cosine", "Pairwise embedding cosine of sibling paths"),
    }
    written: list[Path] = []
    notes: list[str] = []
    for name, figure in figures.items():
        if figure is None:
            notes.append(f"{name} not written: no data for it")
            continue
        path = out / name
        figure.write_html(path, include_plotlyjs=True, full_html=True)
        written.append(path)
    return written, notes


def _metric_figure(analysis: Analysis, columns: list[str], title: str) -> go.Figure | None:
    """Lines against step when the drift table has points, else bars per run × task."""
    points = analysis.drift_points
    if not points.empty and all(c in points for c in columns) and points[columns].notna().any().any():
        figure = go.Figure()
        for (family, decoding, task), group in points.groupby(["model_family", "decoding", "task"], sort=True):
            group = group.sort_values("step")
            for column in columns:
                label = f"{task} · {family} · {decoding}" + (f" · {column}" if len(columns) > 1 else "")
                figure.add_trace(go.Scatter(x=group["step"].astype(float), y=group[column], mode="lines+markers",
                                            name=label))
        figure.update_layout(title=title, xaxis_title="checkpoint step", yaxis_title="value", yaxis_range=[0, 1.02])
        return figure
    runs = analysis.runs
    if runs.empty or not any(c in runs and runs[c].notna().any() for c in columns):
        return None
    labels = [f"{r} · {t}" for r, t in zip(runs["run"], runs["task"], strict=True)]
    figure = go.Figure([go.Bar(x=labels, y=runs[c], name=c) for c in columns if c in runs])
    figure.update_layout(title=title + " (no checkpoint steps: per run)", barmode="group", yaxis_range=[0, 1.02])
    return figure


def _histogram(pairs: pd.DataFrame, column: str, title: str) -> go.Figure | None:
    """One overlaid histogram per run of a pair measure, with the run's mean in the legend."""
    if pairs.empty or column not in pairs or pairs[column].notna().sum() == 0:
        return None
    figure = go.Figure()
    for run, group in pairs.groupby("run", sort=True):
        values = group[column].dropna()
        if len(values):
            figure.add_trace(go.Histogram(x=values, name=f"{run} (mean {values.mean():.4f}, n={len(values)})",
                                          opacity=0.6, xbins={"start": 0.0, "end": 1.0, "size": 0.02}))
    figure.update_layout(title=title, barmode="overlay", xaxis_title=column, yaxis_title="pairs")
    return figure
