"""Run labels and the leaderboard's column split (dashboards/fit.py) against hand-written names and rows."""

from __future__ import annotations

import math

import pandas as pd

from dashboards.fit import LATENCY, MAX_LABEL, RANKING, length_unit, relabel, short_run_names, split_leaderboard

ROOT = "/mnt/shared/checkpoints/parallel-r1/experiments/seen-qwen3-4b-lr1e-6"


def test_the_path_all_runs_share_is_left_out_start_and_end() -> None:
    names = [f"{ROOT}/step{s}/actor-sequential-k4-seed0" for s in (100, 200)]
    assert short_run_names(names) == {names[0]: "…/step100/…", names[1]: "…/step200/…"}


def test_plain_names_stay_and_paths_among_them_are_shortened_together() -> None:
    names = ["step100", "hostile", f"{ROOT}/a/run", f"{ROOT}/b/run"]
    assert short_run_names(names) == {"step100": "step100", "hostile": "hostile",
                                      names[2]: "…/a/…", names[3]: "…/b/…"}


def test_only_a_shared_leading_slash_is_not_worth_removing() -> None:
    names = ["/x/a/runs/step-1", "/y/b/runs/step-1"]
    assert short_run_names(names) == {names[0]: "/x/a/…", names[1]: "/y/b/…"}


def test_a_long_lone_path_keeps_its_end_and_a_long_name_its_start_and_end() -> None:
    path = "/very/long/absolute/path/to/some/checkpoint/folder/global_step_200-sequential-k16-seed0"
    label = short_run_names([path])[path]
    assert len(label) == MAX_LABEL and label == "…" + path[-(MAX_LABEL - 1):]
    name = "global_step_200-sequential-k16-seed0-with-a-very-long-suffix-1"
    label = short_run_names([name])[name]
    assert len(label) == MAX_LABEL and label == name[:13] + "…" + name[-26:]


def test_a_cut_that_would_make_two_labels_equal_is_not_made() -> None:
    names = [f"{'x' * 30}-first-{'y' * 30}", f"{'x' * 30}-other-{'y' * 30}"]
    labels = short_run_names(names)
    assert labels == {name: name for name in names}  # cut, both read 'xxxxxxxxxxxxx…yyyy…': kept whole


def test_labels_are_unique_for_many_sibling_paths() -> None:
    names = [f"{ROOT}/job{j}/global_step_{s}/actor" for j in (1, 2) for s in range(100, 1100, 100)]
    labels = short_run_names(names)
    assert len(set(labels.values())) == len(names) and labels[names[0]] == "…/job1/global_step_100/…"


def test_relabel_replaces_run_and_baseline_only() -> None:
    frame = pd.DataFrame({"run": ["a/x", "b"], "baseline": ["b", "a/x"], "task": ["a/x", "b"]})
    out = relabel(frame, {"a/x": "X"})
    assert out.to_dict("list") == {"run": ["X", "b"], "baseline": ["b", "X"], "task": ["a/x", "b"]}


def leaderboard(with_latency: bool) -> pd.DataFrame:
    row = {"rank": 1, "run": "r", "step": 100, "task": "aime24", "complete": "yes", "k": 4, "n_problems": 30,
           "mean@K": 0.5, "ci95": [0.4, 0.6], "pass@K": 0.8, "best@K_paper": 0.7, "maj@K": 0.5,
           "parallel_ratio": 0.9, "n_samples": 120, "pass@1": 0.5, "first_block_rel_pos": 0.1,
           "response_length_per_sample": 255.0 if with_latency else math.nan,
           "speedup": 1.2 if with_latency else None, "speedup_ci95": [1.1, 1.3] if with_latency else None,
           "tied with above": ""}
    return pd.DataFrame([row, {**row, "task": "average", "pass@1": math.nan}])


def test_the_split_keeps_every_column_once_beside_the_keys() -> None:
    rows = leaderboard(with_latency=True)
    ranking, latency, other = split_leaderboard(rows, "tokens")
    keys = ["rank", "run", "step", "task", "complete"]
    assert list(ranking.columns) == [c for c in RANKING if c in rows]
    assert list(latency.columns) == [*keys, "response length (tokens)", "speedup", "speedup ci95"]
    assert list(other.columns) == [*keys, "n_samples", "pass@1", "first_block_rel_pos"]
    shown = set(ranking.columns) | set(latency.columns) | set(other.columns)
    assert shown == {*rows.columns, "response length (tokens)", "speedup ci95"} - {
        "response_length_per_sample", "speedup_ci95"}
    assert latency["speedup"].tolist() == [1.2, 1.2] and len(ranking) == len(latency) == len(other) == 2


def test_no_latency_table_when_no_cell_has_one() -> None:
    _, latency, _ = split_leaderboard(leaderboard(with_latency=False))
    assert latency.empty and len(latency.columns) == 0
    assert set(LATENCY) & set(split_leaderboard(leaderboard(with_latency=False))[2].columns) == set()


def test_length_unit_is_named_only_when_every_cell_says_one() -> None:
    def document(*units: str | None) -> dict[str, object]:
        return {"runs": [{"tasks": {"t": {"length_unit": u, "critical_path_per_sample": 1.0}}} for u in units]}
    assert length_unit(document("token", "token")) == "tokens"
    assert length_unit(document("char")) == "characters"
    assert length_unit(document("token", "char")) is None and length_unit(document(None)) is None
