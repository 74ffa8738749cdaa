"""``leaderboard --html``: one self-contained page (plotly.js embedded once, so it opens offline).

What is on it, and why: the leaderboard tables (the same rows the terminal prints); accuracy
(mean@K) and pass@K with their 95% intervals over steps for each family, which is how a
researcher reads "which checkpoint is best"; parallel ratio and first-block position over steps
(the paper's training-dynamics view); and a per-problem heatmap (problems × checkpoints,
fraction correct) per task, rows sorted by how much a problem changes across checkpoints, so
the problems that flip are on top. With many problems only the ones that change are drawn
(at most :data:`MAX_HEATMAP_ROWS`); the page says how many were left out.

Many tasks (decision): a page is read by a person, and plotly's cost grows with every subplot
(``make_subplots`` with 3,000 columns did not finish in 300 s). With more than
:data:`MAX_FIGURE_TASKS` tasks the over-checkpoint figures draw one subplot, the average over
tasks (the leaderboard's own average for mean@K, pass@K and the parallel ratio; first-block
positions averaged where every task measures them in one unit), and the heatmaps are drawn for
the :data:`MAX_HEATMAPS` tasks with the most problems that change across checkpoints. The page
says so; the tables above them list every task.

Run names, task names, problem ids, families and notes are untrusted: table cells and notes go
through :func:`analysis.common.safe_text.html_text`, every plotly string made from data through
:func:`analysis.common.safe_text.plot_text` (the figures are also what notebook 01 shows).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from analysis.common.safe_text import html_text, plot_text, plot_texts
from analysis.leaderboard.board import LATENCY_FIELDS, UNIT_LABELS, Leaderboard
from analysis.leaderboard.schema import RunAverage, TaskCell
from analysis.leaderboard.tables import MDE_NOTE, comparison_rows, intervals_and_ties_note, ranking_rows, task_rows
from pr1_eval.output_paths import check_output_target
from pr1_eval.stats.names import metric_name
from pr1_eval.store.safe_write import write_atomic

#: Tasks with at most this many problems are drawn whole; larger ones only where they change.
SMALL_TASK = 60
MAX_HEATMAP_ROWS = 300
#: Tasks drawn one subplot each in the over-checkpoint figures; more are drawn as their average.
MAX_FIGURE_TASKS = 12
#: Tasks that get a heatmap; with more, those with the most problems that change.
MAX_HEATMAPS = 12
#: One colour per family × decoding in every subplot (the metric is told apart by the dash).
PALETTE = qualitative.Plotly
_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222}
h1{font-size:22px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd} h3{font-size:15px;margin-top:22px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
.wide{max-width:100%;overflow-x:auto}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f5f5f5;white-space:normal;vertical-align:bottom;min-width:4em}
td.name{white-space:normal;overflow-wrap:anywhere;min-width:10em;max-width:18em;text-align:left}
td.text{white-space:normal;overflow-wrap:break-word;max-width:18em}
td:first-child,th:first-child,th.name{text-align:left} .ci{color:#666;font-size:11px}
tr.tied td{color:#666} .note{color:#555;font-size:13px}
"""
#: Columns that hold names (runs, models): they wrap, where numbers never do.
NAME_COLUMNS = frozenset({"run", "vs", "model", "family"})
#: Short texts from data (a task name) that wrap only when one is long, without a minimum width.
TEXT_COLUMNS = frozenset({"task", "decoding", "test"})
_WITH_INTERVAL = re.compile(r"^(\S+) (\[[^\]]*\])$")


def _cell(head: str, value: str) -> str:
    """One cell. Why the layout: at 1440 px the ranked and per-task tables ran past the window, every
    cell held on one line; now headers and names wrap, and a value's interval goes under it
    (``0.577`` over ``[0.473, 0.677]``), so a table of three tasks fits; a still wider one
    scrolls inside its own box (``.wide``), never the page."""
    interval = _WITH_INTERVAL.match(value)
    if interval:
        text = f"{html_text(interval.group(1))}<br><span class='ci'>{html_text(interval.group(2))}</span>"
    else:
        text = html_text(value)
    if head in NAME_COLUMNS:
        return f"<td class='name'>{text}</td>"
    return f"<td class='text'>{text}</td>" if head in TEXT_COLUMNS else f"<td>{text}</td>"


