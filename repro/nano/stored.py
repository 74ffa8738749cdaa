"""The per-step rollout runs a job stored, read back through pr1-eval's run store.

The recount side of the nano checks: each ``train/step-N`` run's status, row count and the rewards
of its rows, straight from ``samples.parquet`` (not from the summary the writer computed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pr1_eval.store.run_store import RunStore


def stored_steps(train_dir: Path) -> dict[int, dict[str, Any]]:
    """``{step: {"status", "rows", "rewards", "parallel", "blocks", "groups", "parallel_groups", "mean_reward",
    "summary"}}`` for every run
    under ``train_dir``. Rows in (problem, sample) order, so two runs' lists compare element by element
    (the writer stores them in the order the reward workers finished them); ``parallel`` is each row's
    ``has_parallel`` (at least one block: the parallel ratio is its mean), ``blocks`` its block count;
    ``groups`` / ``parallel_groups`` the same rewards / block flags split by prompt (``{problem_id: [values]}``):
    the unit the learning checks count in (:func:`repro.nano.checks.trend_z`)."""
    out: dict[int, dict[str, Any]] = {}
    if not train_dir.is_dir():
        return out
    for folder in sorted(train_dir.iterdir()):
        store = RunStore(folder)
        if not store.exists():
            continue
        record = store.read_run()
        table = store.read_table(columns=["problem_id", "sample_idx", "reward", "has_parallel", "n_blocks"])
        rows = sorted((r for r in table.to_pylist() if r["reward"] is not None),
                      key=lambda r: (str(r["problem_id"]), int(r["sample_idx"])))
        rewards = [float(r["reward"]) for r in rows]
        by_problem: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by_problem.setdefault(str(r["problem_id"]), []).append(r)
        out[record.training.step if record.training is not None else 0] = {
            "status": record.status, "rows": len(rewards), "rewards": rewards,
            "parallel": [float(bool(r["has_parallel"])) for r in rows], "blocks": [int(r["n_blocks"]) for r in rows],
            "groups": {p: [float(r["reward"]) for r in g] for p, g in by_problem.items()},
            "parallel_groups": {p: [float(bool(r["has_parallel"])) for r in g] for p, g in by_problem.items()},
            "mean_reward": sum(rewards) / len(rewards) if rewards else float("nan"),
            "summary": None if record.training is None else record.training.summary,
        }
    return dict(sorted(out.items()))
