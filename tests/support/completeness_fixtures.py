"""Runs that lack samples their run.json declares, next to complete ones, for every surface's tests.

The issue's example made small: a training job with checkpoints at steps 100, 200 and 300
(complete: aime24 with 10 problems, amc23 with 4, k = 4) and a run at step 250 that was killed
(status ``running``) after 4 of its 10 aime24 problems, its declared amc23 never started. Sample
``s`` of a problem is right when ``s < c`` (:func:`leaderboard_fixtures.write_counts_run`), so every
expected number below is counted by hand from :data:`COUNTS`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.leaderboard_fixtures import write_counts_run

K = 4
FAMILY = "/ckpt/job"
AIME = [f"a{i}" for i in range(10)]
AMC = [f"m{i}" for i in range(4)]
#: correct samples (of K) per problem, per step: accuracy 1/4, 2/4, 3/4 at steps 100, 200, 300
COUNTS = {step: {"aime24": dict.fromkeys(AIME, step // 100), "amc23": dict.fromkeys(AMC, step // 100)}
          for step in (100, 200, 300)}
KILLED_STEP = 250
KILLED_HELD = AIME[:4]  # the killed run stored these 4 of the 10 aime24 problems, each with all K samples
KILLED_CORRECT = 0  # and got none of them right: accuracy 0.0 on what it holds, below every neighbour
KILLED_ACCURACY = KILLED_CORRECT / K


def write_killed_run(root: Path, name: str = "killed") -> Path:
    """The killed step: status running, 4 of 10 aime24 problems stored, amc23 declared but never started."""
    path = write_counts_run(root, name, {"aime24": dict.fromkeys(KILLED_HELD, KILLED_CORRECT)}, k=K,
                            step=KILLED_STEP, family=FAMILY, status="running", declared={"aime24": AIME})
    record = json.loads((path / "run.json").read_text(encoding="utf-8"))
    record["tasks"]["amc23"] = {"data_hash": "hash-v1", "n_problems": len(AMC), "problem_ids": AMC, "k": K}
    (path / "run.json").write_text(json.dumps(record), encoding="utf-8")
    return path


def write_sweep(root: Path) -> dict[str, Path]:
    """step100, step200, step300 (complete) and the killed step250, under ``root``."""
    runs = {f"step{s}": write_counts_run(root, f"step{s}", counts, k=K, step=s, family=FAMILY)
            for s, counts in COUNTS.items()}
    runs["killed"] = write_killed_run(root)
    return runs
