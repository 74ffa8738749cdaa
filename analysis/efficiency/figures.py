"""The efficiency pictures (plotly), shared by ``analyze``'s HTML pages, the dashboard and the notebooks.

* :func:`speedup_histogram` — per problem, mean response length / mean critical path, one
  overlaid histogram per run × task, the run's own speedup (ratio of means) in its legend entry;
* :func:`frontier_figure` — Mean@k against mean critical path, one point per run × task, the
  accuracy–latency Pareto frontier of each task drawn through its points
  (:func:`analysis.efficiency.latency.pareto_frontier`; complete points only, unless asked otherwise);
  hovering a point names its run, model, step and numbers, and its ``customdata`` holds the run's
  name and folder, percent-encoded (the HTML page opens the folder's ``run.json`` on click, the dashboard links the
  run's traces);
* :func:`training_figure` — parallel ratio and accuracy (left axis, 0–1) and speedup (right axis)
  against the step, one set of lines per series (family × decoding × task).

Every string from a run goes through :func:`analysis.common.safe_text.plot_text`; the run folder in
``customdata`` is never drawn, only handed to the click handler (:data:`OPEN_RUN_JS`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.common.completeness import MARK
from analysis.common.safe_text import plot_text
from analysis.efficiency.latency import pareto_frontier

UNIT_WORDS = {"token": "tokens", "char": "characters", "mixed": "tokens or characters (units differ)"}
#: Clicking a point of the frontier figure opens its run's ``run.json`` (a local folder) in a new tab.
OPEN_RUN_JS = """
var plot = document.getElementById('{plot_id}');
plot.on('plotly_click', function (event) {
  var point = event.points && event.points[0];
  var folder = point && point.customdata && point.customdata[1];
  if (typeof folder === 'string' && folder.charAt(0) === '/') {
    window.open('file://' + folder.replace(/\\/+$/, '') + '/run.json', '_blank');
  }
});
"""


def unit_words(frame: pd.DataFrame) -> str:
    """What the lengths of ``frame`` are counted in (its ``unit`` column)."""
    units = {str(u) for u in frame.get("unit", pd.Series(dtype=object)).dropna()}
    unit = "mixed" if len(units) > 1 else (units.pop() if units else "token")
    return UNIT_WORDS.get(unit, unit)


def _label(labels: Mapping[str, str], run: object) -> str:
    return labels.get(str(run), str(run))


def speedup_histogram(problems: pd.DataFrame, labels: Mapping[str, str] | None = None,
                      points: pd.DataFrame | None = None) -> go.Figure | None:
    """Per-problem speedups (:func:`analysis.efficiency.latency.problem_speedups`), one histogram per run × task;
    ``points`` (:func:`analysis.efficiency.latency.latency_points`) give each legend entry its run's speedup."""
    if problems.empty or problems["speedup"].notna().sum() == 0:
        return None
    labels = labels or {}
    overall = {} if points is None or points.empty else {
        (str(r), str(t)): s for r, t, s in zip(points["run"], points["task"], points["speedup"], strict=True)}
    top = max(2.0, float(np.ceil(problems["speedup"].max() * 10) / 10))
    tasks = sorted({str(t) for t in problems["task"]})
    runs = sorted({str(r) for r in problems["run"]})
    palette = plotly.colors.qualitative.Plotly
    figure = make_subplots(rows=len(tasks), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=[plot_text(t) for t in tasks])
    for (run, task), group in problems.groupby(["run", "task"], sort=True):  # a row per task, a colour per run
        values = group["speedup"].dropna()
        whole = overall.get((str(run), str(task)))
        name = f"{_label(labels, run)} · {task} (" + ("" if whole is None else f"speedup {whole:.2f}×, ") + \
            f"{len(values)} problems)"
        figure.add_trace(go.Histogram(x=values, name=plot_text(name), opacity=0.6,
                                      marker={"color": palette[runs.index(str(run)) % len(palette)]},
                                      xbins={"start": 1.0, "end": top + 0.05, "size": 0.05}),
                         row=tasks.index(str(task)) + 1, col=1)
    figure.update_layout(title="Token-latency speedup per problem (mean length / mean critical path)",
                         barmode="overlay", showlegend=True, legend={"orientation": "h", "y": -0.2},
                         height=max(450, 260 * len(tasks)))
    figure.update_xaxes(title_text="speedup (1 = no gain)", row=len(tasks), col=1)
    figure.update_yaxes(title_text="problems")
    return figure


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _hover(row: Mapping[Any, Any], label: str, unit: str) -> str:
    step = row.get("step")
    lines = [label, f"task: {row['task']}", f"model: {row.get('model')}",
             "step: —" if step is None or _missing(step) else f"step: {int(step)}",
             f"Mean@k: {float(row['accuracy']):.4f}", f"mean critical path: {float(row['critical_path']):.1f} {unit}",
             f"speedup: {float(row['speedup']):.3f}×, samples: {row['n_samples']}"]
    return "<br>".join(plot_text(line) for line in lines)


