"""The leaderboard's per-task structure statistics from the run's columns converted once, against
:func:`analysis.structure.branching.branching_stats` one task at a time (the mixed run of the batched-report test:
shuffled rows, tasks of different k, a task whose positions are in two units)."""

from __future__ import annotations

from analysis.leaderboard.board import branching_by_task
from analysis.structure.branching import branching_stats
from pr1_eval.report.task_arrays import task_rows
from tests.support.batched_fixtures import mixed_frame


def test_branching_by_task_equals_one_task_at_a_time() -> None:
    frame = mixed_frame(2)
    frame = frame.set_index(frame.index * 3 + 7)  # positions, not labels, pick the rows
    batched = branching_by_task(frame, task_rows(frame))
    assert list(batched) == list(dict.fromkeys(frame["task"]))
    for task, stats in batched.items():
        assert stats == branching_stats(frame[frame["task"] == task]), task
    assert batched["beta"]["position_unit"] == "mixed" and batched["alpha"]["position_unit"] == "token"
    assert 0 < batched["alpha"]["parallel_ratio"] < 1 and batched["alpha"]["first_block_rel_pos"] is not None


def test_task_rows_keep_frame_order_within_each_task() -> None:
    frame = mixed_frame(4)
    rows = task_rows(frame)
    for task, at in rows.items():
        assert at.tolist() == [i for i, t in enumerate(frame["task"]) if t == task]
    assert sum(len(at) for at in rows.values()) == len(frame)
