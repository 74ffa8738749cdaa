"""The efficiency tables and figures on designed samples: known path lengths, known verdicts.

The frontier is checked against a brute-force O(n²) definition on random points with many ties
and missing values; speedups against numpy on the same columns; Mean@k against a hand count."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.efficiency.latency import (
    latency_points,
    pareto_frontier,
    problem_speedups,
    speedup,
    step_series,
    with_latency,
)


def brute_frontier(acc: list[float], lat: list[float]) -> list[bool]:
    """The definition, pair by pair: on it unless some point is at least as good on both and better on one."""
    def ok(i: int) -> bool:
        return not (np.isnan(acc[i]) or np.isnan(lat[i]))

    return [ok(i) and not any(ok(j) and acc[j] >= acc[i] and lat[j] <= lat[i] and (acc[j] > acc[i] or lat[j] < lat[i])
                              for j in range(len(acc)))
            for i in range(len(acc))]


@pytest.mark.parametrize("seed", range(40))
def test_frontier_equals_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(0, 30)
    acc = [float(rng.randrange(5)) / 4 if rng.random() > 0.1 else float("nan") for _ in range(n)]
    lat = [float(rng.randrange(6)) * 100 if rng.random() > 0.1 else float("nan") for _ in range(n)]
    assert pareto_frontier(acc, lat) == brute_frontier(acc, lat)


def test_frontier_on_a_designed_set() -> None:
    # (accuracy, latency): B beats A (faster, as accurate); C is the most accurate; D equals C; E is beaten by C
    acc = [0.5, 0.5, 0.9, 0.9, 0.8, 0.3]
    lat = [200, 100, 300, 300, 350, 50]
    assert pareto_frontier(acc, lat) == [False, True, True, True, False, True]
    with pytest.raises(ValueError, match="2 accuracies but 1 latencies"):
        pareto_frontier([0.1, 0.2], [1])


def _samples() -> pd.DataFrame:
    """Two runs of one task, two problems × 2 samples each; run b branches and answers sooner."""
    rows = []
    design = {  # run -> per sample (problem, response_length, critical_path, correct, has_parallel)
        "a": [("p1", 100, 100, True, False), ("p1", 120, 120, False, False),
              ("p2", 300, 300, True, False), ("p2", 280, 280, True, False)],
        "b": [("p1", 150, 90, True, True), ("p1", 110, 110, True, False),
              ("p2", 400, 200, False, True), ("p2", 500, None, None, True)],
    }
    for run, samples in design.items():
        for i, (problem, length, path, correct, parallel) in enumerate(samples):
            rows.append({"run": run, "task": "math", "problem_id": problem, "sample_idx": i, "response_length": length,
                         "critical_path": path, "correct": correct, "has_parallel": parallel, "position_unit": "token",
                         "model": f"/ckpt/{run}", "model_family": None, "step": {"a": 100, "b": 200}[run],
                         "decoding": "sequential", "run_path": f"/runs/{run}"})
    return pd.DataFrame(rows)


def test_per_problem_speedup_is_a_ratio_of_means() -> None:
    table = problem_speedups(_samples())
    b = table[table["run"] == "b"].set_index("problem_id")
    assert b.loc["p1", "speedup"] == pytest.approx((150 + 110) / (90 + 110))
    assert b.loc["p2", "speedup"] == pytest.approx(400 / 200) and b.loc["p2", "n"] == 1  # no path: left out
    assert (table[table["run"] == "a"]["speedup"] == 1.0).all()


def test_points_equal_numpy_and_a_hand_count() -> None:
    samples = _samples()
    points = latency_points(samples).set_index("run")
    held = with_latency(samples[samples["run"] == "b"])
    assert points.loc["b", "speedup"] == pytest.approx(np.mean(held["response_length"]) / np.mean(held["critical_path"]))
    assert points.loc["b", "speedup"] == pytest.approx(speedup([150, 110, 400], [90, 110, 200]))
    assert points.loc["b", "critical_path"] == pytest.approx(400 / 3) and points.loc["b", "n_latency"] == 3
    assert points.loc["b", "n_samples"] == 4 and points.loc["b", "parallel_ratio"] == 0.75
    assert points.loc["b", "accuracy"] == pytest.approx((1.0 + 0.0) / 2)  # p1: 2/2; p2: 0/1 scored
    assert points.loc["a", "accuracy"] == pytest.approx((0.5 + 1.0) / 2)
    assert points.loc["a", "run_path"] == "/runs/a" and points.loc["a", "unit"] == "token"


def test_step_series_keeps_a_family_that_is_none() -> None:
    series = step_series(_samples())
    assert list(series["step"]) == [100, 200] and series["model_family"].isna().all()
    assert list(series["accuracy"]) == pytest.approx([0.75, 0.5])


def test_frames_without_latency_give_empty_tables() -> None:
    old = _samples().drop(columns=["critical_path", "response_length"])
    assert problem_speedups(old).empty and latency_points(old).empty and step_series(old).empty
    assert speedup([], []) is None


def designed_sweep(seed: int = 0) -> pd.DataFrame:
    """Three checkpoints × two tasks of one family, 6 problems × 4 samples: later steps branch more,
    so their critical path falls below their length; accuracy rises then dips."""
    rng = random.Random(seed)
    rows = []
    for step, share, accuracy in ((100, 0.1, 0.4), (200, 0.5, 0.6), (300, 0.9, 0.55)):
        for task in ("aime24", "math500"):
            for p in range(6):
                for i in range(4):
                    parallel = rng.random() < share
                    length = rng.randrange(400, 1600)
                    rows.append({"run": f"step{step}", "task": task, "problem_id": f"p{p}", "sample_idx": i,
                                 "response_length": length,
                                 "critical_path": int(length / (1 + rng.random() * 1.5)) if parallel else length,
                                 "correct": rng.random() < accuracy, "has_parallel": parallel, "position_unit": "token",
                                 "model": f"/ckpt/job/global_step_{step}/hf", "model_family": "job", "step": step,
                                 "decoding": "forkjoin", "run_path": f"/runs/step{step}"})
    return pd.DataFrame(rows)


def test_the_pages_draw_the_tables(tmp_path: Path) -> None:
    from analysis.efficiency.figures import frontier_figure, speedup_histogram, training_figure
    from analysis.efficiency.latency import efficiency_tables
    from analysis.pipeline.figures import write_figures
    from analysis.summary import Analysis

    samples = designed_sweep()
    tables = efficiency_tables(samples)
    empty = pd.DataFrame()
    analysis = Analysis(runs=empty, blocks=empty, pairs=empty, responses=empty, drift_points=empty, drift_trends=empty,
                        efficiency=tables)
    written, _ = write_figures(analysis, tmp_path)
    assert sorted(p.name for p in written) == ["efficiency_steps.html", "latency_frontier.html", "speedup_hist.html"]
    assert "plotly_click" in (tmp_path / "latency_frontier.html").read_text()
    points = tables["points"]
    frontier = frontier_figure(points)
    assert frontier is not None
    for task in ("aime24", "math500"):
        (markers,) = [t for t in frontier.data if t.name == f"{task}: run × task"]
        mine = points[points["task"] == task]
        want = pareto_frontier(mine["accuracy"], mine["critical_path"])
        assert [s == "star" for s in markers.marker.symbol] == want
        assert list(markers.x) == list(mine["critical_path"]) and [c[1] for c in markers.customdata] == list(mine["run_path"])
    histogram = speedup_histogram(tables["problems"], points=points)
    assert histogram is not None and len(histogram.data) == 6  # one per run × task
    assert sorted(np.concatenate([t.x for t in histogram.data])) == sorted(tables["problems"]["speedup"])
    steps = training_figure(tables["steps"])
    assert steps is not None and len(steps.data) == 6  # three lines per task
    speed = [t for t in steps.data if t.name.startswith("speedup") and "aime24" in t.name][0]
    aime = samples[samples["task"] == "aime24"]
    want_speed = [aime[aime["step"] == s]["response_length"].mean() / aime[aime["step"] == s]["critical_path"].mean()
                  for s in (100, 200, 300)]
    assert list(speed.x) == [100, 200, 300] and list(speed.y) == pytest.approx(want_speed) and speed.yaxis == "y2"


def test_analyze_draws_the_stored_token_lengths_of_forkjoin_runs(tmp_path: Path) -> None:
    """The designed per-sample lengths (tokens) flow through analyze's points, problems and steps."""
    from analysis.runs.loader import load_runs
    from analysis.summary import ANALYSIS_COLUMNS, analyze
    from tests.support import efficiency_fixtures as fx

    runs = fx.build_forkjoin_runs(tmp_path / "runs")
    analysis = analyze(load_runs([str(p) for p in runs.values()], columns=ANALYSIS_COLUMNS), None)
    points = analysis.efficiency["points"].set_index("run")
    for step in fx.STEPS:
        lengths = [fx.length(p, s) for p in range(fx.PROBLEMS) for s in range(fx.K)]
        paths = [fx.critical(step, p, s) for p in range(fx.PROBLEMS) for s in range(fx.K)]
        mean = np.mean([np.mean([fx.right(step, p, s) for s in range(fx.K)]) for p in range(fx.PROBLEMS)])
        row = points.loc[fx.run_name(step)]
        assert row["speedup"] == pytest.approx(np.mean(lengths) / np.mean(paths))
        assert row["critical_path"] == pytest.approx(np.mean(paths)) and row["accuracy"] == pytest.approx(mean)
        assert row["unit"] == "token" and bool(row["complete"])
    assert pareto_frontier(points["accuracy"], points["critical_path"]) == [False, True]  # step 200 beats step 100
    problems = analysis.efficiency["problems"]
    f0 = problems[(problems["run"] == fx.run_name(100)) & (problems["problem_id"] == "f0")]["speedup"].item()
    assert f0 == pytest.approx((fx.length(0, 0) + fx.length(0, 1)) / (fx.critical(100, 0, 0) + fx.critical(100, 0, 1)))
    assert list(analysis.efficiency["steps"]["step"]) == list(fx.STEPS)


