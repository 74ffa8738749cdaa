"""The leaderboard's faster routes give what the plain ones gave: each run's frame from one grouping
equals the frame a comparison of every row selects, and BLAS on one thread changes no number."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.leaderboard.board import _run_frames, one_blas_thread
from pr1_eval.stats.paired import sign_flip_test


def test_each_runs_frame_is_the_one_a_row_comparison_selects() -> None:
    samples = pd.DataFrame({"run": ["b", "a", "b", "c", "a", "b"], "task": list("xyzxyz"),
                            "correct": [True, False, True, True, False, False]}, index=[10, 11, 12, 13, 14, 15])
    samples = samples.iloc[1:]  # labels that are not positions
    names = ["b", "a", "c", "absent"]
    frames = _run_frames(samples, names)
    for name, frame in zip(names, frames, strict=True):
        pd.testing.assert_frame_equal(frame, samples[samples["run"] == name].copy())
    assert frames[3].empty and list(frames[3].columns) == list(samples.columns)
    frames[0].loc[frames[0].index[0], "correct"] = False  # a copy: the caller's frame is untouched
    assert bool(samples.loc[12, "correct"])


@pytest.mark.parametrize("size", [25, 500])
def test_a_sign_flip_test_gives_the_same_p_value_on_one_blas_thread(size: int) -> None:
    """Each sum is one row's dot product; a Monte Carlo test (more than 20 non-zero differences) on one
    BLAS thread counts what it counts on the default threads."""
    diffs = np.random.default_rng(size).integers(-16, 17, size) / 16
    default = sign_flip_test(diffs)
    with one_blas_thread():
        single = sign_flip_test(diffs)
    assert default.method == single.method == "monte_carlo"
    assert single.p_value == default.p_value
