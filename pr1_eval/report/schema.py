"""The report as types: :class:`RunReport` holds one :class:`TaskReport` per task, which holds
its :class:`TaskMetrics` (complete tasks) or its partial ones (incomplete tasks).

Why types: the report is read by the CLI table, ``--json``, the sweep, the leaderboard, the
dashboard, the notebooks and the lm-eval tasks. When it was a dict whose keys carried k
(``mean@16``), each reader rebuilt the keys by hand; now readers take fields (``metrics.mean``,
``metrics.best_at_k_paper``) and only :meth:`RunReport.to_json` writes names, through
:func:`pr1_eval.stats.names.metric_name`. Every field carries its documentation
(``field.metadata["doc"]``, as :mod:`pr1_eval.records.sample` does), and :func:`json_schema`
turns those into the description of ``pr1-eval report --json``.

The JSON form (``to_json``) is the ``report --json`` document. Version 1 of this schema
(:data:`REPORT_SCHEMA_VERSION`) was not written into it, so files written before the types existed
still read the same. Version 2 (the answer policy per run; the token-latency keys per task:
``critical_path_per_sample`` … ``speedup_wrong``) keeps every version-1 key in its place, adds the
new ones after them and writes ``schema_version`` as the document's last key, so a reader tells the
two apart (no ``schema_version``: version 1). Version 3 adds two keys after version 2's in each task's
numbers: ``variance`` (:class:`MeanVariance`: the between/within split of Var(mean@K), its standard
error and required k) and ``at`` (:class:`AtK`: pass@K, best@K, maj@K at the Ks ``report --at`` asks
for); nothing else moved. A further change of the shape raises the version.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pr1_eval.stats.metrics import PER_PROBLEM_METRICS
from pr1_eval.stats.names import metric_name

if TYPE_CHECKING:  # an annotation only: the completeness check brings pandas, which readers of the schema
    # (the lm-eval hooks, imported once per task by lm-eval) need not load
    from pr1_eval.report.completeness import PartOf

#: Version of the shape :meth:`RunReport.to_json` writes (its last key; see the module docstring).
REPORT_SCHEMA_VERSION = 3


def _doc(text: str, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING, *,
         kind: str | None = None, checker: str | None = None, at: int | None = None) -> Any:
    """A field with its documentation; a metric field also names its ``kind``, ``checker`` and
    fixed k (``at``; None: the task's k), from which its JSON name is made."""
    metadata = {"doc": text, "kind": kind, "checker": checker, "at": at}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=metadata)
    if default is not dataclasses.MISSING:
        return field(default=default, metadata=metadata)
    return field(metadata=metadata)


Interval = tuple[float, float]


@dataclass(frozen=True)
class MeanVariance:
    """Where Mean@K's uncertainty comes from (:mod:`pr1_eval.stats.variance`): which problems the
    task holds (between) and the Bernoulli noise of its K samples per problem (within)."""

    between_problem: float = _doc("Var(p) over problems: the spread of the true solve rates, unbiased "
                                  "(sample variance of c/n minus the mean of (c/n)(1 − c/n)/(n − 1)); may be < 0.")
    within_problem: float = _doc("E[p(1 − p)]: one sample's Bernoulli variance, averaged over problems "
                                 "(mean of (c/n)(1 − c/n)·n/(n − 1)).")
    between: float = _doc("between_problem / P: the between-problem part of Var(mean@K).")
    within: float = _doc("within_problem / (K·P): the within-problem (sampling) part of Var(mean@K).")
    total: float = _doc("between + within: the estimated Var(mean@K), the sample variance of c/n over P.")
    se: float = _doc("√total: the standard error of mean@K over problems.")
    within_share: float | None = _doc("within / total; None when total is 0.")
    required_k: int | None = _doc(
        "Smallest k at which within(k) = within_problem/(k·P) is at most required_k_share of Var(mean@k): more "
        "samples per problem then narrow the interval by at most 1 − √(1 − share) (5 % at 10 %). None when "
        "between_problem ≤ 0 (no spread detected: every sample still narrows the interval).")
    required_k_share: float = _doc("The within-problem share required_k allows (0.10).")
    required_k_reason: str | None = _doc("Why required_k is what it is (1 on a task whose every problem's samples "
                                         "agree; None when between_problem ≤ 0), in words.", None)
    ci95_these_problems: Interval | None = _doc(
        "95% interval of mean@K whose estimand is these problems (only the samples random): mean ± 1.96·√within. "
        "The task's ci95 (bootstrap over problems) is the one for problems like these.", None)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MeanVariance | None:
        if data is None:
            return None
        values: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        if values.get("ci95_these_problems") is not None:
            values["ci95_these_problems"] = (float(values["ci95_these_problems"][0]),
                                             float(values["ci95_these_problems"][1]))
        return cls(**values)