def test_a_sequential_runs_critical_path_tokens_are_not_taken_for_a_critical_path() -> None:
    from analysis.efficiency.latency import latency_samples

    frame = pd.DataFrame({"decoding": ["sequential", "forkjoin"], "critical_path_tokens": [50, 30],
                          "n_response_tokens": [50, 50], "position_unit": ["char", "char"]})
    out = latency_samples(frame)
    assert out["critical_path"].isna().tolist() == [True, False] and list(out["position_unit"]) == ["char", "token"]
    stored = frame.assign(critical_path=[40, 30], response_length=[50, 50])
    assert latency_samples(stored) is stored  # the stored columns win


def test_the_pages_keep_hostile_run_and_model_names_as_text(tmp_path: Path) -> None:
    from analysis.pipeline.figures import write_figures
    from analysis.runs.loader import load_runs
    from analysis.summary import analyze
    from tests.support import efficiency_fixtures as fx
    from tests.support.hostile_fixtures import MARKER, RUN_ATTACK, assert_inert_page, payload

    runs = fx.build_forkjoin_runs(tmp_path / "runs", prefix=f"fj {RUN_ATTACK}", model=f"/ck/{payload('model')}/step-*")
    written, _ = write_figures(analyze(load_runs([str(p) for p in runs.values()], tokenizer=None)), tmp_path / "out")
    pages = {p.name: p.read_text(encoding="utf-8") for p in written}
    for name in ("speedup_hist.html", "latency_frontier.html", "efficiency_steps.html"):
        assert_inert_page(pages[name], name)
        figures = pages[name].replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u002f", "/")
        assert f'<a href="https://{MARKER}' not in figures and "<img src=x" not in figures, name
    assert MARKER in pages["latency_frontier.html"]  # the names are there, as text


