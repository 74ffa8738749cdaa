"""Drift over training: Spearman and its exact p-value against a brute-force enumeration in the test, grouping."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from analysis.runs.loader import load_runs
from analysis.structure.drift import drift_json, drift_trends, metric_trend, trend
from analysis.summary import analyze, to_json
from pr1_eval.stats.spearman import exact_spearman_p
from tests.support.analysis_fixtures import block, make_record, response, write_run


def _enumerated_p(x: list[float], y: list[float]) -> float:
    """The exact two-sided p by brute force, independently of the code under test: scipy's ρ for
    every one of the n! orderings of ``y`` (ties included, each ordering counted once)."""
    observed = abs(spearmanr(x, y).statistic)
    rhos = [abs(spearmanr(x, list(order)).statistic) for order in itertools.permutations(y)]
    return sum(r >= observed - 1e-9 for r in rhos) / math.factorial(len(y))


CASES = [
    ([1, 2, 3], [0.1, 0.2, 0.3]),  # perfect rise over 3: 2 of 6 orderings as extreme -> 1/3
    ([1, 2, 3], [0.3, 0.2, 0.1]),  # perfect fall
    ([100, 200, 300, 400], [0.1, 0.2, 0.3, 0.4]),  # perfect over 4: 2 of 24 -> 1/12
    ([10, 20, 30, 40, 50], [0.05, 0.1, 0.2, 0.4, 0.8]),  # perfect over 5: 2 of 120 -> 1/60
    ([1, 2, 3, 4], [0.1, 0.2, 0.2, 0.4]),  # a tie in the values
    ([1, 2, 3, 4, 5], [0.3, 0.3, 0.1, 0.3, 0.5]),  # three tied values
    ([5, 10, 15, 20, 25], [0.5, 0.5, 0.7, 0.7, 0.9]),  # two ties
    ([1, 2, 3, 4, 5], [0.42, 0.17, 0.93, 0.61, 0.38]),  # a noisy series (no clear trend)
]


@pytest.mark.parametrize(("steps", "values"), CASES)
def test_p_value_is_the_exact_permutation_p_by_enumeration(steps: list[float], values: list[float]) -> None:
    out = trend(pd.Series(steps), pd.Series(values))
    assert out["spearman_rho"] == pytest.approx(spearmanr(steps, values).statistic)
    assert out["p_value"] == pytest.approx(_enumerated_p(steps, values), abs=1e-12)
    assert out["p_method"] == f"exact permutation (n! = {math.factorial(len(steps))})"
    assert exact_spearman_p(steps, values) == out["p_value"]


def test_perfect_trends_have_the_textbook_exact_p() -> None:
    # a perfect order is matched only by itself and its reverse: p = 2 / n!
    for n, expected in [(3, 1 / 3), (4, 1 / 12), (5, 1 / 60)]:
        out = trend(pd.Series(range(n)), pd.Series([i * i for i in range(n)]))
        assert out["spearman_rho"] == pytest.approx(1.0) and out["p_value"] == pytest.approx(expected)
    # scipy's t approximation says 0.0 here, which is why the exact p-value is computed instead
    assert spearmanr([1, 2, 3], [1, 2, 3]).pvalue == pytest.approx(0.0)


def test_a_random_case_by_enumeration() -> None:
    rng = np.random.default_rng(7)
    steps = sorted(rng.choice(1000, size=6, replace=False).tolist())
    values = rng.integers(0, 4, size=6).astype(float).tolist()  # few distinct values: ties likely
    out = trend(pd.Series(steps), pd.Series(values))
    assert out["p_value"] == pytest.approx(_enumerated_p(steps, values), abs=1e-12)
    assert out["p_method"] == "exact permutation (n! = 720)"


def test_many_steps_use_scipys_t_approximation_and_say_so() -> None:
    steps = list(range(12))
    values = [0.1, 0.3, 0.2, 0.5, 0.4, 0.6, 0.55, 0.7, 0.9, 0.8, 1.0, 0.95]
    out = trend(pd.Series(steps), pd.Series(values))
    assert out["p_value"] == pytest.approx(spearmanr(steps, values).pvalue)
    assert out["p_method"] == "t-approximation (n = 12)"
    assert exact_spearman_p(list(range(9)), list(range(9))) is None  # 9! is beyond the enumeration


def test_too_few_steps_and_constant_series_are_null_with_a_note() -> None:
    two = trend(pd.Series([1, 2]), pd.Series([0.1, 0.2]))
    assert two["spearman_rho"] is None and two["p_value"] is None and two["n_steps"] == 2 and "at least 3" in two["note"]
    assert two["p_method"] is None
    flat = trend(pd.Series([1, 2, 3]), pd.Series([0.5, 0.5, 0.5]))
    assert flat["spearman_rho"] is None and "same at every step" in flat["note"]
    gaps = trend(pd.Series([1, 2, 3, 4]), pd.Series([0.1, None, None, 0.4]))
    assert gaps["n_steps"] == 2 and gaps["spearman_rho"] is None


def _run_at(root: Path, step: int, prefix_words: int, family: str = "exp") -> None:
    """Two responses whose block sits after ``prefix_words`` words of preamble."""
    intro = " ".join(["w"] * prefix_words)
    records = [make_record("aime24", f"p{i}", 0, response(intro, block(["a", "b"]), "done"), correct=bool(i))
               for i in range(2)]
    write_run(root, f"{family}-{step}", records, model=f"/ck/{family}/global_step_{step}/hf")


def test_block_position_drift_end_to_end(tmp_path: Path) -> None:
    for step, words in [(100, 5), (200, 40), (300, 80), (400, 160)]:
        _run_at(tmp_path, step, words)
    write_run(tmp_path, "no-step", [make_record("aime24", "p0", 0, response("x"))])
    analysis = analyze(load_runs(tmp_path, tokenizer=None))
    points = analysis.drift_points
    assert list(points["step"]) == [100, 200, 300, 400]
    assert points["block_rel_pos"].is_monotonic_increasing
    document = to_json(analysis)
    assert document["drift"] == {"aime24": {"spearman_rho": pytest.approx(1.0), "p_value": pytest.approx(2 / 24),
                                            "p_method": "exact permutation (n! = 24)", "n_steps": 4,
                                            "position_unit": "char"}}
    trends = analysis.drift_trends.set_index("metric")
    assert trends.loc["block_rel_pos", "p_value"] == pytest.approx(2 / 24)
    assert trends.loc["parallel_ratio", "spearman_rho"] is None or pd.isna(trends.loc["parallel_ratio", "spearman_rho"])
    assert any("no-step" in n and "no checkpoint step" in n for n in document["notes"])


def test_families_are_never_mixed(tmp_path: Path) -> None:
    for step, words in [(1, 5), (2, 10), (3, 20)]:
        _run_at(tmp_path, step, words, family="up")
        _run_at(tmp_path, step, 60 - words, family="down")
    trends = drift_trends(analyze(load_runs(tmp_path, tokenizer=None)).drift_points)
    position = trends[trends["metric"] == "block_rel_pos"].set_index("model_family")["spearman_rho"]
    assert position["/ck/up/global_step_*/hf"] == pytest.approx(1.0)
    assert position["/ck/down/global_step_*/hf"] == pytest.approx(-1.0)
    keys = set(drift_json(trends))
    assert keys == {"aime24 [/ck/down/global_step_*/hf, forkjoin]", "aime24 [/ck/up/global_step_*/hf, forkjoin]"}


def test_no_steps_means_no_drift_key(tmp_path: Path) -> None:
    write_run(tmp_path, "plain", [make_record("aime24", "p0", 0, response("x"))])
    document = to_json(analyze(load_runs(tmp_path, tokenizer=None)))
    assert "drift" not in document and document["runs"][0]["step"] is None


def test_steps_in_different_position_units_give_no_trend_and_say_why(tmp_path: Path) -> None:
    for step, words, tokens in [(1, 5, True), (2, 40, False), (3, 80, True)]:
        intro = " ".join(["w"] * words)
        records = [make_record("aime24", f"p{i}", 0, response(intro, block(["a", "b"]), "done"), tokens=tokens)
                   for i in range(2)]
        write_run(tmp_path, f"mix-{step}", records, model=f"/ck/mix/global_step_{step}/hf")
    analysis = analyze(load_runs(tmp_path, tokenizer=None))
    assert list(analysis.drift_points["position_unit"]) == ["token", "char", "token"]
    trends = analysis.drift_trends.set_index("metric")
    for metric in ("block_rel_pos", "first_block_rel_pos"):
        assert trends.loc[metric, "spearman_rho"] is None and trends.loc[metric, "p_value"] is None
        assert "tokens at step(s) 1, 3" in trends.loc[metric, "note"]
        assert "characters at step(s) 2" in trends.loc[metric, "note"]
    assert trends.loc["parallel_ratio", "note"] is None or "units" not in str(trends.loc["parallel_ratio", "note"])
    document = to_json(analysis)
    assert document["drift"]["aime24"]["p_value"] is None
    assert any("different units" in n for n in document["notes"])


def test_metric_trend_what_the_training_page_calls_keeps_units_apart() -> None:
    points = pd.DataFrame({"step": [100, 200, 300, 400], "first_block_rel_pos": [0.1, 0.2, 0.3, 0.4],
                           "parallel_ratio": [0.5, 0.6, 0.7, 0.9], "position_unit": ["token", "token", "char", "token"]})
    mixed = metric_trend(points, "first_block_rel_pos")
    assert mixed["spearman_rho"] is None and mixed["p_value"] is None and "characters at step(s) 300" in mixed["note"]
    ratio = metric_trend(points, "parallel_ratio")  # not a position: units do not matter
    assert ratio["p_value"] == pytest.approx(2 / 24) and ratio["position_unit"] is None
    one = metric_trend(points.assign(position_unit="token"), "first_block_rel_pos")
    assert one["p_value"] == pytest.approx(2 / 24) and one["position_unit"] == "token"


def test_a_trend_without_a_note_prints_no_nan_note() -> None:
    """A note column pandas filled with NaN (a missing note) printed `drift / block_rel_pos: nan`."""
    import numpy as np
    import pandas as pd

    from analysis.summary import drift_notes

    trends = pd.DataFrame({"task": ["aime24", "amc23", "gsm8k"], "metric": ["block_rel_pos"] * 3,
                           "note": [np.nan, "2 step(s) with a value; a trend needs at least 3", None]})
    assert drift_notes(trends) == ["drift amc23 / block_rel_pos: 2 step(s) with a value; a trend needs at least 3"]
