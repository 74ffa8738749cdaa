"""Synthetic Parallel-Probe trajectory files for the replay tests (the released ones carry no
license and are never copied here)."""

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
            each.append([probes, max(rng.randint(100, 6000), 500 * len(probes)), final])  # probes fit the tokens
        data.append({"question": f"Problem {q}: what is {gold}?", "gold_answer": gold, "probe_freq": 500,
                     "final_answers_trace": [b[2] for b in each], "each_branch": each})
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
