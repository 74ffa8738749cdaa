"""A stored run's report: :func:`load_report` reads ``run.json`` and ``samples.parquet`` and checks
one against the other (:func:`pr1_eval.report.run_report.run_report`).

Why here and not in the CLI: the sweep, the commands that print a report after their work
(``run``, ``merge``, ``regrade``, ``import``) and ``report`` itself all load reports, and the
sweep sits below the CLI in the flow.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.report.run_report import run_report
from pr1_eval.report.schema import RunReport
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


def load_report(run_dir: str | Path) -> RunReport:
    """The report of the run stored at ``run_dir``, checked against what its run.json declares,
    with ``run`` (the folder) and ``model`` (run.json's model section) filled in."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).is_file():
        raise _not_a_run(run_dir)
    store = RunStore(run_dir)
    record = store.read_run()
    report = run_report(store.read_frame(), run=record)
    return dataclasses.replace(report, run=str(run_dir), model=dataclasses.asdict(record.model))
