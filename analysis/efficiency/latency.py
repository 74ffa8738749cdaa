"""What thinking in parallel buys in latency: the tables behind the efficiency figures.

Why these numbers: an engine that runs sibling paths side by side waits only for the critical
path (main line + the longest path of each block + joins and summaries), so a response's token
latency is its ``critical_path``, not its ``response_length``. The **speedup** is the ratio of the
means, mean response length / mean critical path, over a run × task or over one problem's samples
(a ratio of means, as ThreadWeaver reports it: a mean of per-sample ratios would weigh a
10-token answer like a 10,000-token one). Both columns are per sample, in the sample's ``length_unit`` (tokens when the
run knew a tokenizer, else characters; :mod:`pr1_eval.protocol.critical_path`), falling back on
``position_unit`` for a frame that predates that column.

Accuracy here is Mean@k as the report computes it on a complete cell (:func:`graded`): the mean
over problems of each problem's share of correct samples, a sample the grader could not score
(timeout, error) counting as wrong and a problem without a gold left out. A checkpoint is better on both
axes when it is more accurate *and* answers sooner; :func:`pareto_frontier` marks the ones no
other checkpoint beats on both.

Every function takes a samples frame with the columns it names and returns plain frames, so the
analyze pages, the dashboard and the notebooks draw the same numbers; a frame without the latency
columns (runs loaded before they existed) gives empty tables, and the figures are then skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.common.completeness import cell_flags
from pr1_eval.records.sample import NO_GOLD

LATENCY = ("critical_path", "response_length")
RUN_KEYS = ["run", "task"]
STEP_KEYS = ["model_family", "decoding", "task", "step"]
#: Run metadata carried onto each point (whichever the frame has).
POINT_META = ("model", "model_family", "step", "decoding", "run_path")
#: Decodings whose ``critical_path_tokens`` the decoder measured on the response's structure (a
#: sequential decoder's is only the response length, whatever blocks the response holds).
MEASURED = ("forkjoin", "structured")
#: What :func:`latency_samples` reads when the frame has no ``critical_path`` column.
MEASURED_COLUMNS = ("critical_path_tokens", "n_response_tokens")


def latency_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """``samples`` with ``critical_path`` and ``response_length``: the stored columns when the
    frame has them; otherwise, on runs decoded with fork-join or structured decoding, the lengths
    the decoder measured (``critical_path_tokens``, ``n_response_tokens``; ``position_unit`` then
    says ``token``, their unit), and None on
    every other run (runs loaded before the per-sample columns existed)."""
    if all(c in samples for c in LATENCY) or not all(c in samples for c in (*MEASURED_COLUMNS, "decoding")):
        return samples
    measured = samples["decoding"].isin(MEASURED)
    unit = samples["position_unit"].where(~measured, "token") if "position_unit" in samples else "token"
    return samples.assign(critical_path=samples["critical_path_tokens"].where(measured),
                          response_length=samples["n_response_tokens"].where(measured), position_unit=unit)


def with_latency(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples whose critical path and response length are both known, the path positive."""
    if samples.empty or any(c not in samples for c in LATENCY):
        return samples.iloc[0:0]
    cp = pd.to_numeric(samples["critical_path"], errors="coerce")
    length = pd.to_numeric(samples["response_length"], errors="coerce")
    return samples[cp.notna() & length.notna() & (cp > 0)]


def speedup(response_length: Sequence[float] | pd.Series, critical_path: Sequence[float] | pd.Series) -> float | None:
    """Mean response length / mean critical path (a ratio of means); None when there is nothing."""
    lengths = np.asarray(response_length, dtype=float)
    paths = np.asarray(critical_path, dtype=float)
    if not len(paths) or paths.sum() <= 0:
        return None
    return float(lengths.mean() / paths.mean())


