"""Implementations behind the CLI subcommands (argument parsing lives in :mod:`pr1_eval.cli.main`)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.annotate import annotate_grades
from pr1_eval.records.provenance import now_iso
from pr1_eval.report.run_report import format_report_table, run_report
from pr1_eval.store.run_store import RUN_JSON, RunStore


def find_runs(folder: Path, depth: int = 2) -> list[Path]:
    """Run folders (holding run.json) under ``folder``, at most ``depth`` levels down."""
    found: list[Path] = []
    level = [folder]
    for _ in range(depth):
        level = sorted(child for parent in level for child in parent.iterdir() if child.is_dir()) if level else []
        found += [child for child in level if (child / RUN_JSON).is_file()]
        level = [child for child in level if not (child / RUN_JSON).is_file()]
    return found


def _not_a_run(run_dir: Path) -> Pr1EvalError:
    """The error for a folder without run.json, naming the runs it holds ("did you mean …")."""
    if not run_dir.exists():
        return Pr1EvalError(f"{run_dir}: no such folder; pass a run folder (one holding run.json)")
    runs = find_runs(run_dir) if run_dir.is_dir() else []
    if not runs:
        return Pr1EvalError(f"{run_dir} is not a pr1-eval run ({RUN_JSON} is missing) and holds none; "
                            "pass a run folder (one holding run.json)")
    shown = ", ".join(str(r) for r in runs[:5]) + (f" … {len(runs) - 5} more" if len(runs) > 5 else "")
    return Pr1EvalError(f"{run_dir} is not a run but holds {len(runs)}: did you mean {shown}? "
                        f"Report one of them (or compare them all with `pr1-eval analyze {run_dir}`)")


def load_report(run_dir: str | Path) -> dict[str, Any]:
    """Metrics of a stored run, checked against what its run.json declares (see ``pr1_eval.report.run_report``)."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).is_file():
        raise _not_a_run(run_dir)
    store = RunStore(run_dir)
    record = store.read_run()
    frame = store.read_frame()
    report = run_report(frame, run=record)
    report["run"] = str(run_dir)
    report["model"] = dataclasses.asdict(record.model)
    return report


def print_report(run_dir: str | Path, as_json: bool = False, strict: bool = False) -> dict[str, Any]:
    """Print the report (table or JSON); with ``strict`` an incomplete run is an error (exit 2)."""
    report = load_report(run_dir)
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        status = "" if report["status"] == "complete" else f"  (status: {report['status']})"
        shard = f"  ({report['shard']})" if report.get("shard") else ""
        print(f"run: {run_dir}{shard}{status}")
        print(format_report_table(report))
        _print_forkjoin(report)
    if strict and not report["complete"]:
        raise Pr1EvalError(f"{run_dir} is incomplete (--strict): {'; '.join(report['incomplete'])}; "
                           f"{report['advice']}")
    return report


def _print_forkjoin(report: dict[str, Any]) -> None:
    """Engine calls and critical path per sample, when a run records them (fork-join)."""
    rows = [(t, m) for t, m in report["tasks"].items() if m.get("engine_calls_per_sample")]
    if not rows or all(m["engine_calls_per_sample"] == 1 for _, m in rows):
        return
    print(f"\n{'task':>12}  {'calls/sample':>12}  {'tokens/sample':>13}  {'critical path':>13}")
    for task, m in rows:
        critical = m["critical_path_tokens_per_sample"]
        print(f"{task:>12}  {m['engine_calls_per_sample']:>12.2f}  {round(m['tokens_per_sample']):>13}  "
              f"{'-' if critical is None else round(critical):>13}")


def regrade(run_dir: str | Path, workers: int | None = None, timeout_s: float = 10.0) -> dict[str, float]:
    """Re-grade stored responses (e.g. after a grader upgrade) without generating.

    Only the grade fields change; structure fields are kept. Returns how many verdicts changed.
    """
    store = RunStore(run_dir)
    record = store.read_run()
    records = store.read_records()
    if not records:
        raise Pr1EvalError(f"{run_dir}: no samples to regrade")
    before = [(r.correct, r.correct_paper, r.grade_status) for r in records]
    started = time.perf_counter()
    annotate_grades(records, workers=workers, timeout_s=timeout_s, progress=True)
    store.rewrite(records)
    changed = sum(b != (r.correct, r.correct_paper, r.grade_status) for b, r in zip(before, records, strict=True))
    store.write_run(dataclasses.replace(record, regraded_at=now_iso()))
    return {"samples": len(records), "changed": changed, "seconds": round(time.perf_counter() - started, 1)}