def frontier_figure(points: pd.DataFrame, labels: Mapping[str, str] | None = None,
                    include_incomplete: bool = False) -> go.Figure | None:
    """Mean@k against mean critical path per run × task, the Pareto frontier of each task marked.

    How it is laid out, and why (a reader's screenshots at 1440 px): points carry no text label,
    their run is in the hover (and in the table every surface prints under the figure), since run
    names of one sweep share most of their characters and their labels printed over each other and
    past the plot's edges; lengths in characters and in tokens get an x axis each, side by side
    (one panel per unit, the accuracy axis shared), never one axis "tokens or characters"; the title
    is one short line, what the marks mean its subtitle, so neither is cut at the right."""
    if points.empty or points["accuracy"].notna().sum() == 0:
        return None
    labels = labels or {}
    complete = points["complete"].astype(bool) if "complete" in points else pd.Series(True, index=points.index)
    palette = plotly.colors.qualitative.Plotly
    units = points["unit"].fillna("?") if "unit" in points else pd.Series("?", index=points.index)
    panels = sorted({str(u) for u in units})
    mixed = len(panels) > 1  # a length in characters is no match for one in tokens: a panel and frontier per unit
    figure = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.06,
                           subplot_titles=[f"lengths in {UNIT_WORDS.get(u, u)}" for u in panels] if mixed else None)
    tasks = sorted({str(t) for t in points["task"]})  # one colour per task, the same in every panel
    for (task, unit_key), group in points.groupby([points["task"], units], sort=True):
        color = palette[tasks.index(str(task)) % len(palette)]
        unit = UNIT_WORDS.get(str(unit_key), str(unit_key))
        name = f"{task} ({unit})" if mixed else str(task)
        eligible = group[complete[group.index] | include_incomplete]
        on = pd.Series(np.array(pareto_frontier(eligible["accuracy"], eligible["critical_path"]), dtype=bool),
                       index=eligible.index)
        frontier = group.loc[on[on].index].sort_values("critical_path")
        marks = [("" if complete[i] else f" {MARK}") for i in group.index]
        hover = [_hover(row, _label(labels, row["run"]) + mark, unit)
                 for row, mark in zip(group.to_dict("records"), marks, strict=True)]
        custom = [[plot_text(r), quote(p) if isinstance(p, str) and p.startswith("/") else ""]
                  for r, p in zip(group["run"], group.get("run_path", pd.Series("", index=group.index)), strict=True)]
        symbols = ["star" if on.get(i, False) else ("circle" if complete[i] else "circle-open") for i in group.index]
        col = panels.index(str(unit_key)) + 1
        figure.add_trace(go.Scatter(x=group["critical_path"], y=group["accuracy"], mode="markers",
                                    name=plot_text(f"{name}: run × task"), hovertext=hover,
                                    hoverinfo="text", customdata=custom, legendgroup=plot_text(name),
                                    marker={"size": 12, "symbol": symbols, "color": color}), row=1, col=col)
        if len(frontier):
            figure.add_trace(go.Scatter(x=frontier["critical_path"], y=frontier["accuracy"], mode="lines",
                                        line={"shape": "hv", "dash": "dash", "color": color}, hoverinfo="skip",
                                        legendgroup=plot_text(name),
                                        name=plot_text(f"{name}: Pareto frontier ({len(frontier)} of {len(group)})")),
                             row=1, col=col)
    for col, unit_key in enumerate(panels, start=1):
        figure.update_xaxes(title_text=f"mean critical path ({UNIT_WORDS.get(unit_key, unit_key)}) — lower is sooner",
                            row=1, col=col)
    figure.update_yaxes(title_text="Mean@k", row=1, col=1)
    detail = "★ on the Pareto frontier; hover a point for its run"
    if not complete.all():
        detail += f"; ○ {MARK}: " + ("on the frontier on request" if include_incomplete else "left off the frontier")
    figure.update_layout(title={"text": "Accuracy against token latency", "x": 0.01, "xanchor": "left",
                                "subtitle": {"text": html.escape(detail, quote=False)}}, margin={"t": 110},
                         showlegend=True, legend={"orientation": "h", "y": -0.2}, height=560)
    return figure