def graded(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples Mean@k counts, with ``correct`` as a float: as in the report, could-not-score
    (``correct`` null: timeout, error) is wrong and a problem without a gold (``grade_status``
    ``no_gold``; without that column, a problem none of whose samples has a verdict) is left out."""
    if "correct" not in samples or samples.empty:
        return samples.iloc[0:0].assign(correct=pd.Series(dtype=float))
    if "grade_status" in samples:
        counted = samples[samples["grade_status"] != NO_GOLD]
    else:
        keys = [c for c in ("run", "task", "problem_id") if c in samples]
        counted = samples[samples["correct"].notna().groupby([samples[k] for k in keys]).transform("any")]
    return counted.assign(correct=counted["correct"].astype("boolean").fillna(False).astype(float))


def problem_speedups(samples: pd.DataFrame, by: Sequence[str] = ("run", "task")) -> pd.DataFrame:
    """One row per ``by`` × problem: samples with a latency, mean length, mean critical path, speedup."""
    keys = [*by, "problem_id"]
    columns = [*keys, "n", "response_length", "critical_path", "speedup"]
    held = with_latency(samples)
    if held.empty:
        return pd.DataFrame(columns=columns)
    frame = held[keys].assign(response_length=pd.to_numeric(held["response_length"]).astype(float),
                              critical_path=pd.to_numeric(held["critical_path"]).astype(float))
    out = frame.groupby(keys, sort=True, dropna=False).agg(
        n=("critical_path", "size"), response_length=("response_length", "mean"), critical_path=("critical_path", "mean"))
    out["speedup"] = out["response_length"] / out["critical_path"]
    return out.reset_index()[columns]


def latency_points(samples: pd.DataFrame, by: Sequence[str] = RUN_KEYS) -> pd.DataFrame:
    """One row per ``by`` group: Mean@k, mean critical path and response length, speedup, parallel
    ratio, the unit, and the run metadata of :data:`POINT_META`; groups without a latency are left out.

    Mean@k, ``n_samples`` and the parallel ratio count every sample of the group; the latency
    columns only the samples that have one (``n_latency``)."""
    keys = list(by)
    held = with_latency(samples)
    if held.empty:
        return pd.DataFrame()
    latency = held[keys].assign(cp=pd.to_numeric(held["critical_path"]).astype(float),
                                rl=pd.to_numeric(held["response_length"]).astype(float))
    points = latency.groupby(keys, sort=True, dropna=False).agg(
        n_latency=("cp", "size"), critical_path=("cp", "mean"), response_length=("rl", "mean"))
    points["speedup"] = points["response_length"] / points["critical_path"]
    meta = [m for m in POINT_META if m in held and m not in keys]
    if meta:
        points = points.join(held.groupby(keys, sort=True, dropna=False)[meta].first())
    unit_column = next((c for c in ("length_unit", "position_unit") if c in held), None)
    if unit_column is not None:
        units = {key: _one_unit(group) for key, group in held.groupby(keys, sort=True, dropna=False)[unit_column]}
        points["unit"] = [units.get(key) for key in points.index]
    grouped = samples.groupby(keys, sort=True, dropna=False)
    points = points.join(grouped.size().rename("n_samples"))
    if "has_parallel" in samples:
        points = points.join(samples["has_parallel"].astype(bool).astype(float).groupby(
            [samples[k] for k in keys], sort=True, dropna=False).mean().rename("parallel_ratio"))
    scored = graded(samples)
    if not scored.empty:
        per_problem = scored["correct"].groupby(
            [scored[k] for k in [*keys, "problem_id"]], sort=True, dropna=False).mean()
        points = points.join(per_problem.groupby(level=list(range(len(keys))), dropna=False).mean().rename("accuracy"))
    else:
        points["accuracy"] = np.nan
    return points.reset_index()


def _one_unit(units: pd.Series) -> str | None:
    """The unit of a group's lengths: the one every sample names, ``mixed`` when they differ."""
    named = {str(u) for u in units.dropna()}
    return None if not named else (named.pop() if len(named) == 1 else "mixed")


def step_series(samples: pd.DataFrame, by: Sequence[str] = STEP_KEYS) -> pd.DataFrame:
    """:func:`latency_points` per family × decoding × task × step, over the samples that have a
    step, in step order (what the over-training figure draws)."""
    if samples.empty or "step" not in samples:
        return pd.DataFrame()
    points = latency_points(samples[samples["step"].notna()], by=by)
    return points.sort_values(list(by)).reset_index(drop=True) if not points.empty else points


def pareto_frontier(accuracy: Sequence[float] | pd.Series, latency: Sequence[float] | pd.Series) -> list[bool]:
    """Which points no other point beats: none has accuracy ≥ and latency ≤ with one strictly better.

    Higher accuracy and lower latency are better. A point with a missing (NaN) value is never on
    the frontier and beats nothing; equal points are all on it (none beats another). O(n log n):
    sweep by latency, keeping the best accuracy of every strictly faster point."""
    acc = np.asarray(accuracy, dtype=float)
    lat = np.asarray(latency, dtype=float)
    if acc.shape != lat.shape:
        raise ValueError(f"pareto_frontier: {len(acc)} accuracies but {len(lat)} latencies")
    on = [False] * len(acc)
    valid = [i for i in range(len(acc)) if np.isfinite(acc[i]) and np.isfinite(lat[i])]
    valid.sort(key=lambda i: (lat[i], -acc[i]))
    best_faster = -np.inf  # best accuracy among points strictly faster than the current latency
    start = 0
    while start < len(valid):
        end = start
        while end < len(valid) and lat[valid[end]] == lat[valid[start]]:
            end += 1
        top = acc[valid[start]]  # the group is sorted by accuracy, best first
        for i in valid[start:end]:
            on[i] = bool(acc[i] == top and acc[i] > best_faster)
        best_faster = max(best_faster, top)
        start = end
    return on


def efficiency_tables(samples: pd.DataFrame, cells: pd.DataFrame | None = None,
                      include_incomplete: bool = False) -> dict[str, pd.DataFrame]:
    """The three tables the pictures draw: ``problems`` (:func:`problem_speedups`), ``points``
    (:func:`latency_points` per run × task, with ``complete`` from ``cells``, the loader's
    completeness frame) and ``steps`` (:func:`step_series`, complete cells only unless
    ``include_incomplete``, the drift's rule), of :func:`latency_samples`. All empty when no
    sample has a critical path."""
    samples = latency_samples(samples)
    if with_latency(samples).empty:
        return {"problems": pd.DataFrame(), "points": pd.DataFrame(), "steps": pd.DataFrame()}
    points = latency_points(samples)
    stepped = samples[samples["step"].notna()] if "step" in samples else samples.iloc[0:0]
    if cells is not None and not cells.empty:
        points = points.merge(cells[[*RUN_KEYS, "complete"]], on=RUN_KEYS, how="left")
        points["complete"] = points["complete"].fillna(True).astype(bool)
        if not include_incomplete and not stepped.empty:
            stepped = stepped[cell_flags(stepped, cells)]
    return {"problems": problem_speedups(samples), "points": points, "steps": step_series(stepped)}
