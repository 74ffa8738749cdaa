"""Implementations behind the CLI subcommands (argument parsing lives in ``cli.py``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pr1_eval.annotate import annotate_grades
from pr1_eval.errors import Pr1EvalError
from pr1_eval.report import format_report_table, run_report
from pr1_eval.runinfo import now_iso
from pr1_eval.store import RunStore


def load_report(run_dir: str | Path) -> dict[str, Any]:
    """Metrics of a stored run (K from run.json)."""
    store = RunStore(run_dir)
    run_json = store.read_run_json()
    frame = store.read_frame()
    if frame.empty:
        raise Pr1EvalError(f"{run_dir}: the run has no samples yet; rerun its command to generate them")
    report = run_report(frame, int(run_json["k"]) if run_json.get("k") else None)
    report["run"] = str(run_dir)
    report["model"] = run_json.get("model")
    return report


def print_report(run_dir: str | Path, as_json: bool = False) -> dict[str, Any]:
    report = load_report(run_dir)
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(f"\nrun: {run_dir}")
        print(format_report_table(report))
        _print_forkjoin(report)
    return report


def _print_forkjoin(report: dict[str, Any]) -> None:
    """Engine calls and critical path per sample, when a run records them (fork-join)."""
    rows = [(t, m) for t, m in report["tasks"].items() if m.get("engine_calls_per_sample")]
    if not rows or all(m["engine_calls_per_sample"] == 1 for _, m in rows):
        return
    print(f"\n{'task':>12}  {'calls/sample':>12}  {'tokens/sample':>13}  {'critical path':>13}")
    for task, m in rows:
        print(f"{task:>12}  {m['engine_calls_per_sample']:>12.2f}  {m['tokens_per_sample']:>13.1f}  "
              f"{m['critical_path_tokens_per_sample'] or float('nan'):>13.1f}")


def regrade(run_dir: str | Path, workers: int | None = None, timeout_s: float = 10.0) -> dict[str, float]:
    """Re-grade stored responses (e.g. after a grader upgrade) without generating.

    Only the grade fields change; structure fields are kept. Returns how many verdicts changed.
    """
    store = RunStore(run_dir)
    run_json = store.read_run_json()
    records = store.read_records()
    if not records:
        raise Pr1EvalError(f"{run_dir}: no samples to regrade")
    before = [(r.correct, r.correct_paper, r.grade_status) for r in records]
    started = time.perf_counter()
    annotate_grades(records, workers=workers, timeout_s=timeout_s, progress=True)
    store.rewrite(records)
    changed = sum(b != (r.correct, r.correct_paper, r.grade_status) for b, r in zip(before, records, strict=True))
    run_json["regraded_at"] = now_iso()
    store.write_run_json(run_json)
    return {"samples": len(records), "changed": changed, "seconds": round(time.perf_counter() - started, 1)}