def test_a_frontier_never_compares_characters_with_tokens() -> None:
    from analysis.efficiency.figures import frontier_figure

    points = latency_points(_samples())
    points.loc[points["run"] == "a", "accuracy"] = 0.1  # slower and less accurate than b: beaten, in one unit
    assert frontier_figure(points) is not None and [list(t.marker.symbol) for t in frontier_figure(points).data
                                                    if t.mode.startswith("markers")] == [["circle", "star"]]
    points.loc[points["run"] == "a", "unit"] = "char"  # run a measured in characters: it cannot lose to b
    figure = frontier_figure(points)
    assert figure is not None
    stars = {t.name: list(t.marker.symbol) for t in figure.data if t.mode and t.mode.startswith("markers")}
    assert stars == {"math (characters): run × task": ["star"], "math (tokens): run × task": ["star"]}


def test_accuracy_counts_unscored_as_wrong_and_leaves_no_gold_problems_out_as_the_report_does() -> None:
    """By hand, as ``report``'s mean@k: p0 has 1 right of 2 (the timeout counts as wrong), p1 2 of 2,
    p2 has no gold and is left out: (1/2 + 2/2) / 2 = 0.75. The frame without ``grade_status``
    (an older projection) gives the same, p2 having no verdict at all."""
    from analysis.efficiency.latency import latency_points

    frame = pd.DataFrame({
        "run": "r", "task": "t", "problem_id": ["p0", "p0", "p1", "p1", "p2", "p2"],
        "correct": [True, None, True, True, None, None],
        "grade_status": ["ok", "timeout", "ok", "ok", "no_gold", "no_gold"],
        "critical_path": 10, "response_length": 12, "length_unit": "token"})
    assert latency_points(frame)["accuracy"].item() == pytest.approx(0.75)
    assert latency_points(frame.drop(columns="grade_status"))["accuracy"].item() == pytest.approx(0.75)
