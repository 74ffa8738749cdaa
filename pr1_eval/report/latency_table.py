"""The report's token-latency table: what thinking in parallel buys, one line per task.

Why its own table below the accuracy one: its figures (:mod:`pr1_eval.report.efficiency`) are
lengths and ratios in a unit the table must name, and the accuracy table is already as wide as a
terminal. An incomplete task shows its partial figures marked ``*``, as the accuracy table does.
"""

from __future__ import annotations

from pr1_eval.report.schema import RunReport, TaskMetrics
from pr1_eval.report.table import fit_columns
from pr1_eval.terminal import terminal_text

_HEAD = ("task", "unit", "length/sample", "critical path", "speedup [95% CI]", "per-problem median/p90",
         "losing share", "speedup correct/wrong")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _cells(task: str, complete: bool, m: TaskMetrics) -> list[str]:
    interval = m.speedup_ci95
    speedup = _x(m.speedup) + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
    return [terminal_text(task) + ("" if complete else "*"), m.length_unit or "-",
            "-" if m.response_length_per_sample is None else f"{m.response_length_per_sample:.0f}",
            "-" if m.critical_path_per_sample is None else f"{m.critical_path_per_sample:.0f}", speedup,
            f"{_x(m.speedup_problem_median)} / {_x(m.speedup_problem_p90)}",
            "-" if m.losing_path_share is None else f"{m.losing_path_share:.3f}",
            f"{_x(m.speedup_correct)} / {_x(m.speedup_wrong)}"]


def format_latency_table(report: RunReport) -> str | None:
    """Token latency per task (None when no task has a length: tags stripped, or no text at all)."""
    rows = [_cells(task, t.complete, m) for task, t in report.tasks.items()
            if (m := t.metrics_or_partial) is not None and (m.speedup is not None or m.length_unit == "mixed")]
    if not rows:  # structure not measured (stripped tags, answers only): say so, never a blank
        return None if not report.structure_note else f"token latency: {report.structure_note}"
    lines = fit_columns([list(_HEAD), *rows])
    return "\n".join(["token latency (critical path: main line + each block's longest path + join + summary; "
                      "speedup = mean length / mean critical path):", *lines])
