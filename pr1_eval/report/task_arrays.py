"""A run's samples as numpy arrays, split by task once: what lets one pass report every task.

Why: ``report`` and the leaderboard took each task's rows out of the run's frame (one comparison
over the whole run per task: quadratic in tasks) and ran some twenty pandas operations on each
(about 30 ms a task), so a run of 3,000 tasks (lm-eval subtasks) took minutes. Here the columns the
metrics read are converted once per run (:meth:`SampleArrays.of`); every conversion is elementwise,
so a task's arrays are exactly the run's arrays at its rows (:meth:`SampleArrays.take`), and every
task's rows come from one stable sort (:func:`task_rows`). The numbers themselves are computed from
these arrays by :mod:`pr1_eval.report.run_report`, the same code for one task's frame as for a run's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pr1_eval.records.sample import SCORED_STATUSES
from pr1_eval.report.efficiency import LENGTH_COLUMNS

#: The per-sample means of the report (``_mean_of``): None when the column is absent.
MEAN_COLUMNS = ("n_response_tokens", "engine_calls", "critical_path_tokens")


def verdicts(column: pd.Series) -> np.ndarray:
    """None/NaN (could not score) counts as not correct."""
    if column.dtype == bool:
        return column.to_numpy(dtype=bool)
    return np.array([bool(x) if x is not None and not pd.isna(x) else False for x in column], dtype=bool)


def answer_classes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Which samples gave an answer, and their answer classes as ``int(...)`` reads them (0 where none)."""
    answered = column.notna().to_numpy()
    values = column.to_numpy()
    if values.dtype.kind in "iu":
        return answered, values.astype(np.int64)
    classes = np.zeros(len(values), dtype=np.int64)
    classes[answered] = [int(c) for c in column.to_numpy(dtype=object)[answered]]
    return answered, classes


@dataclass(frozen=True)
class SampleArrays:
    """The columns a task's report reads, one entry per sample in frame order.

    ``rank`` orders problem ids as sorted strings (the order of every per-problem table and
    interval); a column the frame lacks is None and raises ``KeyError`` only where it is read, as
    the frame did."""

    problem: np.ndarray  # problem ids as str
    rank: np.ndarray  # int: the id's place among the sorted ids of the frame converted
    sample_idx: np.ndarray
    correct: np.ndarray | None  # verdicts (could not score: False)
    correct_paper: np.ndarray | None
    answered: np.ndarray | None
    answer_class: np.ndarray | None
    has_parallel: np.ndarray | None
    format_ok: np.ndarray | None
    truncated: np.ndarray | None  # finish_reason 'length'
    no_answer: np.ndarray | None  # grade_status 'no_answer'
    unscored: np.ndarray | None  # grade_status not scored
    means: dict[str, np.ndarray]  # MEAN_COLUMNS present, float (NaN: none)
    lengths: dict[str, np.ndarray] | None  # LENGTH_COLUMNS (None unless all present)

    @classmethod
    def of(cls, frame: pd.DataFrame) -> SampleArrays:
        """Convert ``frame``'s columns once (see the module docstring)."""
        problem = frame["problem_id"].astype(str).to_numpy(dtype=object)
        rank, _ = pd.factorize(problem, sort=True)
        answered, classes = answer_classes(frame["answer_class"]) if "answer_class" in frame else (None, None)
        return cls(
            problem=problem, rank=np.asarray(rank, dtype=np.int64), sample_idx=frame["sample_idx"].to_numpy(),
            correct=_maybe(frame, "correct", verdicts), correct_paper=_maybe(frame, "correct_paper", verdicts),
            answered=answered, answer_class=classes,
            has_parallel=_maybe(frame, "has_parallel", lambda c: c.astype(bool).to_numpy()),
            format_ok=_maybe(frame, "format_ok", lambda c: c.astype(bool).to_numpy()),
            truncated=_maybe(frame, "finish_reason", lambda c: (c == "length").to_numpy(dtype=bool)),
            no_answer=_maybe(frame, "grade_status", lambda c: (c == "no_answer").to_numpy(dtype=bool)),
            unscored=_maybe(frame, "grade_status", lambda c: (~c.isin(SCORED_STATUSES)).to_numpy(dtype=bool)),
            means={name: _floats(frame[name]) for name in MEAN_COLUMNS if name in frame},
            lengths=None if any(c not in frame for c in LENGTH_COLUMNS) else {
                "response_length": _floats(frame["response_length"]), "critical_path": _floats(frame["critical_path"]),
                "losing_path_length": _floats(frame["losing_path_length"]),
                "length_unit": frame["length_unit"].to_numpy(dtype=object)})

    def __len__(self) -> int:
        return len(self.problem)

    def take(self, rows: np.ndarray) -> SampleArrays:
        """The samples at ``rows`` (positions or a mask), in that order."""
        def pick(value: np.ndarray | None) -> np.ndarray | None:
            return None if value is None else value[rows]

        changes: dict[str, Any] = {f.name: pick(getattr(self, f.name)) for f in dataclasses.fields(self)
                                   if f.name not in ("means", "lengths")}
        lengths = None if self.lengths is None else {name: v[rows] for name, v in self.lengths.items()}
        return dataclasses.replace(self, **changes, means={name: v[rows] for name, v in self.means.items()},
                                   lengths=lengths)


def need(value: np.ndarray | None, column: str) -> np.ndarray:
    """``value``, or the ``KeyError`` reading the absent column from the frame raised."""
    if value is None:
        raise KeyError(column)
    return value


def task_rows(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each task's row positions in ``frame``, in frame order (the rows ``frame[frame.task == name]``
    holds), tasks in first-seen order: one factorize and one stable sort for the whole run."""
    if not len(frame):
        return {}
    codes, names = pd.factorize(frame["task"].astype(str).to_numpy(dtype=object), sort=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return {str(name): order[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}


def _maybe(frame: pd.DataFrame, column: str, convert: Callable[[pd.Series], np.ndarray]) -> np.ndarray | None:
    return convert(frame[column]) if column in frame else None


def _floats(column: pd.Series) -> np.ndarray:
    return column.to_numpy(dtype=float, na_value=np.nan)
