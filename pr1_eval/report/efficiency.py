"""What thinking in parallel buys: a task's token-latency figures from its samples' stored lengths.

The per-sample lengths are :mod:`pr1_eval.protocol.critical_path`'s (``response_length``,
``critical_path``, ``losing_path_length``, in ``length_unit``). From them, over the same samples as
the task's accuracy (the report's completeness rules decide which):

* **speedup** = mean response length / mean critical path (a ratio of means, as ThreadWeaver's
  per-benchmark figure): how many times fewer positions a parallel engine waits for than a sequential
  one writes. Its 95% interval is the percentile bootstrap over problems the accuracy intervals use
  (same resamples, same seed, problem-id order): each resample draws problems, and the ratio of its
  summed lengths is one bootstrap value (paired: one draw for numerator and denominator);
* the **per-problem distribution**: each problem's own ratio of its samples' sums, median and 90th
  percentile over problems;
* **losing-path share**: the share of all length spent in paths shorter than their block's longest;
* **speedup by correctness**: the ratio of means over correct samples and over wrong ones (could-not-
  score counts as wrong, as in the accuracy figures).

Samples without text (no length) are left out of every figure. A task whose samples are counted in
different units (an old token-unit run read in characters beside new samples) gets no figures and
``length_unit`` 'mixed', since a mean over tokens and characters means nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pr1_eval.stats.metrics import ratio_ci

Interval = tuple[float, float]
#: The sample columns the figures read.
LENGTH_COLUMNS = ("response_length", "critical_path", "losing_path_length", "length_unit")


@dataclass(frozen=True)
class Efficiency:
    """A task's token-latency figures (each None when no sample has a length)."""

    response_length_per_sample: float | None = None
    critical_path_per_sample: float | None = None
    length_unit: str | None = None
    speedup: float | None = None
    speedup_ci95: Interval | None = None
    speedup_problem_median: float | None = None
    speedup_problem_p90: float | None = None
    losing_path_share: float | None = None
    speedup_correct: float | None = None
    speedup_wrong: float | None = None


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator / denominator) if denominator > 0 else None


def efficiency(frame: pd.DataFrame, correct: np.ndarray) -> Efficiency:
    """The figures of ``frame``'s samples (``correct``: each row's verdict, could-not-score False)."""
    if not len(frame) or any(c not in frame for c in LENGTH_COLUMNS):
        return Efficiency()
    lengths = {name: frame[name].to_numpy(dtype=float, na_value=np.nan) for name in LENGTH_COLUMNS[:3]}
    return length_figures(frame["problem_id"].astype(str).to_numpy(dtype=object),
                          {**lengths, "length_unit": frame["length_unit"].to_numpy(dtype=object)}, correct)


def length_figures(problem: np.ndarray, lengths: Mapping[str, np.ndarray], correct: np.ndarray) -> Efficiency:
    """The figures from arrays, one entry per sample: ``problem`` sorts as the problem ids do (the ids,
    or their ranks), ``lengths`` holds :data:`LENGTH_COLUMNS` (the lengths as floats, NaN: none).

    Why arrays: a report of thousands of tasks computes every task's figures from its run's columns
    converted once (:mod:`pr1_eval.report.task_arrays`). Each problem's summed lengths come from
    ``bincount``: lengths are counts, so their float sums are exact in any order of addition."""
    has = ~np.isnan(lengths["critical_path"]) & ~np.isnan(lengths["response_length"])
    units = {str(u) for u in lengths["length_unit"][has] if u is not None}
    if len(units) > 1:
        return Efficiency(length_unit="mixed")
    if not has.any():
        return Efficiency()
    response, critical = lengths["response_length"][has], lengths["critical_path"][has]
    losing = lengths["losing_path_length"][has]
    losing = np.where(np.isnan(losing), 0.0, losing)
    right = np.asarray(correct, dtype=bool)[has]
    ids, which = np.unique(problem[has], return_inverse=True)  # problem-id order, as the intervals need
    response_sums = np.bincount(which, weights=response, minlength=len(ids))
    critical_sums = np.bincount(which, weights=critical, minlength=len(ids))
    per_problem = response_sums / np.where(critical_sums > 0, critical_sums, np.nan)
    per_problem = per_problem[np.isfinite(per_problem)]
    return Efficiency(
        response_length_per_sample=float(response.mean()), critical_path_per_sample=float(critical.mean()),
        length_unit=units.pop() if units else None, speedup=_ratio(response.sum(), critical.sum()),
        speedup_ci95=ratio_ci(response_sums, critical_sums),
        speedup_problem_median=float(np.median(per_problem)) if per_problem.size else None,
        speedup_problem_p90=float(np.quantile(per_problem, 0.9)) if per_problem.size else None,
        losing_path_share=_ratio(losing.sum(), response.sum()),
        speedup_correct=_ratio(response[right].sum(), critical[right].sum()),
        speedup_wrong=_ratio(response[~right].sum(), critical[~right].sum()))
