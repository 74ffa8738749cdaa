"""Implementations behind the CLI subcommands (argument parsing lives in :mod:`pr1_eval.cli.main`).

``print_report`` and ``load_report`` are imported here for the commands that print a report after
their work (``run``, ``merge``, ``regrade``, ``import``, the demo) and look them up in this module;
they live in :mod:`pr1_eval.cli.report` and :mod:`pr1_eval.report.load`."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from pr1_eval.cli.report import print_report
from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.annotate import annotate_grades
from pr1_eval.records.provenance import now_iso
from pr1_eval.report.load import load_report
from pr1_eval.store.run_store import RunStore

__all__ = ["load_report", "print_report", "regrade"]


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
