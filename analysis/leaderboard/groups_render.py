"""The grouped leaderboard (:mod:`analysis.leaderboard.groups`) as text, Markdown, CSV and HTML.

Every surface says the same thing in the same order: why the runs are grouped, each group of
comparable runs ranked (the ordinary leaderboard's tables, :func:`analysis.leaderboard.tables.render`),
then the runs that nothing compares with (one table of their own numbers, unranked, and why each is
alone), then the groups that could not be ranked and why. The CSV is the runs table of every group
with a ``group`` column first (``alone`` for a run alone), so a spreadsheet filters by group.
Text from runs goes through each surface's escaping function, as in the ungrouped leaderboard.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from analysis.common.safe_text import html_text, terminal_text
from analysis.leaderboard.groups import GroupedLeaderboard
from analysis.leaderboard.page import leaderboard_body, page, table_html
from analysis.leaderboard.schema import TaskCell
from analysis.leaderboard.tables import (
    _csv_text,
    _markdown_for_terminal,
    _num,
    csv_rows,
    markdown_table,
    render,
    text_table,
)
from pr1_eval.store.safe_write import write_atomic


def alone_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per task of each run alone: its own numbers, not ranked against anything."""
    rows = []
    for entry in doc["alone"]:
        run = entry["leaderboard"]["runs"][0]
        for task, raw in run["tasks"].items():
            cell = TaskCell.from_json(raw)
            ci = f" [{cell.ci95[0]:.3f}, {cell.ci95[1]:.3f}]" if cell.ci95 else ""
            rows.append({"run": entry["name"], "task": task, "k": str(cell.k), "problems": str(cell.n_problems),
                         "mean@k [95% CI]": _num(cell.mean) + ci, "pass@k": _num(cell.pass_at_k),
                         "maj@k": _num(cell.maj_at_k), "parallel": _num(cell.parallel_ratio)})
    return rows


def _limit_lines(doc: dict[str, Any]) -> list[str]:
    return [f"{entry['name']}: {line}" for entry in doc["alone"]
            for line in entry["leaderboard"]["runs"][0].get("limited") or []]


def all_notes(doc: dict[str, Any]) -> list[str]:
    """The loader's notes, then each run alone's own notes (what its numbers lack, e.g. structure
    not measured), then the runs not loaded: a group's notes stay inside its own section."""
    return [*doc["notes"], *(note for entry in doc["alone"] for note in entry["leaderboard"]["notes"]),
            *(f"run not loaded: {f['path']}: {f['reason']}" for f in doc["failures"])]


def render_grouped(doc: dict[str, Any], fmt: str) -> str:
    """The grouped document as ``text`` or ``markdown`` sections, or ``csv`` (see the module docstring)."""
    if fmt == "csv":
        return _csv(doc)
    safe = _markdown_for_terminal if fmt == "markdown" else terminal_text
    table = markdown_table if fmt == "markdown" else text_table
    head = (lambda t: f"## {t}") if fmt == "markdown" else (lambda t: f"=== {t} ===")
    parts = [head("Leaderboard, by group of comparable runs"), safe(doc["reason"]) + "."]
    for i, group in enumerate(doc["groups"], start=1):
        parts += [head(f"Group {i}: {len(group['runs'])} runs on {safe(group['title'])}"),
                  render(group["leaderboard"], fmt)]
    if doc["alone"]:
        rows = [{key: safe(value) for key, value in row.items()} for row in alone_rows(doc)]
        why = [f"- {safe(e['name'])}: {safe(e['why'])}" for e in doc["alone"]]
        limited = [f"- {safe(line)}" for line in _limit_lines(doc)]
        parts += [head(f"{len(doc['alone'])} run(s) with nothing to compare against (own numbers, not ranked)"),
                  table(rows), "Why each is alone:\n" + "\n".join(why)]
        if limited:
            parts.append("⚠ --limit (first problems only; scores are not the benchmark's):\n" + "\n".join(limited))
    if doc["not_ranked"]:
        parts += [head("Not ranked"), "\n".join(f"- {safe(', '.join(n['runs']))}: {safe(n['reason'])}"
                                                for n in doc["not_ranked"])]
    if all_notes(doc):
        parts += [head("Notes"), "\n".join(f"- {safe(note)}" for note in all_notes(doc))]
    return "\n\n".join(parts)


def _csv(doc: dict[str, Any]) -> str:
    """Every group's runs table with the group first: its number, or ``alone`` / ``not ranked``."""
    rows: list[dict[str, Any]] = []
    for i, group in enumerate(doc["groups"], start=1):
        rows += [{"group": str(i), **row} for row in csv_rows(group["leaderboard"])]
    for entry in doc["alone"]:
        rows += [{"group": "alone", **row, "why": entry["why"]} for row in csv_rows(entry["leaderboard"])]
    for entry in doc["not_ranked"]:
        rows += [{"group": "not ranked", "name": name, "why": entry["reason"]} for name in entry["runs"]]
    rows = [{_csv_text(key): _csv_text(value) for key, value in row.items()} for row in rows]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().rstrip("\n")


def grouped_html(grouped: GroupedLeaderboard) -> str:
    """One page: the reason, a section per group (its leaderboard, figures included), the runs alone
    in one table with why, and what could not be ranked."""
    doc = grouped.document
    sections = [f"<p class='note'>{html_text(doc['reason'])}.</p>"]
    ranked = [g for g in grouped.groups if g.why is None]
    for i, group in enumerate(ranked, start=1):
        sections.append(f"<h2>Group {i}: {len(group.runs)} runs on {html_text(group.title)}</h2>"
                        + leaderboard_body(group.board, h="h3"))
    if doc["alone"]:
        why = "".join(f"<li>{html_text(e['name'])}: {html_text(e['why'])}</li>" for e in doc["alone"])
        limited = "".join(f"<li>{html_text(line)}</li>" for line in _limit_lines(doc))
        sections.append(f"<h2>{len(doc['alone'])} run(s) with nothing to compare against (own numbers, not ranked)</h2>"
                        + table_html(alone_rows(doc)) + f"<p class='note'>Why each is alone:</p><ul class='note'>{why}</ul>"
                        + (f"<p class='note'>⚠ --limit (first problems only; scores are not the benchmark's):</p>"
                           f"<ul class='note'>{limited}</ul>" if limited else ""))
    if doc["not_ranked"]:
        items = "".join(f"<li>{html_text(', '.join(n['runs']))}: {html_text(n['reason'])}</li>" for n in doc["not_ranked"])
        sections.append(f"<h2>Not ranked</h2><ul class='note'>{items}</ul>")
    notes = all_notes(doc)
    if notes:
        sections.append("<h2>Notes</h2><ul class='note'>" + "".join(f"<li>{html_text(n)}</li>" for n in notes) + "</ul>")
    return page("pr1-eval leaderboard, by group of comparable runs", "\n".join(sections))


def write_grouped_html(grouped: GroupedLeaderboard, out: str | Path) -> Path:
    """Write :func:`grouped_html` to ``out`` whole (a temporary file renamed over it), as the
    ungrouped page is written; returns the path."""
    return write_atomic(out, grouped_html(grouped))
