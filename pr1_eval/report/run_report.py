"""Per-task metrics from a run's samples: the numbers ``pr1-eval report`` prints.

Everything is computed from ``samples.parquet`` plus what ``run.json`` declares (each task's
problems and samples per problem), so anyone holding the two files can recompute a report.

:func:`run_report` returns ``{"k", "status", "complete", "incomplete", "advice", "shard",
"warnings", "maj_tie_rule", "tasks"}``: ``k`` is the samples per problem when every task has the same, else None;
``status`` is run.json's; ``complete`` is False when the status is not ``complete``, the run is a
lone shard, or any task is incomplete; ``incomplete`` lists one human line per problem found;
``shard`` is ``"shard i/n of N problems"`` for a lone shard (else None); ``warnings`` names
differences from a packaged benchmark that do not make the run incomplete; ``maj_tie_rule`` is
:data:`pr1_eval.report.metrics.MAJ_TIE_RULE`, the sentence the table prints too. ``tasks`` maps each task (run.json order,
declared tasks without any sample included) to a dict with these keys, ``K`` being that task's k:

- ``complete`` (bool), ``k``, ``n_problems`` (problems scored), ``n_problems_expected`` (declared;
  None when unknown), ``n_samples`` (stored), ``missing_problems`` (declared ids without a
  sample), ``n_missing_problems``, ``short_problems`` ({id: samples held} below K),
  ``undeclared_problems``, ``part_of`` (a shard's slice or a packaged benchmark's subset:
  ``{"kind", "label", "held", "total"}``; None for a whole task), ``incomplete_reason`` (one
  line; None when complete);
- metrics, **only when complete** — ``mean@K``, ``pass@1``, ``pass@K`` (unbiased), ``best@K``
  (VERL's bootstrap best@K, 1 − (1 − c/n)^K, on math-verify verdicts), ``maj@K``,
  ``mean@K_paper`` and ``best@K_paper`` (the same on the paper's string checker: the fully
  paper-compatible pair), ``parallel_ratio``, ``format_ok_ratio``, ``mean_response_tokens``,
  ``truncated_ratio``, ``no_answer_ratio``, ``n_unscored`` (timeout/error: counted as wrong),
  ``ci95`` ({metric: [low, high]}, percentile bootstrap over problems; None below 2 problems),
  ``ci95_bootstrap`` (how: {method, resampled, n_resamples, seed, confidence}; problems are
  resampled in problem-id order, so the order of rows in the files never moves an interval),
  ``engine_calls_per_sample``, ``tokens_per_sample``, ``critical_path_tokens_per_sample``;
- ``partial`` — for an incomplete task, the same metric keys over its problems that do hold K
  samples (None when none does). A consumer that reads only top-level metric keys therefore
  never averages a subset by accident.

Decision: ``pass@K_paper`` and ``mean_paper`` were renamed (``best@K``, ``mean@K_paper``) and not
kept as aliases: the old ``pass@K_paper`` applied the paper's estimator to math-verify verdicts,
so keeping the name would keep the confusion it caused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SCORED_STATUSES
from pr1_eval.report.completeness import TaskCompleteness, check_completeness
from pr1_eval.report.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    MAJ_TIE_RULE,
    best_at_k,
    bootstrap_ci,
    bootstrap_settings,
    majority_correct,
    pass_at_k,
)

#: Metrics with a bootstrap interval (per-problem means).
CI_METRICS = ("mean@{k}", "pass@{k}", "best@{k}", "maj@{k}", "mean@{k}_paper", "best@{k}_paper")


def _verdicts(column: pd.Series) -> list[bool]:
    """None/NaN (could not score) counts as not correct."""
    return [bool(x) if x is not None and not pd.isna(x) else False for x in column]


def _problem_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per problem, in problem-id order (so intervals do not depend on row order): n samples,
    c correct (math-verify), c_paper (paper's checker), majority verdict."""
    rows = []
    for pid, group in frame.groupby(frame["problem_id"].astype(str), sort=True):
        group = group.sort_values("sample_idx")
        correct = _verdicts(group["correct"])
        classes = [None if pd.isna(c) else int(c) for c in group["answer_class"]]
        rows.append({"problem_id": str(pid), "n": len(group), "c": int(sum(correct)),
                     "c_paper": int(sum(_verdicts(group["correct_paper"]))), "maj": majority_correct(classes, correct)})
    return pd.DataFrame(rows, columns=["problem_id", "n", "c", "c_paper", "maj"])


