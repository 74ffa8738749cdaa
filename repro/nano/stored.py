"""The per-step rollout runs a job stored, read back through pr1-eval's run store.

The recount side of the nano checks: each ``train/step-N`` run's status, row count and the rewards
of its rows, straight from ``samples.parquet`` (not from the summary the writer computed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pr1_eval.store.run_store import RunStore


def stored_steps(train_dir: Path) -> dict[int, dict[str, Any]]:
    """``{step: {"status", "rows", "rewards", "mean_reward", "summary"}}`` for every run under ``train_dir``."""
    out: dict[int, dict[str, Any]] = {}
    if not train_dir.is_dir():
        return out
    for folder in sorted(train_dir.iterdir()):
        store = RunStore(folder)
        if not store.exists():
            continue
        record = store.read_run()
        rewards = [float(r) for r in store.read_table(columns=["reward"]).column("reward").to_pylist()
                   if r is not None]
        out[record.training.step if record.training is not None else 0] = {
            "status": record.status, "rows": len(rewards), "rewards": rewards,
            "mean_reward": sum(rewards) / len(rewards) if rewards else float("nan"),
            "summary": None if record.training is None else record.training.summary,
        }
    return dict(sorted(out.items()))
