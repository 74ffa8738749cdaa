"""A training step's summary against numbers worked out by hand."""

from __future__ import annotations

import pytest

from pr1_eval.records.sample import SampleRecord
from pr1_eval.records.step_summary import STEP_SUMMARY_KEYS
from pr1_eval.records.training import TrainingSection
from pr1_eval.report.step_summary import step_summary, stored_summary


def _sample(pid: str, idx: int, *, correct: bool, blocks: list[float], tokens: int, cut: bool = False,
            reward: float | None = None, graded: bool = True, reward_acc: bool | None = None) -> SampleRecord:
    return SampleRecord(task="train", problem_id=pid, sample_idx=idx, correct=correct if graded else None,
                        grade_status="ok" if graded else "ungraded", reward_acc=reward_acc, has_parallel=bool(blocks),
                        n_blocks=len(blocks), block_rel_starts=blocks, n_response_tokens=tokens,
                        finish_reason="length" if cut else "stop", reward=reward)


def test_a_step_of_two_groups_of_two() -> None:
    samples = [_sample("a", 0, correct=True, blocks=[0.2, 0.6], tokens=100, reward=1.0),
               _sample("a", 1, correct=False, blocks=[], tokens=300, cut=True, reward=0.0),
               _sample("b", 0, correct=False, blocks=[0.5], tokens=200, reward=0.2),
               _sample("b", 1, correct=False, blocks=[], tokens=400, reward=0.0)]
    s = step_summary(samples)
    assert list(s.to_json())[1:] == list(STEP_SUMMARY_KEYS)
    assert (s.n_samples, s.n_problems, s.k) == (4, 2, 2)
    assert s.reward_mean == pytest.approx(1.2 / 4)
    assert s.accuracy == pytest.approx(0.25)
    # best@2 per problem: a has 1 of 2 right, 1 − (1 − 1/2)^2 = 0.75; b none: 0; mean 0.375
    assert s.best_at_k == pytest.approx(0.375)
    assert s.parallel_ratio == pytest.approx(0.5)
    assert s.blocks_per_response == pytest.approx(3 / 4)
    assert s.first_block_rel_pos == pytest.approx((0.2 + 0.5) / 2)  # first block of each branching sample
    assert s.response_tokens_mean == pytest.approx(250)
    assert s.truncated_ratio == pytest.approx(0.25)
    assert stored_summary(TrainingSection(kind="train", step=1, summary=s)) == s


def test_stripped_tags_give_no_structure_and_one_sample_per_problem_no_best() -> None:
    s = step_summary([_sample("a", 0, correct=True, blocks=[], tokens=10)], tags_kept=False)
    assert s.parallel_ratio is None and s.blocks_per_response is None and s.first_block_rel_pos is None
    assert s.best_at_k is None and s.k == 1 and s.reward_mean is None
    assert stored_summary(TrainingSection(kind="train", step=1, summary=s)) == s and stored_summary(None) is None
    # a summary of another layout version is kept verbatim and not read as this one (readers recompute)
    other = TrainingSection.from_json({"kind": "train", "step": 1, "summary": {**s.to_json(), "version": 0}})
    assert other is not None and stored_summary(other) is None and other.extra["summary"]["version"] == 0
    assert other.to_json()["summary"] == {**s.to_json(), "version": 0}


def test_an_ungraded_step_reads_the_jobs_reward_accuracy() -> None:
    samples = [_sample("a", 0, correct=False, blocks=[], tokens=5, graded=False, reward_acc=True),
               _sample("a", 1, correct=False, blocks=[], tokens=5, graded=False, reward_acc=False),
               _sample("b", 0, correct=False, blocks=[], tokens=5, graded=False, reward_acc=None),
               _sample("b", 1, correct=False, blocks=[], tokens=5, graded=False, reward_acc=None)]
    s = step_summary(samples)
    assert s.accuracy == pytest.approx(0.5)  # b's samples know no verdict: left out, not counted wrong
    assert s.best_at_k == pytest.approx(0.75)  # a alone: 1 − (1 − 1/2)^2
    assert (s.n_problems, s.k) == (2, 2)
