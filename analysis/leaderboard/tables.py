"""The leaderboard document laid out as rows and tables (text, markdown, CSV): what the command
prints, the HTML page embeds and the notebook shows, from one set of row builders.

The ranking table has one row per run, ``=`` before the rank of a row tied with the row above;
then the per-task table, the paired comparisons with the baseline, the average convention and notes.

Text from runs (run, model and task names, decoding, notes, paths) is untrusted
(:mod:`analysis.common.safe_text`): :func:`render` passes every such value through the surface's one
function before any table is laid out: :func:`~analysis.common.safe_text.markdown_text` for Markdown
(no HTML, link, image or formatting can come from data, whatever renders it; control characters
shown first, as the Markdown is printed),
:func:`~analysis.common.safe_text.terminal_text` for the text tables a terminal shows, and
:func:`~analysis.engine.csv_text.csv_cell` for CSV cells and column names. ``--csv`` is printed
too (to stdout, often a terminal), so its text cells pass :func:`~analysis.common.safe_text.terminal_text`
first (an ESC, CSI, C1 or OSC-8 byte from a run name, model path or family is shown as its escape,
``\x1b``, never sent raw), then ``csv_cell`` (a formula-leading cell gets its ``'``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from typing import Any

from analysis.common.completeness import MARK
from analysis.common.safe_text import markdown_text, terminal_text
from analysis.engine.csv_text import csv_cell
from analysis.leaderboard.board import UNIT_LABELS
from analysis.leaderboard.schema import RunAverage, TaskCell
from pr1_eval.report.completeness import LIMIT_MARK
from pr1_eval.report.schema import TaskMetrics
from pr1_eval.report.table import fit_columns


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(value: Any, ci: Sequence[float] | None) -> str:
    return _num(value) + ("" if not ci else f" [{ci[0]:.3f}, {ci[1]:.3f}]")


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.3f}"


def _label(doc: dict[str, Any]) -> int | str:
    """K in column names: the number when every run and task share it, else ``k``."""
    ks = {int(cell["k"]) for run in doc["runs"] for cell in run["tasks"].values()}
    return ks.pop() if len(ks) == 1 else "k"


def _name(run: dict[str, Any]) -> str:
    """The run's name, with the incomplete mark when it was ranked on request (``include_incomplete``)
    and the ``--limit`` mark when it holds only the first problems of a task."""
    name = run["name"] if run.get("complete", True) else f"{run['name']} {MARK}"
    return f"{name} {LIMIT_MARK}" if run.get("limited") else name


def _head(field: str, label: int | str) -> str:
    """A column named as the metric it holds, at the table's K."""
    return TaskMetrics.metric_key(field, label)


def ranking_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per run: rank (``=`` when tied with the row above), identity, average, mean@K per task."""
    rows = []
    label = _label(doc)
    for run in doc["runs"]:
        avg = RunAverage.from_json(run["average"]).chosen
        row = {"rank": ("=" if run["tied_with_above"] else "") + str(run["rank"]), "run": _name(run),
               "step": "-" if run["step"] is None else str(run["step"]), "decoding": run["decoding"],
               f"avg {_head('mean', label)}": _num(avg.mean), f"avg {_head('pass_at_k', label)}": _num(avg.pass_at_k),
               f"avg {_head('best_at_k_paper', label)}": _num(avg.best_at_k_paper),
               f"avg {_head('maj_at_k', label)}": _num(avg.maj_at_k),
               "avg parallel": _num(avg.parallel_ratio), "avg speedup": _speedup(avg.speedup),
               "p vs above": _p(run["p_vs_above"])}
        for task, raw in run["tasks"].items():
            cell = TaskCell.from_json(raw)
            row[f"{task} {_head('mean', label)}"] = _interval(cell.mean, cell.ci95)
        rows.append(row)
    return rows


def _position_column(doc: dict[str, Any]) -> tuple[str, bool]:
    """The first-block column's name with its unit, and whether each cell must name its own unit
    (the rows mix units: :func:`analysis.leaderboard.board.position_unit_notes` explains)."""
    units = {cell.get("position_unit") for run in doc["runs"] for cell in run["tasks"].values()
             if cell.get("first_block_rel_pos") is not None}
    if len(units) == 1 and None not in units:
        return f"first block rel. pos. ({UNIT_LABELS.get(str(next(iter(units))), 'unknown unit')})", False
    return "first block rel. pos.", bool(units)


def _position(cell: dict[str, Any], per_cell: bool) -> str:
    value = _num(cell.get("first_block_rel_pos"))
    if not per_cell or cell.get("first_block_rel_pos") is None:
        return value
    return f"{value} ({UNIT_LABELS.get(str(cell.get('position_unit')), 'unknown unit')})"


def _speedup(value: float | None, ci: Sequence[float] | None = None) -> str:
    """A token-latency speedup as ``1.53x``, with its interval when given."""
    return "-" if value is None else f"{value:.2f}x" + ("" if not ci else f" [{ci[0]:.2f}, {ci[1]:.2f}]")


def _length_column(doc: dict[str, Any]) -> tuple[str, bool]:
    """The critical-path column's name with its unit, and whether each cell names its own (units differ)."""
    units = {cell.get("length_unit") for run in doc["runs"] for cell in run["tasks"].values()
             if cell.get("critical_path_per_sample") is not None}
    if len(units) == 1 and None not in units:
        return f"critical path ({UNIT_LABELS.get(str(next(iter(units))), 'unknown unit')})", False
    return "critical path", bool(units)


