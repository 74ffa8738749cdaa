"""Synthetic Parallel-Probe trajectory files (the released ones carry no license and are never
copied here): questions whose branches drift between a few answers and settle, like real probes."""

from __future__ import annotations

import json
import random
from pathlib import Path


def write_trajectories(path: Path, questions: int = 4, branches: int = 16, seed: int = 0) -> Path:
    """Questions whose branches drift between a few answers and settle, like real probes do."""
    rng = random.Random(seed)
    data = []
    for q in range(questions):
        gold = str(10 + q)
        each = []
        for _ in range(branches):
            final = gold if rng.random() < 0.6 else rng.choice([str(q), "ERR", f"\\frac{{{q}}}{{2}}"])
            probes = [rng.choice(["ERR", final, str(q + 1)]) for _ in range(rng.randint(1, 12))]
            each.append([probes, rng.randint(100, 6000), final])
        data.append({"question": f"Problem {q}: what is {gold}?", "gold_answer": gold, "probe_freq": 500,
                     "final_answers_trace": [b[2] for b in each], "each_branch": each})
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
