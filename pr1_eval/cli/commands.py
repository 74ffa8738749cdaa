"""Loading and printing a run's report, for the commands that end by showing one (``report``,
``run``, ``merge``, ``regrade``, ``import``, ``demo``) and for the sweep's table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.report.run_report import format_report_table, run_report
from pr1_eval.store.discovery import find_runs
from pr1_eval.store.run_store import RUN_JSON, RunStore


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
