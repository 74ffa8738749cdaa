"""Accuracy against tokens for test-time controllers: the frontier a replay draws.

One panel per task; each controller a point at (mean tokens per question, accuracy), with its
sequential tokens in the hover and as the marker size's label. Total tokens and sequential tokens
are different costs (what a provider bills against how long a user waits), so they are two
panels' x axes, never one axis with two meanings.

The authors' published points, when given, are wide open rings drawn *over* ours (ours a filled
dot inside): a reproduced point then reads as a dot in a ring, a missed one as a ring apart. They
have their own legend entry, the hover says ``equal`` or the differences, and the title says how
many rows equal theirs. (They were a ring under our dot, with no legend entry: invisible where
the reproduction is exact, which is everywhere on the released data.)
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pr1_eval.replay.rows import ReplayRow, agreement, replay_row
from pr1_eval.replay.sources import NEEDED, ReplaySource, questions_from_rows
from pr1_eval.replay.specs import parse_spec


def _plain(text: str) -> str:
    """``text`` as Plotly figure text that renders as written (its pseudo-HTML tags escaped)."""
    return html.escape(str(text), quote=False)


def probed_runs(samples: pd.DataFrame) -> list[str]:
    """The runs of a loaded samples frame whose samples carry probe answers (replayable)."""
    if "probe_answers" not in samples or samples.empty:
        return []
    probed = samples[samples["probe_answers"].notna()]
    return sorted(probed["run"].astype(str).unique())


def replay_loaded(samples: pd.DataFrame, specs: Sequence[str], seeds: int) -> list[ReplayRow]:
    """Replay ``specs`` on every probed run × task of a loaded samples frame (the one loader's
    frame, so the dashboard reads runs as every other page does)."""
    rows: list[ReplayRow] = []
    parsed = [parse_spec(s) for s in specs]
    for (run, task), group in samples[samples["probe_answers"].notna()].groupby(["run", "task"], sort=True):
        records = [{str(k): v for k, v in r.items()} for r in group[list(NEEDED)].to_dict("records")]
        source = ReplaySource(label=f"{run}/{task}", model=str(group["model"].iloc[0]), task=str(task),
                              questions=questions_from_rows(records, str(run)))
        rows.extend(replay_row(source, spec, list(range(seeds)), "exact") for spec in parsed)
    return rows


def frontier_figure(rows: Sequence[ReplayRow]) -> go.Figure:
    """Accuracy (%) against total tokens (top) and sequential tokens (bottom), one column per task."""
    tasks = sorted({r.task for r in rows})
    # names from files are escaped: Plotly renders <a>, <b> in figure text (a task named from a file became a link)
    fig = make_subplots(rows=2, cols=len(tasks), subplot_titles=[*map(_plain, tasks), *([""] * len(tasks))],
                        shared_yaxes=True, vertical_spacing=0.16, horizontal_spacing=0.06)
    controllers = list(dict.fromkeys(r.controller for r in rows))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    for c_index, controller in enumerate(controllers):
        color = palette[c_index % len(palette)]
        for t_index, task in enumerate(tasks):
            for row_index, (x_name, authors_x) in enumerate((("tokens", "authors_tokens"),
                                                             ("seq_tokens", "authors_seq_tokens"))):
                mine = [r for r in rows if r.task == task and r.controller == controller]
                _add_points(fig, mine, x_name, authors_x, color, controller,
                            first=t_index == 0 and row_index == 0, row=row_index + 1, col=t_index + 1)
    for t_index in range(len(tasks)):
        fig.update_xaxes(title_text="tokens per question (all branches)", type="log", row=1, col=t_index + 1)
        fig.update_xaxes(title_text="sequential tokens (longest chain)", type="log", row=2, col=t_index + 1)
    fig.update_yaxes(title_text="accuracy (%)", col=1)
    compared = [agreement(r) for r in rows if agreement(r) is not None]
    title = "Test-time controllers: accuracy against tokens (replayed)"
    if compared:
        equal = sum(a == "equal" for a in compared)
        title += (f"<br><sup>dots: this replay; rings: the authors' published points; "
                  f"{equal} of {len(compared)} rows equal theirs (a dot inside its ring)</sup>")
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="authors' published point (ring)",
                                 marker={"color": "#444", "size": 18, "symbol": "circle-open", "line": {"width": 2}},
                                 legendgroup="authors", showlegend=True, hoverinfo="skip"), row=1, col=1)
    fig.update_layout(title={"text": title, "x": 0.01, "xanchor": "left"},
                      height=760, margin={"t": 90, "l": 70, "r": 30, "b": 60},
                      legend={"orientation": "h", "y": -0.12}, template="plotly_white")
    return fig


def _add_points(fig: go.Figure, rows: Sequence[ReplayRow], x_name: str, authors_x: str, color: str,
                controller: str, *, first: bool, row: int, col: int) -> None:
    if not rows:
        return
    hover = [f"{_plain(r.controller)} on {_plain(r.task)}<br>accuracy {r.acc:.2f}%<br>tokens {r.tokens:,.0f}<br>"
             f"sequential {r.seq_tokens:,.0f}<br>branches started {r.branches:.1f}" for r in rows]
    fig.add_trace(go.Scatter(x=[getattr(r, x_name) for r in rows], y=[r.acc for r in rows], mode="markers",
                             marker={"color": color, "size": 11}, name=_plain(controller), legendgroup=controller,
                             showlegend=first, hovertext=hover, hoverinfo="text"), row=row, col=col)
    theirs: list[Any] = [r for r in rows if r.authors_acc is not None]
    if theirs:
        fig.add_trace(go.Scatter(x=[getattr(r, authors_x) for r in theirs], y=[r.authors_acc for r in theirs],
                                 mode="markers", marker={"color": color, "size": 22, "symbol": "circle-open",
                                                         "line": {"width": 2.5}},
                                 name=f"{_plain(controller)} (authors)", legendgroup=controller, showlegend=False,
                                 hovertext=[f"{_plain(r.controller)}: the authors' published point "
                                            f"({_plain(r.authors_row or 'their row')})<br>accuracy {r.authors_acc:.2f}%"
                                            f"<br>vs this replay: {agreement(r)}" for r in theirs],
                                 hoverinfo="text"), row=row, col=col)