@dataclass(frozen=True)
class AtK:
    """pass@K, best@K and maj@K at one K ≤ the task's samples per problem (``report --at``;
    :mod:`pr1_eval.stats.at_k`). JSON keys are the metric names at that K (``pass@4``)."""

    k: int = _doc("The K these numbers are at (≤ the task's k).")
    pass_at_k: float = _doc("pass@K: the unbiased Pass@K from the task's n samples, 1 − C(n−c, K)/C(n, K).",
                            kind="pass")
    best_at_k: float = _doc("best@K: 1 − (1 − c/n)^K.", kind="best")
    maj_at_k: float = _doc("maj@K: mean over every K-subset of a problem's samples of that subset's majority verdict "
                           "(tie rule: maj_tie_rule), averaged over problems; at K = k the task's maj@K.", kind="maj")
    mean_se: float | None = _doc(
        "Predicted standard error of mean@K had each problem K samples: √((between_problem + within_problem/K)/P); "
        "mean@K itself is estimated by the task's mean (c/n has the same expectation at any K).", None)
    ci95: dict[str, Interval | None] = _doc(
        "95% interval of pass@K, best@K and maj@K (keyed by name): the report's bootstrap over problems.", factory=dict)

    FIELDS: ClassVar[tuple[str, ...]] = ("pass_at_k", "best_at_k", "maj_at_k")

    def to_json(self) -> dict[str, Any]:
        names = {m: TaskMetrics.metric_key(m, self.k) for m in self.FIELDS}
        return {"k": self.k, **{names[m]: getattr(self, m) for m in self.FIELDS}, "mean_se": self.mean_se,
                "ci95": {names[m]: None if v is None else [v[0], v[1]] for m, v in self.ci95.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AtK:
        k = int(data["k"])
        names = {TaskMetrics.metric_key(m, k): m for m in cls.FIELDS}
        return cls(k=k, **{m: data[key] for key, m in names.items()}, mean_se=data.get("mean_se"),
                   ci95={names[key]: None if v is None else (float(v[0]), float(v[1]))
                         for key, v in (data.get("ci95") or {}).items() if key in names})


@dataclass(frozen=True)
class TaskMetrics:
    """The numbers of one task over problems that each hold k samples (a mean over problems
    unless the field says otherwise)."""

    k: int = _doc("Samples per problem every number is over (K in the metric names; the task's k).")
    mean: float = _doc("mean@K: Mean@K, the mean over problems of c/n on math-verify verdicts.", kind="mean")
    pass_at_1: float = _doc("pass@1: the unbiased Pass@1 (equals mean@K; its own column as lm-eval has it).",
                            kind="pass", at=1)
    pass_at_k: float = _doc("pass@K: the unbiased Pass@K, 1 − C(n−c, K)/C(n, K).", kind="pass")
    best_at_k: float = _doc("best@K: VERL's bootstrap best@K, 1 − (1 − c/n)^K, on math-verify verdicts.",
                            kind="best")
    maj_at_k: float = _doc("maj@K: share of problems whose most frequent answer is correct (ties: maj_tie_rule).",
                           kind="maj")
    mean_paper: float = _doc("mean@K_paper: mean@K on the paper's string checker (the paper's Mean@16).",
                             kind="mean", checker="paper")
    best_at_k_paper: float = _doc("best@K_paper: best@K on the paper's string checker (the paper's Pass@16).",
                                  kind="best", checker="paper")
    parallel_ratio: float | None = _doc("Share of samples with at least one <Parallel> block (over samples); null "
                                        "when not measurable (the tags were stripped: structure_note says why).")
    format_ok_ratio: float | None = _doc("Share of samples passing the strict format check; null when not "
                                         "measurable (as parallel_ratio).")
    mean_response_tokens: float | None = _doc("Mean response length in tokens; None when no sample counts them.")
    truncated_ratio: float = _doc("Share of samples cut by the token budget (finish_reason 'length').")
    no_answer_ratio: float = _doc("Share of samples with no extracted answer (grade_status 'no_answer').")
    n_unscored: int = _doc("Samples that could not be graded (timeout/error): counted as wrong.")
    ci95: dict[str, Interval | None] = _doc(
        "95% interval of each per-problem metric (keyed by its name), percentile bootstrap over problems; "
        "None below 2 problems.", factory=dict)
    ci95_bootstrap: dict[str, Any] = _doc(
        "How the intervals were computed: method, what is resampled (problems, in problem-id order, so the order "
        "of rows in the files never moves an interval), n_resamples, seed, confidence.", factory=dict)
    engine_calls_per_sample: float | None = _doc("Mean engine calls per sample (fork-join > 1); None: not recorded.",
                                                 None)
    tokens_per_sample: float | None = _doc("Mean generated tokens per sample; None: not recorded.", None)
    critical_path_tokens_per_sample: float | None = _doc(
        "Mean critical-path tokens per sample as fork-join decoding measured them (main line + longest path + "
        "summary per block); None: not recorded. critical_path_per_sample is the same from the parse, for every run.",
        None)
    # token latency (pr1_eval.report.efficiency): over the same samples as the accuracy figures
    response_length_per_sample: float | None = _doc(
        "Mean response length per sample in length_unit (samples with text); None: no length.", None)
    critical_path_per_sample: float | None = _doc(
        "Mean critical path per sample in length_unit: main line + each block's longest path with its tags + join "
        "+ summary, from the parsed text (what an engine running sibling paths side by side waits for).", None)
    length_unit: str | None = _doc(
        "'token' or 'char': the unit of the lengths; 'mixed' (and no length figures) when the samples disagree.",
        None)
    speedup: float | None = _doc(
        "Token-latency speedup: mean response length / mean critical path (ratio of means); 1.0 without blocks.",
        None)
    speedup_ci95: Interval | None = _doc(
        "95% interval of speedup: percentile bootstrap over problems (ci95_bootstrap's resamples and seed), the "
        "ratio of each resample's summed lengths; None below 2 problems.", None)
    speedup_problem_median: float | None = _doc(
        "Median over problems of each problem's speedup (its samples' summed length / summed critical path).", None)
    speedup_problem_p90: float | None = _doc("90th percentile over problems of the per-problem speedup.", None)
    losing_path_share: float | None = _doc(
        "Share of all length spent in sibling paths shorter than their block's longest (what parallel decoding "
        "writes but nobody waits for).", None)
    speedup_correct: float | None = _doc("Speedup over the correct samples only (ratio of means); None: none.", None)
    speedup_wrong: float | None = _doc(
        "Speedup over the wrong samples only (could-not-score counts as wrong); None: none.", None)
    variance: MeanVariance | None = _doc(
        "Var(mean@K) split into between-problem and within-problem parts, its standard error and required_k "
        "(keys: MeanVariance); None below 2 problems or 2 samples per problem.", None)
    at: list[AtK] = _doc("pass@K, best@K and maj@K at each K the report was asked for (report --at) that is ≤ k, "
                         "ascending (keys: AtK); empty when none was asked.", factory=list)

    #: The metrics with a bootstrap interval (the per-problem ones but pass@1), in ``ci95`` order.
    CI_FIELDS: ClassVar[tuple[str, ...]] = tuple(m for m in PER_PROBLEM_METRICS if m != "pass_at_1")

    @classmethod
    def metric_key(cls, name: str, k: int | str) -> str:
        """The JSON name of metric field ``name`` at ``k`` (``"best_at_k_paper", 16`` → ``best@16_paper``);
        a field that is not a metric keeps its own name."""
        meta = _FIELDS[name].metadata
        if meta["kind"] is None:
            return name
        return metric_name(meta["kind"], meta["at"] or k, checker=meta["checker"])

    def name(self, field_name: str) -> str:
        """The JSON name of ``field_name`` at this task's k."""
        return self.metric_key(field_name, self.k)

    def interval(self, field_name: str) -> Interval | None:
        """The 95% interval of a metric field (None when it has none)."""
        return self.ci95.get(field_name)

    def to_json(self) -> dict[str, Any]:
        """The metric keys of a task's ``report --json`` entry (``k`` is the task's own key)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "k":
                continue
            value = getattr(self, f.name)
            if f.name == "ci95":
                value = {self.name(m): None if v is None else [v[0], v[1]] for m, v in value.items()}
            elif f.name == "variance":
                value = None if value is None else value.to_json()
            elif f.name == "at":
                value = [entry.to_json() for entry in value]
            out[self.name(f.name)] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], k: int) -> TaskMetrics:
        """Read :meth:`to_json`'s keys back (e.g. from a ``report --json`` file)."""
        values: dict[str, Any] = {"k": k}
        for f in dataclasses.fields(cls):
            key = cls.metric_key(f.name, k)
            if f.name != "k" and key in data:
                values[f.name] = data[key]
        names = {cls.metric_key(m, k): m for m in cls.CI_FIELDS}
        if values.get("speedup_ci95") is not None:
            values["speedup_ci95"] = (float(values["speedup_ci95"][0]), float(values["speedup_ci95"][1]))
        values["ci95"] = {names[key]: None if v is None else (float(v[0]), float(v[1]))
                          for key, v in (data.get("ci95") or {}).items() if key in names}
        values["variance"] = MeanVariance.from_json(data.get("variance"))
        values["at"] = [AtK.from_json(entry) for entry in data.get("at") or []]
        return cls(**values)


_FIELDS = {f.name: f for f in dataclasses.fields(TaskMetrics)}


@dataclass(frozen=True)
class TaskReport:
    """One task's completeness against run.json, and its numbers: ``metrics`` only when the task is
    complete, ``partial`` (over the problems holding all k samples) when it is not. A reader of
    ``metrics`` alone therefore never averages a subset by accident."""

    complete: bool = _doc("Every declared problem holds k samples and nothing undeclared is stored.")
    k: int = _doc("Samples per problem of this task (run.json's task k, else the run's).")
    n_problems: int = _doc("Problems scored: those holding at least k samples.")
    n_problems_expected: int | None = _doc("Problems run.json declares; None when unknown.")
    n_samples: int = _doc("Samples stored for the task.")
    missing_problems: list[str] = _doc("Declared problem ids without a sample.", factory=list)
    n_missing_problems: int = _doc("How many declared problems have no sample (counted when ids are unknown).", 0)
    short_problems: dict[str, int] = _doc("Problem id → samples held, for problems below k.", factory=dict)
    undeclared_problems: list[str] = _doc("Stored problem ids run.json does not declare.", factory=list)
    part_of: PartOf | None = _doc(
        "The task is part of a larger problem set (a shard's slice, a packaged benchmark's subset): "
        "{kind, label, held, total}; None for a whole task.", None)
    incomplete_reason: str | None = _doc("One line saying what is missing; None when complete.", None)
    metrics: TaskMetrics | None = _doc("The numbers, only when complete (written at the task's top level).", None)
    partial: TaskMetrics | None = _doc(
        "For an incomplete task, the same numbers over its problems that hold k samples (None when none does).",
        None)

    @property
    def metrics_or_partial(self) -> TaskMetrics | None:
        """What a table shows: the numbers of a complete task, else its partial ones (marked there)."""
        return self.metrics if self.metrics is not None else self.partial

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("metrics", "partial"):
                continue
            value = getattr(self, f.name)
            if f.name == "part_of" and value is not None:
                value = {"kind": value.kind, "label": value.label, "held": value.held, "total": value.total}
            out[f.name] = value
        if self.metrics is not None:
            out.update(self.metrics.to_json())
        else:
            out["partial"] = None if self.partial is None else self.partial.to_json()
        return out


@dataclass(frozen=True)
class RunReport:
    """The report of a run: completeness of the whole, then one :class:`TaskReport` per task
    (run.json order; declared tasks without any sample included)."""

    k: int | None = _doc("Samples per problem when every task has the same, else None.")
    status: str | None = _doc("run.json's status.")
    complete: bool = _doc("The status is 'complete', the run is no lone shard, and every task is complete.")
    incomplete: list[str] = _doc("One human line per problem found (empty when complete).", factory=list)
    advice: str | None = _doc("How to finish the run; None when complete.", None)
    shard: str | None = _doc("'shard i/n of N problems' for a lone shard of a --shard run; else None.", None)
    warnings: list[str] = _doc("Differences from a packaged benchmark that do not make the run incomplete.",
                               factory=list)
    limit: int | None = _doc("run.json's limit (--limit N: only the first N problems of each task), else None.", None)
    limited: list[str] = _doc(
        "One line per task cut short by --limit ('aime24: the first 4 of 30 problems (--limit 4)'): numbers for "
        "testing, not the benchmark's (empty when none is).", factory=list)
    maj_tie_rule: str = _doc("How maj@K breaks ties (pr1_eval.stats.metrics.MAJ_TIE_RULE).", "")
    structure_note: str | None = _doc(
        "Why parallel_ratio and format_ok_ratio are null (a VERL 0.9.1 dump, whose tags were stripped); None "
        "when they are measured.", None)
    tasks: dict[str, TaskReport] = _doc("Task name → its report.", factory=dict)
    run: str | None = _doc("The run folder, when the report was loaded from one.", None)
    model: dict[str, Any] | None = _doc("run.json's model section, when loaded from a folder.", None)
    answer_policy: str | None = _doc(
        "The answer policy the verdicts were made under ('paper' or 'lenient', pr1_eval.grading.policy; run.json's, "
        "'paper' for runs that record none); only when the report has the run's record. Numbers under different "
        "policies are not comparable.", None)
    adaptive_note: str | None = _doc(
        "An adaptive run (run --adaptive): its stopping rule, how many problems stopped before k and the samples "
        "drawn, and how the metrics treat problems with fewer than k samples; absent for a fixed-k run.", None)

    def to_json(self) -> dict[str, Any]:
        """The ``pr1-eval report --json`` document (``run``, ``model`` and ``answer_policy`` only when
        loaded from a folder, ``adaptive_note`` only for an adaptive run)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("run", "model", "answer_policy", "adaptive_note") and value is None:
                continue
            out[f.name] = {name: task.to_json() for name, task in value.items()} if f.name == "tasks" else value
        out["schema_version"] = REPORT_SCHEMA_VERSION
        return out


def json_schema() -> dict[str, Any]:
    """The ``report --json`` keys with their documentation, K standing for the task's k: the
    schema as the types declare it (``tasks`` → ``TASK`` → task keys, then metric keys)."""
    def docs(cls: type, k: int | str = "K") -> dict[str, str]:
        return {(cls.metric_key(f.name, k) if cls is TaskMetrics else f.name): f.metadata["doc"]
                for f in dataclasses.fields(cls) if f.name != "k" or cls is not TaskMetrics}

    task = {key: doc for key, doc in docs(TaskReport).items() if key not in ("metrics", "partial")}
    metrics = docs(TaskMetrics)
    at = {(f.name if f.metadata["kind"] is None else metric_name(f.metadata["kind"], "K")): f.metadata["doc"]
          for f in dataclasses.fields(AtK)}
    return {"schema_version": REPORT_SCHEMA_VERSION,
            "run": {**{key: doc for key, doc in docs(RunReport).items() if key != "tasks"},
                    "schema_version": "Version of this document's shape (the last key; absent: version 1, written "
                                      "before the answer policy and the token-latency keys; 2: before variance "
                                      "and at)."},
            "task": task, "metrics": metrics, "variance": docs(MeanVariance), "at": at,
            "partial": {f.name: f for f in dataclasses.fields(TaskReport)}["partial"].metadata["doc"]}