def html_table(rows: list[dict[str, str]], tied: list[bool] | None = None) -> str:
    if not rows:
        return "<p class='note'>(none)</p>"
    heads = list(rows[0])
    head = "".join(f"<th class='name'>{html_text(h)}</th>" if h in NAME_COLUMNS else f"<th>{html_text(h)}</th>"
                   for h in heads)
    body = []
    for i, row in enumerate(rows):
        cls = " class='tied'" if tied and tied[i] else ""
        body.append(f"<tr{cls}>" + "".join(_cell(h, str(row.get(h, ''))) for h in heads) + "</tr>")
    return f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def _x_values(runs: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """Steps when every run has one, else run names (in rank order)."""
    if all(r["step"] is not None for r in runs):
        return [r["step"] for r in runs], "checkpoint step"
    return plot_texts(r["name"] for r in runs), "run"


def _families(doc: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Runs grouped by (family, decoding), each group in step order (or rank order without steps)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in doc["runs"]:
        groups.setdefault((run["family"], run["decoding"]), []).append(run)
    for key, runs in groups.items():
        if all(r["step"] is not None for r in runs):
            groups[key] = sorted(runs, key=lambda r: r["step"])
    return groups


def _error(values: list[float | None], intervals: list[Any]) -> dict[str, Any]:
    """Asymmetric plotly error bars from [low, high] intervals (0 where none)."""
    plus = [0.0 if v is None or not ci else ci[1] - v for v, ci in zip(values, intervals, strict=True)]
    minus = [0.0 if v is None or not ci else v - ci[0] for v, ci in zip(values, intervals, strict=True)]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


_CELL_FIELDS = {f.name for f in dataclasses.fields(TaskCell)}


def _value(cell: dict[str, Any], key: str) -> Any:
    """A cell's value: a :class:`TaskCell` field by name, else a key the figure added to the cell."""
    return getattr(TaskCell.from_json(cell), key) if key in _CELL_FIELDS else cell.get(key)


def _per_task_figure(doc: dict[str, Any], title: str, series: list[tuple[str, str, str | None]]) -> go.Figure:
    """One subplot per task; one line per family × series (cell field, label, interval field)."""
    tasks = doc["tasks"]
    figure = make_subplots(rows=1, cols=len(tasks), subplot_titles=plot_texts(tasks), shared_yaxes=True)
    for index, ((family, decoding), runs) in enumerate(_families(doc).items()):
        color = PALETTE[index % len(PALETTE)]
        x, x_title = _x_values(runs)
        drawn = [(key, label, ci_key) for key, label, ci_key in series  # a unit no run of the family has: no line
                 if not key.startswith("first_block_rel_pos_")
                 or any(r["tasks"][t].get(key) is not None for r in runs for t in tasks)]
        for col, task in enumerate(tasks, start=1):
            cells = [r["tasks"][task] for r in runs]
            for key, label, ci_key in drawn:
                values = [_value(cell, key) for cell in cells]
                errors = None
                if ci_key:
                    errors = _error(values, [_value(cell, ci_key) for cell in cells])
                    errors["color"] = color
                figure.add_trace(go.Scatter(
                    x=x, y=values, error_y=errors, mode="lines+markers", name=plot_text(f"{label} · {family} · {decoding}"),
                    legendgroup=plot_text(f"{label}{family}{decoding}"), showlegend=col == 1,
                    line={"color": color, "dash": _dash(label)},
                    marker={"color": color}), row=1, col=col)
            figure.update_xaxes(title_text=x_title, row=1, col=col)
    figure.update_yaxes(range=[0, 1.02])
    figure.update_layout(title=title, height=420, legend={"orientation": "h", "y": -0.25})
    return figure


def _dash(label: str) -> str:
    """Solid for the first metric of a figure, dashed for the second; positions in characters dotted."""
    if "(characters)" in label:
        return "dot"
    return "dash" if label.startswith(("pass", "first")) else "solid"


def accuracy_figure(doc: dict[str, Any]) -> go.Figure:
    """mean@K (solid) and pass@K (dashed) with their 95% intervals over steps, one subplot per task."""
    mean, passed = metric_name("mean", "K"), metric_name("pass", "K")
    return _per_task_figure(doc, f"Accuracy over checkpoints: {mean} (solid) and {passed} (dashed) with 95% intervals",
                            [("mean", mean, "ci95"), ("pass_at_k", passed, "pass_at_k_ci95")])


def behaviour_figure(doc: dict[str, Any]) -> go.Figure:
    """Parallel ratio (solid) and first-block relative position over steps, one subplot per task.

    Positions are drawn as one series per unit (dashed: tokens, dotted: characters), labelled with
    it, so a run measured in characters never continues a line measured in tokens."""
    units = sorted({str(cell.get("position_unit")) for run in doc["runs"] for cell in run["tasks"].values()
                    if cell.get("first_block_rel_pos") is not None}) or ["token"]
    split = {**doc, "runs": [{**run, "tasks": {task: {**cell, **{f"first_block_rel_pos_{u}": (
        cell.get("first_block_rel_pos") if str(cell.get("position_unit")) == u else None) for u in units}}
        for task, cell in run["tasks"].items()}} for run in doc["runs"]]}
    series: list[tuple[str, str, str | None]] = [("parallel_ratio", "parallel ratio", None)]
    series += [(f"first_block_rel_pos_{u}", f"first block position ({UNIT_LABELS.get(u, u)})", None) for u in units]
    styles = " / ".join(f"{'dotted' if _dash(label) == 'dot' else 'dashed'}, in {UNIT_LABELS.get(u, u)}"
                        for u, (_, label, _) in zip(units, series[1:], strict=True))
    title = f"Parallel behaviour: parallel ratio (solid) and first-block relative position ({styles})"
    return _per_task_figure(split, title, series)


def heatmap_figure(board: Leaderboard, task: str) -> go.Figure:
    """Problems × checkpoints (fraction correct) for one task, the problems that change most on top."""
    return _heatmap(board, task)[0]


def _heatmap(board: Leaderboard, task: str) -> tuple[go.Figure, str]:
    """Problems × checkpoints (fraction correct) for one task, flipping problems first; and a note."""
    runs = [r for group in _families(board.document).values() for r in group]
    labels = [plot_text(r["name"] + ("" if r["step"] is None else f" (step {r['step']})")) for r in runs]
    table = board.per_problem[board.per_problem["task"] == task]
    grid = table.pivot(index="problem_id", columns="run", values="fraction").reindex(columns=[r["name"] for r in runs])
    spread = grid.max(axis=1) - grid.min(axis=1)
    order = pd.DataFrame({"spread": spread, "mean": grid.mean(axis=1)}).sort_values(["spread", "mean"], ascending=False)
    grid = grid.loc[order.index]
    note = f"{len(grid)} problems"
    if len(grid) > SMALL_TASK:
        changing = grid[spread.loc[grid.index] > 0]
        shown = changing.iloc[:MAX_HEATMAP_ROWS]
        note = (f"{len(shown)} of {len(grid)} problems shown: those whose fraction correct changes across checkpoints, "
                f"most changing first ({len(grid) - len(changing)} never change)")
        grid = shown
    figure = go.Figure(go.Heatmap(z=grid.to_numpy(float), x=labels, y=plot_texts(grid.index), zmin=0, zmax=1,
                                  colorscale="RdYlGn", colorbar={"title": "fraction correct"},
                                  hovertemplate="problem %{y}<br>%{x}<br>fraction correct %{z:.2f}<extra></extra>"))
    figure.update_layout(title=f"{plot_text(task)}: fraction correct per problem ({note})",
                         height=max(300, min(2400, 140 + 16 * len(grid))), yaxis={"autorange": "reversed", "type": "category"},
                         xaxis={"type": "category"})
    return figure, note


def _average_cell(run: dict[str, Any]) -> dict[str, Any]:
    """A run's average over its tasks as one figure cell (see the module docstring)."""
    cells = [TaskCell.from_json(cell) for cell in run["tasks"].values()]
    average = RunAverage.from_json(run["average"]).chosen
    units = {c.position_unit for c in cells if c.first_block_rel_pos is not None}
    positions = [c.first_block_rel_pos for c in cells if c.first_block_rel_pos is not None]
    one_unit = len(units) == 1 and len(positions) == len(cells)
    latency: dict[str, Any] = {**dict.fromkeys(LATENCY_FIELDS), "speedup": average.speedup}  # no per-task figure
    return dataclasses.replace(
        cells[0], n_problems=sum(c.n_problems for c in cells), n_samples=sum(c.n_samples for c in cells),
        mean=average.mean, ci95=None, pass_at_k=average.pass_at_k, pass_at_k_ci95=None,
        best_at_k_paper=average.best_at_k_paper, maj_at_k=average.maj_at_k, parallel_ratio=average.parallel_ratio,
        first_block_rel_pos=sum(positions) / len(positions) if one_unit else None,
        position_unit=next(iter(units)) if one_unit else None,
        **latency).to_json()


def figure_document(doc: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The document the over-checkpoint figures draw: ``doc`` itself, or with more than
    :data:`MAX_FIGURE_TASKS` tasks one "average" task per run; and the page's note when averaged."""
    if len(doc["tasks"]) <= MAX_FIGURE_TASKS:
        return doc, None
    label = f"average of {len(doc['tasks'])} tasks"
    runs = [{**run, "tasks": {label: _average_cell(run)}} for run in doc["runs"]]
    note = (f"{len(doc['tasks'])} tasks: the figures over checkpoints show their average ({doc['average_convention']}; "
            "intervals are per task, so none is drawn), the tables above list every task.")
    return {**doc, "tasks": [label], "runs": runs}, note


def heatmap_tasks(board: Leaderboard) -> tuple[list[str], str | None]:
    """The tasks that get a heatmap: all, or the :data:`MAX_HEATMAPS` with the most problems whose
    fraction correct changes across checkpoints (then a note saying so)."""
    tasks = list(board.document["tasks"])
    if len(tasks) <= MAX_HEATMAPS:
        return tasks, None
    table = board.per_problem
    bounds = table.groupby(["task", "problem_id"], sort=False)["fraction"].agg(["max", "min"])
    changing = (bounds["max"] > bounds["min"]).groupby(level=0, sort=False).sum()
    order = sorted(tasks, key=lambda t: (-int(changing.get(t, 0)), tasks.index(t)))
    shown = order[:MAX_HEATMAPS]
    return shown, (f"heatmaps of {len(shown)} of {len(tasks)} tasks: those with the most problems that change across "
                   "checkpoints")


def leaderboard_html(board: Leaderboard) -> str:
    """The page as one HTML string."""
    return page("pr1-eval leaderboard", leaderboard_body(board))


def page(title: str, body: str) -> str:
    """A self-contained page: the style, plotly.js once, ``title`` and ``body``."""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html_text(title)}</title><style>{_STYLE}</style>
<script type="text/javascript">{get_plotlyjs()}</script></head><body>
<h1>{html_text(title)}</h1>
{body}
</body></html>
"""


def leaderboard_body(board: Leaderboard, h: str = "h2", figures: bool = True) -> str:
    """One leaderboard's tables, figures and notes, its sections headed ``h`` (a grouped page nests
    them under each group's heading); ``figures=False`` leaves out the figures (a run alone)."""
    doc = board.document
    tied = [bool(r["tied_with_above"]) for r in doc["runs"]]
    divs: list[str] = []
    figure_note = heatmap_note = None
    if figures:
        drawn, figure_note = figure_document(doc)
        shown, heatmap_note = heatmap_tasks(board)
        plots = [accuracy_figure(drawn), behaviour_figure(drawn), *(heatmap_figure(board, task) for task in shown)]
        divs = [f.to_html(full_html=False, include_plotlyjs=False) for f in plots]
    figure_note = f"<p class='note'>{html_text(figure_note)}</p>" if figure_note else ""
    heatmap_note = f"<p class='note'>{html_text(heatmap_note)}</p>" if heatmap_note else ""
    notes = "".join(f"<li>{html_text(n)}</li>" for n in doc["notes"])
    drawn_html = (f"<{h}>Over checkpoints</{h}>{figure_note}{''.join(divs[:2])}\n"
                  f"<{h}>Which problems flip</{h}>{heatmap_note}{''.join(divs[2:])}") if figures else ""
    return f"""<p class="note">Average: {html_text(doc['average_convention'])}. Rows in grey are marked tied: not significantly
below the row above (paired sign-flip test on the average, p ≥ {doc['alpha']}). Baseline of the comparisons:
{html_text(doc['baseline'])}. Answer policy of every run: {html_text(str(doc.get('answer_policy', 'paper')))}.</p>
<{h}>Leaderboard</{h}>{html_table(ranking_rows(doc), tied)}
<{h}>Per task</{h}>{html_table(task_rows(doc))}
<p class="note">{html_text(intervals_and_ties_note(doc))}</p>
<{h}>Paired comparisons with the baseline</{h}>
<p class="note">Delta of mean@K on the shared problems; 95% interval from a paired bootstrap over problems
({doc['ci95_bootstrap']['n_resamples']:,} resamples, seed {doc['ci95_bootstrap']['seed']}); two-sided sign-flip
permutation p-value; Holm-adjusted across the tasks of each run. {html_text(MDE_NOTE)}</p>
{html_table(comparison_rows(doc))}
{drawn_html}
{f'<{h}>Notes</{h}><ul class="note">{notes}</ul>' if notes else ''}"""


def table_html(rows: list[dict[str, str]]) -> str:
    """A table of the page's kind (names wrap, numbers do not), for pages built beside this one."""
    return html_table(rows)


def check_html_target(out: str | Path) -> None:
    """``--html OUT`` is refused when it names a run's own file (``RUN/run.json``) or a folder."""
    check_output_target(out, "--html")  # the one guard: a run's own file, a device node, a file in the way


def write_leaderboard_html(board: Leaderboard, out: str | Path) -> Path:
    """Write :func:`leaderboard_html` to ``out`` (parent folders created) as a whole: a temporary
    file renamed over it, so a killed write never leaves a cut-short page; returns the path."""
    return write_atomic(out, leaderboard_html(board))
