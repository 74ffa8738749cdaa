"""Re-grading a stored run: new verdicts for the responses it holds, without generating again.

Why it lives with the grader: its only new input is the grader, applied to a stored run (read
the samples, rewrite them, stamp ``run.json``); the grading layer sits above the store in the
import order, so it hands the grader the stored records and writes them back through the
store's one durable path. Only the grade fields
change; the structure fields (blocks, positions, lengths) are the generation's and are kept.

A regrade holds the run's writer lock (:mod:`pr1_eval.store.run_lock`), so it is refused while
another command writes the run, and it refuses a run that is not complete (still being written by
writers that take the lock chunk by chunk, or stopped: finish it first, then regrade): replacing
the samples under a writer would lose what it stores meanwhile. A regrade killed at any point is
finished or undone by the next one (:meth:`~pr1_eval.store.run_store.RunStore.recover_swap`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.annotate import annotate_grades
from pr1_eval.grading.policy import check_policy
from pr1_eval.records.provenance import now_iso
from pr1_eval.records.sample import GRADE_COLUMNS
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore
from pr1_eval.store.safe_write import disk_full_errors


def regrade(run_dir: str | Path, workers: int | None = None, timeout_s: float = 10.0,
            answer_policy: str | None = None) -> dict[str, Any]:
    """Grade the stored responses of ``run_dir`` again (e.g. after a grader upgrade) and rewrite them.

    ``answer_policy`` switches the run to that policy (:mod:`pr1_eval.grading.policy`); None keeps
    the run's own (``paper`` for runs that record none). Returns ``samples`` (how many were graded),
    ``changed`` (how many verdicts differ from the stored ones), ``policy`` and ``seconds``;
    ``run.json`` records when (``regraded_at``) and the policy (``answer_policy``).
    """
    store = RunStore(run_dir)
    store.read_run()  # a clear error when it is not a run, before any lock is taken
    # a full disk anywhere below (the lock, a part, run.json, an OSError without a file name)
    # names the run's folder and its disk, not the working folder
    with disk_full_errors(run_dir, what=f"the regraded samples of {run_dir}"), run_lock(run_dir, "pr1-eval regrade"):
        store.recover_swap()
        record = store.read_run()
        if record.status != "complete":
            raise Pr1EvalError(f"{run_dir}: its status is {record.status!r}, not complete (it is being written, or "
                               "was stopped); regrade grades a finished run: finish it first (rerun the command "
                               "that made it), then regrade")
        policy = check_policy(answer_policy) if answer_policy is not None else record.policy
        records = store.read_records(may_lack=GRADE_COLUMNS)  # what it grades again may be missing
        if not records:
            raise Pr1EvalError(f"{run_dir}: no samples to regrade")
        before = [(r.correct, r.correct_paper, r.grade_status) for r in records]
        started = time.perf_counter()
        annotate_grades(records, workers=workers, timeout_s=timeout_s, progress=True, policy=policy)
        store.rewrite(records)
        changed = sum(b != (r.correct, r.correct_paper, r.grade_status) for b, r in zip(before, records, strict=True))
        store.write_run(dataclasses.replace(record, regraded_at=now_iso(), answer_policy=policy))
    return {"samples": len(records), "changed": changed, "policy": policy,
            "seconds": round(time.perf_counter() - started, 1)}