def training_figure(series: pd.DataFrame, keys: Sequence[str] = ("model_family", "decoding", "task"),
                    title: str = "Over training", family_name: Callable[[Any], str] | None = None) -> go.Figure | None:
    """Parallel ratio and accuracy (left, 0–1) and speedup (right) against ``step``, per series of
    ``keys``; ``family_name`` names a ``model_family`` in the legend (e.g. :func:`analysis.pipeline.figures.model_name`)."""
    if series.empty or "step" not in series or not any(
            c in series and series[c].notna().any() for c in ("parallel_ratio", "speedup", "accuracy")):
        return None
    figure = go.Figure()
    present = [k for k in keys if k in series]
    groups = series.groupby(present, sort=True, dropna=False) if present else [((), series)]
    styles = {"accuracy": ("accuracy", "y", "solid"), "parallel_ratio": ("parallel ratio", "y", "dot"),
              "speedup": ("speedup", "y2", "dash")}
    palette = plotly.colors.qualitative.Plotly
    for number, (key, group) in enumerate(groups):  # one colour per series, one dash per measure
        group = group.sort_values("step")
        values = dict(zip(present, key if isinstance(key, tuple) else (key,), strict=True))
        if family_name is not None and not _missing(values.get("model_family")):
            values["model_family"] = family_name(values["model_family"])
        name = " · ".join(str(v) for v in values.values() if not _missing(v))
        for column, (word, axis, dash) in styles.items():
            if column in group and group[column].notna().any():
                figure.add_trace(go.Scatter(x=group["step"].astype(float), y=group[column].astype(float), yaxis=axis,
                                            mode="lines+markers", line={"dash": dash, "color": palette[number % len(palette)]},
                                            name=plot_text(f"{word} · {name}" if name else word)))
    top = float(series["speedup"].max()) if "speedup" in series and series["speedup"].notna().any() else 2.0
    figure.update_layout(title=html.escape(f"{title}: accuracy (solid), parallel ratio (dotted), left; "
                                           "token-latency speedup (dashed), right", quote=False),
                         xaxis_title="step", yaxis={"title": "share", "range": [0, 1.02]},
                         yaxis2={"title": "speedup (×)", "overlaying": "y", "side": "right", "showgrid": False,
                                 # the left axis' 0-1.02 scaled, so the right axis' ticks sit on the left's grid
                                 "range": [0, 1.02 * max(2.0, math.ceil(top * 2) / 2)]},
                         showlegend=True, legend={"orientation": "h", "y": -0.2})
    return figure
