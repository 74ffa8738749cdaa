"""Plotly figures of an analysis: one HTML page per figure, and one ``plotly.min.js`` beside them.

The pages open offline (from a folder, a CI artifact, an archive) with no server and no network,
and they share one copy of plotly.js (about 4.8 MB) instead of inlining it in every page, so five
figures cost 5 MB, not 24. Each page has a title, and runs are labelled by what a reader compares:
the model (its folder or hub id, without the ``global_step_N``/``hf`` plumbing) and the checkpoint
step, not the run folder's name (``run`` for every demo).

With checkpoint steps the behaviour figures are lines against step (one line per family ×
decoding × task), which is how the paper's drift claim is read; without steps they are bars
per run × task, so a single run still gets its picture.

Model names, run names and task names are untrusted (an import can carry anything): every
plotly string built from them goes through :func:`analysis.common.safe_text.plot_text`, so no tag, link
or formula in them is drawn as such.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from analysis.common.completeness import MARK
from analysis.common.safe_text import plot_text, plot_texts
from analysis.efficiency.figures import OPEN_RUN_JS, frontier_figure, speedup_histogram, training_figure
from analysis.structure.drift import UNIT_WORDS
from analysis.structure.roles import ROLES
from analysis.summary import Analysis
from pr1_eval.inputs.checkpoints import MERGED
from pr1_eval.records.steps import ANY_STEP_FOLDER
from pr1_eval.store.safe_write import write_atomic

FIGURE_FILES: tuple[str, ...] = ("parallel_ratio.html", "block_position.html", "role_shares.html",
                                 "bleu_hist.html", "cosine_hist.html", "speedup_hist.html", "latency_frontier.html",
                                 "efficiency_steps.html")
PLOTLY_JS = "plotly.min.js"
"""The one plotly.js bundle every page loads from its own folder."""
_PLUMBING = re.compile(rf"^(?:{ANY_STEP_FOLDER}|{MERGED}|huggingface|actor|checkpoints?)$", re.IGNORECASE)


def write_figures(analysis: Analysis, out_dir: str | Path) -> tuple[list[Path], list[str]]:
    """Write the figures that have data, and ``plotly.min.js`` once beside them when any was
    written; returns the pages written and a note per figure skipped."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    labels = run_labels(analysis.runs)
    figures: dict[str, go.Figure | None] = {
        "parallel_ratio.html": _metric_figure(analysis, labels, ["parallel_ratio"], "Parallel ratio"),
        "block_position.html": _metric_figure(analysis, labels, ["block_rel_pos", "first_block_rel_pos"],
                                              position_title(analysis)),
        "role_shares.html": _metric_figure(analysis, labels, [f"share_{r}" for r in ROLES],
                                           "Block roles (share of blocks)"),
        "bleu_hist.html": _histogram(analysis.pairs, labels, "bleu", "Pairwise BLEU of sibling paths (0–1)"),
        "cosine_hist.html": _histogram(analysis.pairs, labels, "cosine", "Pairwise embedding cosine of sibling paths"),
        **_efficiency_figures(analysis, labels),
    }
    written: list[Path] = []
    notes: list[str] = []
    for name, figure in figures.items():
        if figure is None:
            notes.append(f"{name} not written: no data for it")
            continue
        written.append(_write_page(figure, out / name, OPEN_RUN_JS if name == "latency_frontier.html" else None))
    if written:
        _write_plotly_js(out / PLOTLY_JS)
    return written, notes


def _efficiency_figures(analysis: Analysis, labels: dict[str, str]) -> dict[str, go.Figure | None]:
    """The efficiency pictures (:mod:`analysis.efficiency.figures`) of the analysis' efficiency tables."""
    tables = analysis.efficiency
    empty = pd.DataFrame()
    points = tables.get("points", empty)
    return {"speedup_hist.html": speedup_histogram(tables.get("problems", empty), labels, points),
            "latency_frontier.html": frontier_figure(points, labels, analysis.include_incomplete),
            "efficiency_steps.html": training_figure(tables.get("steps", empty), title="Over checkpoint steps",
                                                     family_name=model_name)}


def _write_page(figure: go.Figure, path: Path, script: str | None = None) -> Path:
    """One page that loads ``plotly.min.js`` from its folder, titled after its figure; ``script``:
    JavaScript run once the plot is drawn (``{plot_id}`` names its element)."""
    title = html.escape(f"{_plain(figure.layout.title.text or path.stem)} — pr1-eval analyze")
    page = figure.to_html(include_plotlyjs="directory", full_html=True, post_script=script)
    meta = '<meta charset="utf-8" />'
    anchor = meta if meta in page else "<head>"
    return write_atomic(path, page.replace(anchor, f"{anchor}\n    <title>{title}</title>", 1))


def _write_plotly_js(path: Path) -> None:
    """The bundle of the installed plotly, rewritten only when it differs (a plotly upgrade)."""
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs()
    if not path.is_file() or path.read_text(encoding="utf-8") != bundle:
        write_atomic(path, bundle)


