"""The leaderboard document (``pr1-eval leaderboard --json``) as types, version :data:`SCHEMA_VERSION`.

The document is plain JSON (what ``--json`` prints, the notebooks and the dashboard read); its
fixed-key parts are :class:`LeaderboardDocument`, :class:`RunRow`, :class:`Comparison` and
:class:`Excluded`. Two parts have keys that carry k (``mean@16``) and are dataclasses that write
and read them: one task of a run (:class:`TaskCell`) and a run's averages over tasks
(:class:`RunAverage`, :class:`Averages`). Readers take fields (``TaskCell.from_json(cell).mean``);
only ``to_json`` names metrics, through :meth:`pr1_eval.report.schema.TaskMetrics.metric_key`,
so a number has the name the report gives it.

Version 2 (the one change from version 1): the paper's Pass@16 — VERL's bootstrap best@K on the
paper's string checker — is ``best@K_paper`` in cells and averages, where version 1 called it
``pass@K_paper``. Why: ``pr1-eval report`` already names that number ``best@K_paper``, and
``pass@K`` is the unbiased Pass@K estimator, a different number; one number with two names, one
of them another number's, is how a table gets misread. Nothing else moved: same values, same
order, the key renamed in place.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypedDict

from pr1_eval.report.schema import TaskMetrics

#: Version of the document's shape (written as its ``schema_version``).
SCHEMA_VERSION = 2

Interval = tuple[float, float]


def _interval(value: Any) -> Interval | None:
    return None if not value else (float(value[0]), float(value[1]))


def _listed(value: Interval | None) -> list[float] | None:
    return None if value is None else [value[0], value[1]]


@dataclass(frozen=True)
class TaskCell:
    """One task of one run: the report's numbers on exactly the compared samples (an incomplete
    run ranked on request: over its problems holding all k), plus structure statistics.

    JSON keys in order: ``k``, ``n_problems``, ``mean@K``, ``ci95`` (of mean@K), ``pass@K``,
    ``best@K_paper`` (the paper's Pass@K), ``maj@K``, ``parallel_ratio``, then the extras
    ``n_samples``, ``pass@1``, ``pass@K_ci95``, ``best@K``, ``mean@K_paper``,
    ``first_block_rel_pos``, ``position_unit`` ('token' or 'char', the unit of the position), then the
    token-latency extras (:mod:`pr1_eval.report.efficiency`, the report's fields of the same names):
    ``length_unit``, ``response_length_per_sample``, ``critical_path_per_sample``, ``speedup``,
    ``speedup_ci95``, ``speedup_problem_median``, ``speedup_problem_p90``, ``losing_path_share``,
    ``speedup_correct``, ``speedup_wrong``, then the report's split of Var(mean@K)
    (:class:`pr1_eval.report.schema.MeanVariance`): ``se`` (standard error of mean@K over problems),
    ``variance_between`` and ``variance_within`` (its two parts, which add up to se²) and
    ``required_k`` (samples per problem past which more narrow the interval by at most ~5 %; None:
    no between-problem spread detected)."""

    k: int
    n_problems: int
    mean: float
    ci95: Interval | None
    pass_at_k: float
    best_at_k_paper: float
    maj_at_k: float
    parallel_ratio: float | None
    n_samples: int
    pass_at_1: float | None = None
    pass_at_k_ci95: Interval | None = None
    best_at_k: float | None = None
    mean_paper: float | None = None
    first_block_rel_pos: float | None = None
    position_unit: str | None = None
    length_unit: str | None = None
    response_length_per_sample: float | None = None
    critical_path_per_sample: float | None = None
    speedup: float | None = None
    speedup_ci95: Interval | None = None
    speedup_problem_median: float | None = None
    speedup_problem_p90: float | None = None
    losing_path_share: float | None = None
    speedup_correct: float | None = None
    speedup_wrong: float | None = None
    se: float | None = None
    variance_between: float | None = None
    variance_within: float | None = None
    required_k: int | None = None

    @staticmethod
    def key(field_name: str, k: int | str) -> str:
        """The JSON key of ``field_name`` at ``k`` (``pass_at_k_ci95`` → ``pass@16_ci95``)."""
        if field_name == "pass_at_k_ci95":
            return TaskMetrics.metric_key("pass_at_k", k) + "_ci95"
        return TaskMetrics.metric_key(field_name, k) if field_name in _METRIC_FIELDS else field_name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[self.key(f.name, self.k)] = _listed(value) if f.name in _INTERVALS else value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskCell:
        k = int(data["k"])
        values: dict[str, Any] = {f.name: data.get(cls.key(f.name, k)) for f in dataclasses.fields(cls)}
        values.update({name: _interval(values[name]) for name in _INTERVALS})
        return cls(**values)


_METRIC_FIELDS = {f.name for f in dataclasses.fields(TaskMetrics)}
_INTERVALS = ("ci95", "pass_at_k_ci95", "speedup_ci95")

#: The metrics averaged over tasks, as :class:`Averages` fields (``speedup``: None when a task has none).
AVERAGED = ("mean", "pass_at_k", "best_at_k_paper", "maj_at_k", "parallel_ratio", "speedup")


@dataclass(frozen=True)
class Averages:
    """The averaged metrics under one convention (JSON keys named at the run's k, or ``k``
    when its tasks differ in k: see :func:`analysis.leaderboard.board.k_label`). ``speedup`` is the
    average of the tasks' token-latency speedups; None when a task has none or they are in
    different units (documents written before it have none)."""

    mean: float
    pass_at_k: float
    best_at_k_paper: float
    maj_at_k: float
    parallel_ratio: float
    speedup: float | None = None

    def to_json(self, k: int | str) -> dict[str, Any]:
        return {TaskMetrics.metric_key(name, k): getattr(self, name) for name in AVERAGED}

    @classmethod
    def from_json(cls, data: dict[str, Any], k: int | str) -> Averages:
        values: dict[str, Any] = {name: data.get(TaskMetrics.metric_key(name, k)) for name in AVERAGED}
        return cls(**values)


@dataclass(frozen=True)
class RunAverage:
    """A run's averages over its tasks: both conventions, the chosen one also at the top level.

    JSON: ``convention``, ``k`` (None when tasks differ), ``n_tasks``, ``n_problems``, the chosen
    convention's six metrics (:data:`AVERAGED`), then ``task_mean`` and ``problem_weighted`` (six each)."""

    convention: str
    k: int | None
    n_tasks: int
    n_problems: int
    task_mean: Averages
    problem_weighted: Averages

    @property
    def label(self) -> int | str:
        """How K is written in the metric names: the number, or ``k`` for tasks of different k."""
        return "k" if self.k is None else self.k

    @property
    def chosen(self) -> Averages:
        return self.task_mean if self.convention == "task_mean" else self.problem_weighted

    def to_json(self) -> dict[str, Any]:
        return {"convention": self.convention, "k": self.k, "n_tasks": self.n_tasks, "n_problems": self.n_problems,
                **self.chosen.to_json(self.label), "task_mean": self.task_mean.to_json(self.label),
                "problem_weighted": self.problem_weighted.to_json(self.label)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunAverage:
        k = data.get("k")
        label: int | str = "k" if k is None else int(k)
        return cls(convention=data["convention"], k=k, n_tasks=data["n_tasks"], n_problems=data["n_problems"],
                   task_mean=Averages.from_json(data["task_mean"], label),
                   problem_weighted=Averages.from_json(data["problem_weighted"], label))


class RunRow(TypedDict):
    """One ranked run. ``tasks`` maps each task to a :class:`TaskCell`'s JSON, ``average`` is a
    :class:`RunAverage`'s; ``complete`` is false only for an incomplete run ranked on request;
    ``limited`` names the compared tasks a ``--limit`` run holds only the first problems of (ranked,
    marked ``⚠ --limit``: numbers for testing, not the benchmark's)."""

    name: str
    model: str | None
    family: str
    step: int | None
    decoding: str
    path: str
    k: int | None
    answer_policy: str
    complete: bool
    missing: list[str]
    limited: list[str]  # compared tasks cut short by --limit ("aime24: the first 4 of 30 problems (--limit 4)")
    tasks: dict[str, dict[str, Any]]
    average: dict[str, Any]
    rank: int
    tied_with_above: bool
    p_vs_above: float | None


class Comparison(TypedDict):
    """One run against the baseline on one task, on the problems both share."""

    run: str
    baseline: str
    task: str
    n_problems: int
    delta: float
    ci95: list[float] | None
    p_value: float
    p_holm: float
    test: str
    n_nonzero: int
    diff_sd: float | None  # sample SD (ddof 1) of the per-problem differences; None below 2 problems
    mde: float | None  # minimum detectable effect, 80 % power, two-sided 5 %: 2.80 · diff_sd / √n_problems; None where nothing is detectable (SD 0, or ≤ 5 problems)


class Excluded(TypedDict):
    """An incomplete run left out of the ranking."""

    name: str
    path: str
    complete: bool
    missing: list[str]
    advice: str


class LeaderboardDocument(TypedDict):
    """The ``leaderboard --json`` document."""

    schema_version: int
    runs: list[RunRow]
    comparisons: list[Comparison]
    excluded: list[Excluded]
    baseline: str
    answer_policy: str
    average_convention: str
    tasks: list[str]
    alpha: float
    ci95_bootstrap: dict[str, Any]
    maj_tie_rule: str
    notes: list[str]
    failures: list[dict[str, str]]