def _latency_cells(cell: TaskCell, column: str, per_cell: bool) -> dict[str, str]:
    """The token-latency cells of a task row: mean critical path (its unit), speedup [95% CI], losing share."""
    length = _num(cell.critical_path_per_sample, 0)
    if per_cell and cell.critical_path_per_sample is not None:
        length += f" ({UNIT_LABELS.get(str(cell.length_unit), 'unknown unit')})"
    return {column: length, "speedup [95% CI]": _speedup(cell.speedup, cell.speedup_ci95),
            "losing share": _num(cell.losing_path_share)}


def task_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per run × task with every leaderboard metric; the first-block and critical-path columns
    name their unit."""
    rows = []
    label = _label(doc)
    position, per_cell = _position_column(doc)
    length, per_length = _length_column(doc)
    for run in doc["runs"]:
        for task, raw in run["tasks"].items():
            cell = TaskCell.from_json(raw)
            rows.append({"run": _name(run), "task": task, "k": str(cell.k), "problems": str(cell.n_problems),
                         f"{_head('mean', label)} [95% CI]": _interval(cell.mean, cell.ci95),
                         _head("pass_at_k", label): _num(cell.pass_at_k),
                         _head("best_at_k_paper", label): _num(cell.best_at_k_paper),
                         _head("maj_at_k", label): _num(cell.maj_at_k), "parallel": _num(cell.parallel_ratio),
                         position: _position(raw, per_cell), **_latency_cells(cell, length, per_length)})
    return rows


def comparison_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per run × task compared with the baseline."""
    return [{"run": c["run"], "vs": c["baseline"], "task": c["task"], "problems": str(c["n_problems"]),
             "delta [95% CI]": _interval(c["delta"], c["ci95"]), "p": _p(c["p_value"]), "p (Holm)": _p(c["p_holm"]),
             "test": c["test"], "MDE": _num(c.get("mde"))} for c in doc["comparisons"]]


#: What the comparisons' MDE column is, under every text form of the table.
MDE_NOTE = ("MDE: minimum detectable effect of the pair, the true delta a two-sided 5% paired test detects with 80% "
            "power, 2.80 · SD(per-problem differences, ddof 1) / √problems: a non-significant delta below it is "
            "no evidence of equality.")


def csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs as one flat row each (numbers unrounded), for ``--csv``. A comparison belongs to a run
    and a task, so its minimum detectable effect is the run's ``TASK.mde_vs_baseline`` column (empty
    for the baseline, which is compared with nothing)."""
    mde = {(c["run"], c["task"]): c.get("mde") for c in doc["comparisons"]}
    rows = []
    for run in doc["runs"]:
        row: dict[str, Any] = {key: run[key] for key in ("rank", "tied_with_above", "p_vs_above", "name", "model",
                                                          "family", "step", "decoding", "k")}
        row["complete"], row["missing"] = run.get("complete", True), "; ".join(run.get("missing") or [])
        row["limited"] = "; ".join(run.get("limited") or [])  # the --limit slice, as missing says what lacks
        row.update({f"average.{key}": value for key, value in run["average"].items() if not isinstance(value, dict)})
        for task, cell in run["tasks"].items():
            for key, value in cell.items():
                if isinstance(value, list):
                    row[f"{task}.{key}.low"], row[f"{task}.{key}.high"] = value
                elif key.endswith("ci95"):
                    row[f"{task}.{key}.low"] = row[f"{task}.{key}.high"] = None
                else:
                    row[f"{task}.{key}"] = value
            row[f"{task}.mde_vs_baseline"] = mde.get((run["name"], task))
        rows.append(row)
    return rows


def text_table(rows: list[dict[str, str]]) -> str:
    """Fixed-width columns, first column left-aligned, fit to a 120-column terminal: a wider table is
    cut into tables one under another, each repeating what names the row (the run, and its task or
    the run it is compared with) (:func:`pr1_eval.report.table.fit_columns`; the whole row is in
    ``--csv`` and ``--json``)."""
    if not rows:
        return "(none)"
    heads = list(rows[0])
    keys = 1 + sum(1 for h in heads[1:3] if h in ("task", "vs", "rank", "run"))
    return "\n".join(fit_columns([heads, *([row.get(h, "") for h in heads] for row in rows)], keys=keys))


#: A ``|`` that would end a Markdown table cell (data's pipes are escaped already: ``\\|``).
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def markdown_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(none)"
    heads = list(rows[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(heads))) + "|"]
    lines += ["| " + " | ".join(_UNESCAPED_PIPE.sub(r"\\|", row.get(h, "")) for h in heads) + " |" for row in rows]
    return "\n".join(lines)


def intervals_and_ties_note(doc: dict[str, Any]) -> str:
    """How the per-task intervals were computed and how maj@K breaks ties (the document records both)."""
    boot = doc.get("ci95_bootstrap") or {}
    return (f"95% CI of mean@K and of the paired deltas: expanded percentile bootstrap over problems (sorted by id), "
            f"{boot.get('n_resamples', 0):,} resamples, seed {boot.get('seed')}; estimand: problems like these (not "
            f"these problems only); of the speedup (mean length / mean critical path) the same "
            f"resamples of problems, each the ratio of its summed lengths. {doc.get('maj_tie_rule') or ''}.")


def safe_document(doc: dict[str, Any], safe: Callable[[Any], str]) -> dict[str, Any]:
    """A copy of the leaderboard document with every text that comes from runs passed through
    ``safe`` (names, decoding, task names, notes, failures); numbers and our own labels unchanged."""
    def runs(run: dict[str, Any]) -> dict[str, Any]:
        return {**run, **{key: safe(run[key]) for key in ("name", "model", "family", "decoding", "path")
                          if run.get(key) is not None},
                "missing": [safe(line) for line in run.get("missing") or []],
                "limited": [safe(line) for line in run.get("limited") or []],
                "tasks": {safe(task): cell for task, cell in run["tasks"].items()}}

    return {**doc, "runs": [runs(run) for run in doc["runs"]], "tasks": [safe(t) for t in doc.get("tasks") or []],
            "baseline": None if doc.get("baseline") is None else safe(doc["baseline"]),
            "notes": [safe(note) for note in doc["notes"]],
            "failures": [{**f, "path": safe(f["path"]), "reason": safe(f["reason"])} for f in doc["failures"]],
            "comparisons": [{**c, **{key: safe(c[key]) for key in ("run", "baseline", "task", "test")}}
                            for c in doc["comparisons"]]}


def _markdown_for_terminal(value: Any) -> str:
    """Markdown printed to a terminal: control characters shown (their escapes), then Markdown escaped."""
    return markdown_text(terminal_text(value))


def _csv_text(value: Any) -> Any:
    """A CSV cell printed to a terminal: control characters shown, then formula-neutralised."""
    return csv_cell(terminal_text(value)) if isinstance(value, str) else csv_cell(value)


def render(doc: dict[str, Any], fmt: str) -> str:
    """The document as ``text`` or ``markdown`` tables, or ``csv`` (the runs only); text from runs
    made inert for each (see the module docstring)."""
    if fmt == "csv":
        rows = [{_csv_text(key): _csv_text(value) for key, value in row.items()} for row in csv_rows(doc)]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue().rstrip("\n")
    doc = safe_document(doc, _markdown_for_terminal if fmt == "markdown" else terminal_text)
    table = markdown_table if fmt == "markdown" else text_table
    head = (lambda t: f"### {t}") if fmt == "markdown" else (lambda t: f"== {t} ==")
    policy = doc.get("answer_policy")
    parts = [head("Leaderboard" + (f" (answer policy: {policy})" if policy else "")), table(ranking_rows(doc)),
             f"Average: {doc['average_convention']}. '=' before a rank: not significantly below the row above "
             f"(paired sign-flip test on the average, p ≥ {doc['alpha']}).",
             *([f"{MARK}: ranked on request (include incomplete runs) on the problems that hold all k samples; "
                "what each lacks is in the notes."] if any(not r.get("complete", True) for r in doc["runs"]) else []),
             head("Per task"), table(task_rows(doc)), intervals_and_ties_note(doc),
             head(f"Paired comparisons with the baseline {doc['baseline']} (shared problems; bootstrap 95% CI; "
                  "sign-flip p; Holm across tasks)"), table(comparison_rows(doc)), MDE_NOTE]
    if doc["notes"] or doc["failures"]:
        lines = [f"- {note}" for note in doc["notes"]]
        lines += [f"- run not loaded: {f['path']}: {f['reason']}" for f in doc["failures"]]
        parts += [head("Notes"), "\n".join(lines)]
    return "\n\n".join(parts)