def _plain(text: str) -> str:
    """A plotly title (entities such as ``&lt;`` allowed) as plain text."""
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def model_name(model: object) -> str:
    """A model path or hub id as a reader names it: ``/ckpt/job/global_step_200/hf`` -> ``job``,
    ``/tmp/demo/tiny-model`` -> ``tiny-model``, a hub id (``Qwen/Qwen3-4B``) unchanged."""
    if not isinstance(model, str) or not model.strip():
        return "unknown model"
    text = model.rstrip("/")
    if not text.startswith(("/", ".", "~")) and text.count("/") <= 1:
        return text
    parts = [p for p in Path(text).parts if p not in ("/", "", ".", "..", "~") and not _PLUMBING.match(p)]
    return parts[-1] if parts else text


def run_labels(runs: pd.DataFrame) -> dict[str, str]:
    """Legend label of each run: model name and step; the decoding, then the run's own name, are
    added only where they are needed to tell two runs apart."""
    if runs.empty:
        return {}
    meta = {str(r["run"]): r for r in runs.drop_duplicates("run").to_dict("records")}
    base = {run: model_name(r["model"]) + ("" if pd.isna(r["step"]) else f" · step {int(r['step'])}")
            for run, r in meta.items()}
    labels = {}
    for run, label in base.items():
        same = [other for other, text in base.items() if text == label]
        if len(same) > 1 and len({str(meta[other]["decoding"]) for other in same}) == len(same):
            label = f"{label} · {meta[run]['decoding']}"
        elif len(same) > 1:
            label = f"{label} ({run})"
        labels[run] = label
    return labels


def position_title(analysis: Analysis) -> str:
    """The block-position figure's title, naming the unit of the positions (and saying so when runs differ)."""
    runs = analysis.runs
    units = sorted({str(u) for u in runs["position_unit"] if isinstance(u, str)}) if "position_unit" in runs else []
    title = "Relative position of <Parallel> (all blocks, first block)"
    if len(units) == 1 and units[0] != "mixed":
        return f"{title}, in {UNIT_WORDS.get(units[0], units[0])}"
    if units:
        return f"{title}: units differ ({', '.join(UNIT_WORDS.get(u, u) for u in units)}), not comparable across runs"
    return title


def _metric_figure(analysis: Analysis, labels: dict[str, str], columns: list[str], title: str) -> go.Figure | None:
    """Lines against step when the drift table has points, else bars per run × task."""
    points = analysis.drift_points
    title_html = html.escape(title, quote=False)
    if not points.empty and all(c in points for c in columns) and points[columns].notna().any().any():
        figure = go.Figure()
        for (family, decoding, task), group in points.groupby(["model_family", "decoding", "task"], sort=True):
            group = group.sort_values("step")
            for column in columns:
                label = f"{task} · {model_name(family)} · {decoding}" + (f" · {column}" if len(columns) > 1 else "")
                figure.add_trace(go.Scatter(x=group["step"].astype(float), y=group[column], mode="lines+markers",
                                            name=plot_text(label)))
        if analysis.include_incomplete and "complete" in points and not points["complete"].all():
            title_html += f" ({MARK} steps included on request)"
        # a lone line still says which task and model it is; the legend sits below the plot, so a long
        # model or task name cannot squeeze it
        figure.update_layout(title=title_html, xaxis_title="checkpoint step", yaxis_title="value", yaxis_range=[0, 1.02],
                             showlegend=True, legend={"orientation": "h", "y": -0.2})
        return figure
    runs = analysis.runs
    if runs.empty or not any(c in runs and runs[c].notna().any() for c in columns):
        return None
    marks = runs["complete"] if "complete" in runs else pd.Series(True, index=runs.index)
    x = plot_texts(f"{labels.get(str(r), r)} · {t}" + ("" if ok else f" {MARK}")
                   for r, t, ok in zip(runs["run"], runs["task"], marks, strict=True))
    figure = go.Figure([go.Bar(x=x, y=runs[c], name=c) for c in columns if c in runs])
    title_html += " (no checkpoint steps: per run)" + ("" if marks.all() else f"; {MARK}: lacks samples run.json declares")
    figure.update_layout(title=title_html, barmode="group", yaxis_range=[0, 1.02],
                         xaxis_title="model · task", yaxis_title="share")
    return figure


def _histogram(pairs: pd.DataFrame, labels: dict[str, str], column: str, title: str) -> go.Figure | None:
    """One overlaid histogram per run of a pair measure, with the run's mean in the legend."""
    if pairs.empty or column not in pairs or pairs[column].notna().sum() == 0:
        return None
    figure = go.Figure()
    for run, group in pairs.groupby("run", sort=True):
        values = group[column].dropna()
        if len(values):
            name = f"{labels.get(str(run), run)} (mean {values.mean():.4f}, n={len(values)})"
            figure.add_trace(go.Histogram(x=values, name=plot_text(name), opacity=0.6,
                                          xbins={"start": 0.0, "end": 1.0, "size": 0.02}))
    figure.update_layout(title=html.escape(title, quote=False), barmode="overlay", xaxis_title=column,
                         yaxis_title="pairs", showlegend=True)  # the legend names the run even when it is alone
    return figure
