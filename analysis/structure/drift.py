"""Behaviour drift over training: how block position, parallel ratio and accuracy move with step.

The paper's claim (b) is that ``<Parallel>`` blocks move later in the response as RL goes on.
A claim about a trend needs a test, so every metric gets Spearman's ρ against the checkpoint
step (rank-based: robust to the uneven spacing of saved steps) and one two-sided p-value,
``p_value``, computed by :func:`pr1_eval.stats.spearman.spearman_test` (exact permutation up to 8
steps, scipy's t approximation beyond; ``p_method`` says which) and read by every surface
(``analyze`` tables and ``--json``, the dashboard's Training page, notebook 02).

Runs are compared only within one *model family* (one training job: the model path with its
``global_step_N`` component wildcarded) and one decoding mode, so two experiments never mix.
Block positions measured in tokens at some steps and in characters at others are not one series:
such a trend is left out (null) with a note saying so (see :func:`trend`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pr1_eval.records.run import RunRecord
from pr1_eval.records.steps import checkpoint_step, starred_steps
from pr1_eval.stats.spearman import spearman_test

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
#: Metrics measured in a position unit (tokens or characters, the runs' ``position_unit``).
POSITION_METRICS = ("block_rel_pos", "first_block_rel_pos")
#: How each position unit is written in notes and labels.
UNIT_WORDS = {"token": "tokens", "char": "characters", "mixed": "tokens for some responses, characters for others"}


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
    return starred_steps(base)


def trend(steps: pd.Series, values: pd.Series) -> dict[str, Any]:
    """Spearman's ρ of ``values`` against ``steps`` (null values dropped) with its p-value and
    ``p_method`` (:func:`spearman_test`); nulls plus a note when there are too few steps or a
    constant series."""
    frame = pd.DataFrame({"step": steps, "value": values}).dropna()
    n = int(frame["step"].nunique())
    out: dict[str, Any] = {"spearman_rho": None, "p_value": None, "p_method": None, "n_steps": n, "note": None}
    if n < MIN_STEPS:
        out["note"] = f"{n} step(s) with a value; a trend needs at least {MIN_STEPS}"
        return out
    if frame["value"].nunique() < 2:
        out["note"] = "the value is the same at every step; rank correlation undefined"
        return out
    out.update(spearman_test(frame["step"].to_numpy(float), frame["value"].to_numpy(float)))
    return out


def _mixed_units(group: pd.DataFrame) -> str | None:
    """A note when the steps of one series measure block positions in different units, else None."""
    if "position_unit" not in group:
        return None
    by_unit: dict[str, list[str]] = {}
    for step, unit in zip(group["step"], group["position_unit"], strict=True):
        if isinstance(unit, str):
            by_unit.setdefault(unit, []).append(str(step))
    if len(by_unit) < 2 and "mixed" not in by_unit:
        return None
    where = "; ".join(f"{UNIT_WORDS.get(u, u)} at step(s) {', '.join(s)}" for u, s in sorted(by_unit.items()))
    return (f"block positions are in different units ({where}): no trend computed; "
            "import the runs with --tokenizer (or regenerate them) so every step counts tokens")


def drift_trends(points: pd.DataFrame) -> pd.DataFrame:
    """One row per (model_family, decoding, task, metric) with ρ, ``p_value``, ``p_method``,
    ``n_steps``, ``position_unit`` (for the position metrics: the unit every step shares) and a note.

    ``points`` is the per-step table (:func:`analysis.summary.drift_points`): one row per
    (model_family, decoding, task, step) with the :data:`TREND_METRICS` columns and ``position_unit``.
    """
    rows = []
    columns = ["model_family", "decoding", "task", "metric", "spearman_rho", "p_value", "p_method", "n_steps",
               "position_unit", "note"]
    if points.empty:
        return pd.DataFrame(columns=columns)
    for (family, decoding, task), group in points.groupby(["model_family", "decoding", "task"], sort=True, dropna=False):
        for metric in TREND_METRICS:
            if metric not in group:
                continue
            rows.append({"model_family": family, "decoding": decoding, "task": task, "metric": metric,
                         **metric_trend(group, metric)})
    return pd.DataFrame(rows, columns=columns)


def metric_trend(group: pd.DataFrame, metric: str) -> dict[str, Any]:
    """:func:`trend` of ``group[metric]`` against ``group["step"]`` (one series: one family × decoding ×
    task), plus ``position_unit`` for the :data:`POSITION_METRICS`. Positions whose steps are in
    different units get no trend and a note saying which steps are in which (never mixed silently).
    The drift table and the dashboard's Training page both call this."""
    values = pd.to_numeric(group[metric], errors="coerce")
    out = {**trend(group["step"], values), "position_unit": None}
    if metric in POSITION_METRICS:
        has_value = group[values.notna()]
        mixed = _mixed_units(has_value)
        units = {u for u in has_value.get("position_unit", pd.Series(dtype=object)) if isinstance(u, str)}
        out["position_unit"] = units.pop() if len(units) == 1 else None
        if mixed:
            out.update({"spearman_rho": None, "p_value": None, "p_method": None, "note": mixed})
    return out


def drift_json(trends: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The ``drift`` object of ``analyze --json``: per task, the block-position trend
    (``spearman_rho``, ``p_value``, ``p_method``, ``n_steps``, ``position_unit``).

    Keyed by task; when one task has several families or decoding modes, each key becomes
    ``"TASK [family, decoding]"`` so none overwrites another.
    """
    chosen = trends[trends["metric"] == DRIFT_JSON_METRIC] if not trends.empty else trends
    out: dict[str, dict[str, Any]] = {}
    for task, group in chosen.groupby("task", sort=True):
        row: Any
        for row in group.itertuples():
            key = str(task) if len(group) == 1 else f"{task} [{row.model_family}, {row.decoding}]"
            out[key] = {"spearman_rho": row.spearman_rho, "p_value": row.p_value, "p_method": row.p_method,
                        "n_steps": int(row.n_steps), "position_unit": row.position_unit}
    return out
