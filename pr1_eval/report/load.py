"""A stored run's report: :func:`load_report` reads ``run.json`` and ``samples.parquet`` and checks
one against the other (:func:`pr1_eval.report.run_report.run_report`).

Why here and not in the CLI: the sweep, the commands that print a report after their work
(``run``, ``merge``, ``regrade``, ``import``) and ``report`` itself all load reports, and the
sweep sits below the CLI in the flow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.report.run_report import run_report
from pr1_eval.report.schema import RunReport
from pr1_eval.store.discovery import aside_runs, find_runs
from pr1_eval.store.out_folder import replaced_note
from pr1_eval.store.run_store import RUN_JSON, RunStore


def _not_a_run(run_dir: Path) -> Pr1EvalError:
    """The error for a folder without run.json, naming the runs it holds ("did you mean …")."""
    if not run_dir.exists():
        return Pr1EvalError(f"{run_dir}: no such folder; pass a run folder (one holding run.json)")
    runs = find_runs(run_dir) if run_dir.is_dir() else []
    aside = _aside_phrase(run_dir)
    if not runs:
        return Pr1EvalError(f"{run_dir} is not a pr1-eval run ({RUN_JSON} is missing) and holds none{aside}; "
                            "pass a run folder (one holding run.json)")
    shown = ", ".join(str(r) for r in runs[:5]) + (f" … {len(runs) - 5} more" if len(runs) > 5 else "")
    return Pr1EvalError(f"{run_dir} is not a run but holds {len(runs)}{aside}: did you mean {shown}? "
                        f"Report one of them (or compare them all with `pr1-eval analyze {run_dir}`)")


def _aside_phrase(run_dir: Path) -> str:
    """`` (besides 1 replaced run kept aside, not counted: X, replaced on …)``, or "" when none."""
    aside = aside_runs(run_dir) if run_dir.is_dir() else []
    if not aside:
        return ""
    notes = []
    for run in aside[:3]:
        try:
            note = replaced_note(RunStore(run).read_run().extra, run)
        except Pr1EvalError:
            note = None
        notes.append(f"{run}" + (f", {note.split(' by ')[0]}" if note else ""))
    more = f" … {len(aside) - 3} more" if len(aside) > 3 else ""
    return f" (besides {len(aside)} replaced run(s) kept aside, which nothing counts: {'; '.join(notes)}{more})"


def replaced_line(run_dir: str | Path) -> str | None:
    """The run's replacement note (``replaced on …`` or ``replaces …``) for ``report``; None for most runs."""
    try:
        return replaced_note(RunStore(run_dir).read_run().extra, run_dir)
    except Pr1EvalError:
        return None


def load_report(run_dir: str | Path, at: Sequence[int] = ()) -> RunReport:
    """The report of the run stored at ``run_dir``, checked against what its run.json declares,
    with ``run`` (the folder) and ``model`` (run.json's model section) filled in; ``at``: see
    :func:`pr1_eval.report.run_report.run_report`."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).is_file():
        raise _not_a_run(run_dir)
    store = RunStore(run_dir)
    record = store.read_run()
    report = run_report(store.read_frame(), run=record, at=at)
    return dataclasses.replace(report, run=str(run_dir), model=dataclasses.asdict(record.model))
