"""One training step's numbers, computed once when its samples are written and kept in run.json.

Why a summary at write time: a training job has hundreds of steps of thousands of rollouts; the
Training page, the leaderboard of validation steps and the notebooks draw a curve point per
step, and reading every response of 300 steps to draw it would take minutes. The writer of a
step's run (``import-verl``, repro's rollout writer) already holds the step's samples, so it
calls :func:`step_summary` and stores the result as ``RunRecord.training.summary``; readers
take it from there and fall back to computing it from the samples (the same function) for a
run written without one.

Every value is over the step's samples as stored: a pooled share or mean over samples (every
problem of a training step holds its group of rollouts), ``best_at_k`` the mean over problems
of VERL's best@k with k = the step's samples per problem (None when that is 1). Structure
values are None when the dump lost the tags (``tags_kept`` False): a stripped response has no
blocks to count, and 0 would read as "the model stopped branching". Accuracy is the grader's
verdict (could-not-score counts as wrong, as in the report); for a sample left ungraded (an
import without grading) it is the job's own reward accuracy (``reward_acc``), and a sample with
neither is left out, so an ungraded step never reads as all wrong.

``critical_path_mean`` and ``speedup`` (mean response length / mean critical path,
:mod:`pr1_eval.report.efficiency`'s definition) are in ``length_unit``. Summaries stored before these
keys existed lack them, and readers show None there rather than re-reading every response of the
job; re-importing the job (or a new rollout writer) stores them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from pr1_eval.records.sample import SampleRecord
from pr1_eval.records.step_summary import STEP_SUMMARY_VERSION, StepSummary
from pr1_eval.records.training import TrainingSection
from pr1_eval.stats.metrics import best_at_k, parallel_ratio


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _verdict(record: SampleRecord) -> bool | None:
    """The grader's verdict; for an ungraded sample the job's reward accuracy (None: unknown); a
    sample the grader could not score (timeout, error) counts as wrong, as in the report."""
    if record.correct is not None:
        return bool(record.correct)
    if record.grade_status == "ungraded":
        return record.reward_acc
    return False


def step_summary(records: Iterable[SampleRecord], *, tags_kept: bool = True) -> StepSummary:
    """The summary of one step's samples (see the module docstring for each value)."""
    samples = list(records)
    groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
    sizes: dict[tuple[str, str], int] = defaultdict(int)
    for r in samples:
        sizes[(r.task, r.problem_id)] += 1
        verdict = _verdict(r)
        if verdict is not None:
            groups[(r.task, r.problem_id)].append(verdict)
    k = max(sizes.values(), default=0)
    rewards = [float(r.reward) for r in samples if r.reward is not None]
    tokens = [float(r.n_response_tokens) for r in samples if r.n_response_tokens is not None]
    firsts = [r.block_rel_starts[0] for r in samples if r.block_rel_starts]
    return StepSummary(
        version=STEP_SUMMARY_VERSION,
        n_samples=len(samples),
        n_problems=len(sizes),
        k=k,
        reward_mean=_mean(rewards),
        accuracy=_mean([float(v) for g in groups.values() for v in g]),
        best_at_k=(_mean([best_at_k(len(g), sum(g), len(g)) for g in groups.values() if g]) if k > 1 else None),
        parallel_ratio=parallel_ratio(sum(r.has_parallel for r in samples), len(samples))
        if tags_kept and samples else None,
        blocks_per_response=_mean([float(r.n_blocks) for r in samples]) if tags_kept else None,
        first_block_rel_pos=_mean(firsts) if tags_kept else None,
        response_tokens_mean=_mean(tokens),
        truncated_ratio=_mean([float(r.finish_reason == "length") for r in samples]),
        **_latency(samples, tags_kept),
    )


def _latency(samples: list[SampleRecord], tags_kept: bool) -> dict[str, Any]:
    """Mean critical path and token-latency speedup (mean length / mean critical path) over the samples
    with a length, in their one unit; None without tags, or when units differ (no mean over both)."""
    timed = [r for r in samples if r.critical_path is not None and r.response_length is not None]
    units = {r.length_unit for r in timed}
    critical = sum(int(r.critical_path or 0) for r in timed)
    if not tags_kept or not timed or len(units) != 1 or critical <= 0:
        return {"critical_path_mean": None, "speedup": None, "length_unit": "mixed" if len(units) > 1 else None}
    return {"critical_path_mean": critical / len(timed),
            "speedup": sum(int(r.response_length or 0) for r in timed) / critical, "length_unit": units.pop()}


def stored_summary(training: TrainingSection | None) -> StepSummary | None:
    """The summary a run.json's training section holds, when it has this version's layout (a
    summary of another version is kept out of :attr:`TrainingSection.summary` when read)."""
    return None if training is None else training.summary
