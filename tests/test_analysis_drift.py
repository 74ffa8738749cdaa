"""Drift over training: Spearman against hand-computed ranks, exact p-values, grouping."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from analysis_fixtures import block, make_record, response, write_run

from analysis.drift import drift_json, drift_trends, exact_spearman_p, trend
from analysis.loader import load_runs
from analysis.summary import analyze, to_json


def test_rho_and_exact_p_by_hand() -> None:
    # ranks of y: 1, 3, 2, 4 -> d = 0, 1, -1, 0 -> rho = 1 - 6*2 / (4*15) = 0.8
    out = trend(pd.Series([100, 200, 300, 400]), pd.Series([0.1, 0.3, 0.2, 0.5]))
    assert out["spearman_rho"] == pytest.approx(0.8) and out["n_steps"] == 4
    # |rho| >= 0.8 for 4 of the 24 orderings on each side (identity + 3 adjacent swaps): 8/24
    assert out["p_value_exact"] == pytest.approx(1 / 3)
    # scipy's t approximation: t = rho * sqrt((n-2)/(1-rho^2)), two-sided with n-2 df
    from scipy.stats import t as student_t

    t_stat = 0.8 * math.sqrt(2 / (1 - 0.64))
    assert out["p_value"] == pytest.approx(2 * student_t.sf(t_stat, 2))


def test_too_few_steps_and_constant_series_are_null_with_a_note() -> None:
    two = trend(pd.Series([1, 2]), pd.Series([0.1, 0.2]))
    assert two["spearman_rho"] is None and two["p_value"] is None and two["n_steps"] == 2 and "at least 3" in two["note"]
    flat = trend(pd.Series([1, 2, 3]), pd.Series([0.5, 0.5, 0.5]))
    assert flat["spearman_rho"] is None and "same at every step" in flat["note"]
    gaps = trend(pd.Series([1, 2, 3, 4]), pd.Series([0.1, None, None, 0.4]))
    assert gaps["n_steps"] == 2 and gaps["spearman_rho"] is None


def test_exact_p_of_a_perfect_order() -> None:
    assert exact_spearman_p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(2 / 6)
    assert exact_spearman_p(list(range(9)), list(range(9))) is None


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
    assert document["drift"] == {"aime24": {"spearman_rho": pytest.approx(1.0), "p_value": pytest.approx(0.0),
                                            "n_steps": 4}}
    trends = analysis.drift_trends.set_index("metric")
    assert trends.loc["block_rel_pos", "p_value_exact"] == pytest.approx(2 / 24)
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
