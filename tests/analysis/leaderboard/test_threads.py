"""The leaderboard's two-thread map gives the results of a plain loop, in order, failures included."""

from __future__ import annotations

import threading
import time

import pytest

from analysis.leaderboard.board import _threaded


def test_results_come_in_the_order_of_the_items() -> None:
    def slow_first(i: int) -> tuple[int, str]:
        time.sleep(0.05 if i == 0 else 0.0)  # the first item finishes last
        return i * i, threading.current_thread().name

    results = _threaded(slow_first, range(6))
    assert [r for r, _ in results] == [0, 1, 4, 9, 16, 25]
    assert {name for _, name in results} <= {"pr1-leaderboard_0", "pr1-leaderboard_1"}


def test_the_first_failure_in_item_order_is_raised() -> None:
    def fail_on_odd(i: int) -> int:
        time.sleep(0.05 if i == 1 else 0.0)  # item 3 fails first in time, item 1 first in order
        if i % 2:
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 1"):
        _threaded(fail_on_odd, range(5))


def test_one_item_or_none_runs_inline() -> None:
    assert _threaded(lambda i: threading.current_thread() is threading.main_thread(), [0]) == [True]
    assert _threaded(lambda i: i, []) == []