def _forkjoin_stats(frame: pd.DataFrame) -> dict[str, float | None]:
    """Mean engine calls, generated tokens and critical-path tokens per sample."""
    def mean_of(column: str) -> float | None:
        values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
        return float(values.mean()) if len(values) else None

    return {
        "engine_calls_per_sample": mean_of("engine_calls"),
        "tokens_per_sample": mean_of("n_response_tokens"),
        "critical_path_tokens_per_sample": mean_of("critical_path_tokens"),
    }


def metrics_of(frame: pd.DataFrame, k: int) -> dict[str, Any]:
    """The metrics of samples in which every problem holds at least ``k`` samples."""
    problems = _problem_table(frame)
    per_problem: dict[str, list[float]] = {
        f"mean@{k}": [c / n for n, c in zip(problems["n"], problems["c"], strict=True)],
        "pass@1": [pass_at_k(n, c, 1) for n, c in zip(problems["n"], problems["c"], strict=True)],
        f"pass@{k}": [pass_at_k(n, c, k) for n, c in zip(problems["n"], problems["c"], strict=True)],
        f"best@{k}": [best_at_k(n, c, k) for n, c in zip(problems["n"], problems["c"], strict=True)],
        f"maj@{k}": [float(m) for m in problems["maj"]],
        f"mean@{k}_paper": [c / n for n, c in zip(problems["n"], problems["c_paper"], strict=True)],
        f"best@{k}_paper": [best_at_k(n, c, k) for n, c in zip(problems["n"], problems["c_paper"], strict=True)],
    }
    tokens = frame["n_response_tokens"].dropna()
    result: dict[str, Any] = {name: float(np.mean(values)) for name, values in per_problem.items()}
    result.update({
        "parallel_ratio": float(frame["has_parallel"].astype(bool).mean()),
        "format_ok_ratio": float(frame["format_ok"].astype(bool).mean()),
        "mean_response_tokens": float(tokens.mean()) if len(tokens) else None,
        "truncated_ratio": float((frame["finish_reason"] == "length").mean()),
        "no_answer_ratio": float((frame["grade_status"] == "no_answer").mean()),
        "n_unscored": int((~frame["grade_status"].isin(SCORED_STATUSES)).sum()),
        "ci95": {name.format(k=k): _ci(per_problem[name.format(k=k)]) for name in CI_METRICS},
        "ci95_bootstrap": bootstrap_settings(BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
    })
    result.update(_forkjoin_stats(frame))
    return result


def _ci(values: list[float]) -> list[float] | None:
    interval = bootstrap_ci(values, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    return None if interval is None else [interval[0], interval[1]]


def task_metrics(frame: pd.DataFrame, check: TaskCompleteness) -> dict[str, Any]:
    """One task's report entry (see the module docstring for its keys)."""
    held = frame.groupby("problem_id", sort=False).size() if len(frame) else pd.Series(dtype=int)
    full = [str(pid) for pid, n in held.items() if n >= check.k]
    result: dict[str, Any] = {
        "complete": check.complete,
        "k": check.k,
        "n_problems": len(full),
        "n_problems_expected": check.n_problems_expected,
        "n_samples": int(len(frame)),
        "missing_problems": check.missing_problems,
        "n_missing_problems": check.n_missing_problems,
        "short_problems": check.short_problems,
        "undeclared_problems": check.undeclared_problems,
        "part_of": None if check.part_of is None else {"kind": check.part_of.kind, "label": check.part_of.label,
                                                       "held": check.part_of.held, "total": check.part_of.total},
        "incomplete_reason": None if check.complete else check.describe(),
    }
    if check.k < 1:
        result["partial"] = None
        return result
    scored = frame[frame["problem_id"].astype(str).isin(full)] if full else frame.iloc[0:0]
    metrics = metrics_of(scored, check.k) if full else None
    if check.complete and metrics is not None:
        result.update(metrics)
    else:
        result["partial"] = metrics
    return result


def run_report(frame: pd.DataFrame, k: int | None = None, *, run: RunRecord | None = None) -> dict[str, Any]:
    """The report of a run's samples (see the module docstring).

    With ``run`` (the run's record) every task is checked against the problems and k it declares; without it,
    against ``k`` (else the most samples any problem holds) over the problems present.
    """
    completeness = check_completeness(run, frame, k)
    tasks: dict[str, Any] = {}
    for name, check in completeness.tasks.items():
        group = frame[frame["task"].astype(str) == name] if len(frame) else frame
        tasks[name] = task_metrics(group, check)
    ks = {m["k"] for m in tasks.values()}
    return {"k": ks.pop() if len(ks) == 1 else None, "status": completeness.status, "complete": completeness.complete,
            "incomplete": completeness.problems(), "advice": None if completeness.complete else completeness.advice(),
            "shard": completeness.shard_label(), "warnings": completeness.warnings(), "maj_tie_rule": MAJ_TIE_RULE,
            "tasks": tasks}


# ----- the terminal table -------------------------------------------------------------------
_COLUMNS = ("task", "k", "problems", "samples", "mean@k [95% CI]", "pass@k [95% CI]", "best@k", "maj@k",
            "mean@k_paper", "best@k_paper", "parallel", "format_ok", "tokens", "unscored")


def _with_ci(m: dict[str, Any], name: str) -> str:
    interval = (m.get("ci95") or {}).get(name)
    return f"{m[name]:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def _row(task: str, m: dict[str, Any]) -> list[str]:
    """One table row; an incomplete task shows its partial numbers, marked with ``*``."""
    k = m["k"]
    values = m if m["complete"] else m.get("partial")
    expected = m["n_problems_expected"]
    if m.get("part_of"):  # a shard's slice or a benchmark's subset: out of the whole task
        expected = m["part_of"]["total"]
    problems = f"{m['n_problems']}" if m["complete"] or expected is None else f"{m['n_problems']}/{expected}"
    cells = [task if m["complete"] else f"{task}*", str(k), problems, str(m["n_samples"])]
    if not values:
        return cells + ["-"] * (len(_COLUMNS) - len(cells))
    tokens = values["mean_response_tokens"]
    return cells + [
        _with_ci(values, f"mean@{k}"), _with_ci(values, f"pass@{k}"), f"{values[f'best@{k}']:.3f}",
        f"{values[f'maj@{k}']:.3f}", f"{values[f'mean@{k}_paper']:.3f}", f"{values[f'best@{k}_paper']:.3f}",
        f"{values['parallel_ratio']:.3f}", f"{values['format_ok_ratio']:.3f}",
        "-" if tokens is None else str(round(tokens)), str(values["n_unscored"]),
    ]


def interval_note(n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> str:
    """How the intervals are computed, in the words a table footer prints."""
    return f"percentile bootstrap over problems (sorted by id), {n_resamples:,} resamples, seed {seed}"


def format_report_table(report: dict[str, Any]) -> str:
    """A fixed-width summary table (one line per task), then one line per incompleteness.

    Headers name K when every task has the same (``mean@16``), else read ``mean@k`` with k in
    its own column."""
    k = report.get("k")
    head = [c.replace("@k", f"@{k}") for c in _COLUMNS] if k else list(_COLUMNS)  # one k: name it
    rows = [head] + [_row(task, m) for task, m in report["tasks"].items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    lines += ["", f"95% CI: {interval_note()}.", f"{report.get('maj_tie_rule') or MAJ_TIE_RULE}."]
    if report.get("incomplete"):
        lines.append("")
        starred = any(not m["complete"] for m in report["tasks"].values())
        lines.append("INCOMPLETE" + (" — numbers marked * cover only the problems that hold all k samples:" if starred else ":"))
        lines += [f"  {line}" for line in report["incomplete"]]
        lines.append(f"  to finish: {report['advice']}")
    if report.get("warnings"):
        lines.append("")
        lines.append("WARNINGS (named, not counted as incomplete):")
        lines += [f"  {line}" for line in report["warnings"]]
    return "\n".join(lines)
