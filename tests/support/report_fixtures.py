"""Sample frames with chosen verdicts, and run records with chosen tasks, for the report's tests.

Shared by the metric tests (hand-computed Mean@k, Pass@k, Best@k, Maj@k against these verdicts)
and the schema tests (the same reports read back from their JSON form).
"""

from __future__ import annotations

import pandas as pd

from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord


def verdict_frame(counts: dict[str, list[bool]], task: str = "t", paper: dict[str, list[bool]] | None = None) -> pd.DataFrame:
    """One row per verdict: ``counts[pid][i]`` is math-verify's verdict on sample ``i`` of problem ``pid``,
    ``paper`` the paper checker's (default: the same); even samples open a block, sample ``i`` has
    ``10 + i`` response tokens."""
    rows = []
    for pid, verdicts in counts.items():
        for i, ok in enumerate(verdicts):
            rec = SampleRecord(task=task, problem_id=pid, sample_idx=i, response="r", gold="1", correct=ok,
                               correct_paper=(paper or {}).get(pid, verdicts)[i], grade_status="ok",
                               answer_class=0 if ok else 1, n_response_tokens=10 + i, has_parallel=i % 2 == 0)
            rows.append(rec.to_row())
    return pd.DataFrame(rows)


def run_record(tasks: dict[str, tuple[list[str], int]], status: str = "complete") -> RunRecord:
    """A run record planning ``tasks[name] = (problem ids, k)``."""
    return RunRecord(status=status, k=None,
                     tasks={t: task_entry(ids, k, version="1", source="test", data_hash=None) for t, (ids, k) in tasks.items()})
