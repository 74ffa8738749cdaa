"""A mixed run for the one-pass report tests (``tests/pr1_eval/report/test_batched_report.py``,
``tests/analysis/test_leaderboard_batched.py``).

The mixed run interleaves five tasks with different k: a complete one with unscored samples and a
sample without lengths, one with a short problem and a mixed length unit (incomplete: partial
numbers), one with a problem without gold (left out of the metrics), one of a single problem (no
intervals) and, with a run record, one declared but without samples. Problem ids sort differently as
text than as numbers (p10 < p2) and rows are shuffled, so a wrong split or order shows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

#: task → (k, samples held per problem id); "gamma"'s p3 has no gold.
TASKS = {"alpha": (4, {"p1": 4, "p2": 4, "p10": 4, "p3": 4, "p7": 4}),
         "beta": (2, {"p1": 2, "p2": 1, "p10": 2}),
         "gamma": (3, {"p1": 3, "p2": 3, "p3": 3, "p11": 3}),
         "solo": (1, {"q": 1})}
NO_GOLD = ("gamma", "p3")


def _row(rng: np.random.Generator, task: str, pid: str, i: int) -> dict[str, Any]:
    status = "ok" if rng.random() > 0.2 else str(rng.choice(["timeout", "no_answer", "error"]))
    if (task, pid) == NO_GOLD:
        status = "no_gold"
    correct = None if status not in ("ok", "no_answer") else bool(rng.random() < 0.5) and status == "ok"
    blocks = int(rng.integers(0, 3))
    response = int(rng.integers(20, 200))
    critical = response - int(rng.integers(0, response // 2))
    return {"task": task, "problem_id": pid, "sample_idx": i, "correct": correct,
            "correct_paper": bool(rng.random() < 0.5), "answer_class": None if status == "no_answer" else int(rng.integers(0, 3)),
            "has_parallel": blocks > 0, "format_ok": bool(rng.random() < 0.7),
            "n_response_tokens": float(response) if rng.random() > 0.1 else math.nan,
            "finish_reason": "length" if rng.random() < 0.2 else "stop", "grade_status": status,
            "engine_calls": float(1 + blocks), "critical_path_tokens": float(critical),
            "response_length": response, "critical_path": critical, "losing_path_length": response - critical,
            "length_unit": "token", "n_blocks": blocks, "position_unit": "token",
            "block_rel_starts": [float(rng.random()) for _ in range(blocks)] or None}


def mixed_frame(seed: int = 0) -> pd.DataFrame:
    """The mixed run of the module docstring, rows shuffled."""
    rng = np.random.default_rng(seed)
    rows = [_row(rng, task, pid, i) for task, (_, held) in TASKS.items() for pid, n in held.items()
            for i in rng.permutation(n)]
    frame = pd.DataFrame(rows)
    frame.loc[(frame["task"] == "alpha") & (frame["problem_id"] == "p7") & (frame["sample_idx"] == 1),
              ["response_length", "critical_path"]] = None  # no text: no length
    frame.loc[(frame["task"] == "beta") & (frame["problem_id"] == "p1"), "length_unit"] = "char"
    frame.loc[(frame["task"] == "beta") & (frame["problem_id"] == "p1"), "position_unit"] = "char"
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)
