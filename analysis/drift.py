"""Behaviour drift over training: how block position, parallel ratio and accuracy move with step.

The paper's claim (b) is that ``<Parallel>`` blocks move later in the response as RL goes on.
A claim about a trend needs a test, so every metric gets Spearman's ρ against the checkpoint
step (rank-based: robust to the uneven spacing of saved steps) with scipy's p-value. Because
that p-value comes from a t approximation that is badly off for a handful of checkpoints, the
detailed table also carries the exact permutation p-value when there are at most 8 steps.

Runs are compared only within one *model family* (one training job: the model path with its
``global_step_N`` component wildcarded) and one decoding mode, so two experiments never mix.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from pr1_eval.records.provenance import checkpoint_step
from pr1_eval.records.run import RunRecord

_STEP_COMPONENT = re.compile(r"global_step[_-]?\d+")
#: Metrics (columns of the per-step table) whose trend against step is tested.
TREND_METRICS: tuple[str, ...] = (
    "block_rel_pos",
    "first_block_rel_pos",
    "parallel_ratio",
    "accuracy",
    "share_verification",
    "share_exploration",
)
#: The metric reported as ``drift`` in ``analyze --json`` (the paper's claim b).
DRIFT_JSON_METRIC = "block_rel_pos"
#: Fewest distinct steps for which a trend is computed at all.
MIN_STEPS = 3
#: Up to this many steps the exact permutation p-value is computed (8! = 40,320 orderings).
EXACT_MAX_STEPS = 8


def resolve_step(run: RunRecord, run_path: str | Path) -> int | None:
    """Checkpoint step of a run: ``model.step`` in its record, else a ``global_step_N`` in the
    model path, else in the run directory's path; ``None`` when none of them says."""
    if run.model.step is not None:
        return run.model.step
    for text in (run.model.path, str(run_path)):
        if text:
            parsed = checkpoint_step(str(text))
            if parsed is not None:
                return parsed
    return None


def model_family(run: RunRecord, run_name: str) -> str:
    """Which training job a run's checkpoint belongs to: ``model.family`` when run.json sets
    it, else the model path (or, without one, the run name) with ``global_step_N`` replaced by
    ``global_step_*``, so all checkpoints of one job share a family."""
    if run.model.family:
        return run.model.family
    base = run.model.path or run_name
    return _STEP_COMPONENT.sub("global_step_*", base)


def exact_spearman_p(x: np.ndarray, y: np.ndarray) -> float | None:
    """Two-sided exact permutation p-value of Spearman's ρ (all orderings of ``y``'s ranks);
    ``None`` above :data:`EXACT_MAX_STEPS` points. Ties are handled through average ranks."""
    n = len(x)
    if n > EXACT_MAX_STEPS or n < 2:
        return None
    rx = pd.Series(x).rank().to_numpy()
    ry = pd.Series(y).rank().to_numpy()
    observed = abs(_pearson(rx, ry))
    hits = total = 0
    for perm in itertools.permutations(ry):
        total += 1
        hits += abs(_pearson(rx, np.asarray(perm))) >= observed - 1e-12
    return hits / total


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    denom = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom else 0.0


def trend(steps: pd.Series, values: pd.Series) -> dict[str, Any]:
    """Spearman's ρ of ``values`` against ``steps`` (null values dropped) and its p-values;
    nulls plus a note when there are too few steps or a constant series."""
    frame = pd.DataFrame({"step": steps, "value": values}).dropna()
    n = int(frame["step"].nunique())
    out: dict[str, Any] = {"spearman_rho": None, "p_value": None, "p_value_exact": None, "n_steps": n, "note": None}
    if n < MIN_STEPS:
        out["note"] = f"{n} step(s) with a value; a trend needs at least {MIN_STEPS}"
        return out
    if frame["value"].nunique() < 2:
        out["note"] = "the value is the same at every step; rank correlation undefined"
        return out
    result = spearmanr(frame["step"].to_numpy(float), frame["value"].to_numpy(float))
    rho, p = float(result.statistic), float(result.pvalue)
    out["spearman_rho"] = None if math.isnan(rho) else rho
    out["p_value"] = None if math.isnan(p) else p
    out["p_value_exact"] = exact_spearman_p(frame["step"].to_numpy(float), frame["value"].to_numpy(float))
    if n <= EXACT_MAX_STEPS:
        out["note"] = "few steps: prefer p_value_exact (scipy's p-value is a t approximation)"
    return out


def drift_trends(points: pd.DataFrame) -> pd.DataFrame:
    """One row per (model_family, decoding, task, metric) with ρ, p-values, n_steps, note.

    ``points`` is the per-step table (:func:`analysis.summary.drift_points`): one row per
    (model_family, decoding, task, step) with the :data:`TREND_METRICS` columns.
    """
    rows = []
    columns = ["model_family", "decoding", "task", "metric", "spearman_rho", "p_value", "p_value_exact", "n_steps", "note"]
    if points.empty:
        return pd.DataFrame(columns=columns)
    for (family, decoding, task), group in points.groupby(["model_family", "decoding", "task"], sort=True, dropna=False):
        for metric in TREND_METRICS:
            if metric not in group:
                continue
            rows.append({"model_family": family, "decoding": decoding, "task": task, "metric": metric,
                         **trend(group["step"], group[metric])})
    return pd.DataFrame(rows, columns=columns)


def drift_json(trends: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The ``drift`` object of ``analyze --json``: per task, the block-position trend.

    Keyed by task; when one task has several families or decoding modes, each key becomes
    ``"TASK [family, decoding]"`` so none overwrites another.
    """
    chosen = trends[trends["metric"] == DRIFT_JSON_METRIC] if not trends.empty else trends
    out: dict[str, dict[str, Any]] = {}
    for task, group in chosen.groupby("task", sort=True):
        row: Any
        for row in group.itertuples():
            key = str(task) if len(group) == 1 else f"{task} [{row.model_family}, {row.decoding}]"
            out[key] = {"spearman_rho": row.spearman_rho, "p_value": row.p_value, "n_steps": int(row.n_steps)}
    return out
