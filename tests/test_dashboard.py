"""Every dashboard page through Streamlit's test harness on fixture runs imported like users import
theirs: the numbers shown equal those of the analysis API (and of ``report``), computed here
independently, the sidebar filters change what is shown, deep links reopen a trace, and hostile
responses only ever reach elements that show text literally."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from dashboard_fixtures import HOSTILE_RUN, IMG, SCRIPT, build_runs
from streamlit.testing.v1 import AppTest

from analysis.diversity import diversity
from analysis.leaderboard import build_leaderboard
from analysis.loader import load_runs, response_segments
from analysis.roles import assign_roles, role_shares
from analysis.stats import structure_stats
from dashboards.components import fmt, fmt_interval, md_unescape
from dashboards.data import MEMO
from dashboards.launch import app_path
from pr1_eval.cli.commands import load_report
from pr1_eval.store.run_store import RunStore

STEP_RUNS = ("step100", "step200", "step300")
PAGES = {"leaderboard": "Leaderboard", "training": "Training dynamics", "behaviour": "Behaviour",
         "diversity": "Diversity and roles", "trace_viewer": "Trace viewer", "compare": "Compare two runs"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("dashboard")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR1_LOADER_CACHE", str(root / "cache"))
        yield build_runs(root)
    MEMO.clear()


def open_app(monkeypatch: pytest.MonkeyPatch, paths: list[Path], page: str | None = None,
             params: dict[str, str] | None = None) -> AppTest:
    """The app on ``paths`` (as after ``--``), on ``page``, with no uncaught exception."""
    monkeypatch.setattr(sys, "argv", ["app.py", *map(str, paths)])
    app = AppTest.from_file(str(app_path()), default_timeout=180).run()
    if page is not None:
        app.query_params.update(params or {})
        app.switch_page(f"views/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def shown_table(app: AppTest, index: int = 0) -> pd.DataFrame:
    """A text table as a reader sees it (cells un-escaped)."""
    return app.table[index].value.map(md_unescape)


def row(frame: pd.DataFrame, **where: Any) -> pd.Series:
    match = frame
    for column, value in where.items():
        match = match[match[column] == value]
    assert len(match) == 1, (where, frame)
    return match.iloc[0]


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    app = open_app(monkeypatch, [runs[name] for name in runs], page)
    assert [t.value for t in app.title] == [PAGES[page]]


def test_leaderboard_shows_the_leaderboard_and_report_numbers(runs: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [runs[name] for name in STEP_RUNS]
    app = open_app(monkeypatch, paths)
    assert not app.warning
    table = shown_table(app)
    document = build_leaderboard(paths)
    for run in document["runs"]:
        k = run["k"]
        for task, cell in run["tasks"].items():
            shown = row(table, run=run["name"], task=task)
            assert shown["rank"] == str(run["rank"])
            assert shown["mean@K"] == fmt(cell[f"mean@{k}"]) and shown["ci95"] == fmt_interval(cell["ci95"])
            assert shown["pass@K"] == fmt(cell[f"pass@{k}"]) and shown["maj@K"] == fmt(cell[f"maj@{k}"])
            assert shown["parallel_ratio"] == fmt(cell["parallel_ratio"])
            report = load_report(runs[run["name"]])["tasks"][task]  # what `report --json` prints
            assert shown["mean@K"] == fmt(report[f"mean@{k}"]) and shown["n_problems"] == str(report["n_problems"])
    comparisons = shown_table(app, 1)
    assert len(comparisons) == len(document["comparisons"]) > 0
    first = document["comparisons"][0]
    assert row(comparisons, run=first["run"], task=first["task"])["Δ mean@K"] == fmt(first["delta"])


def test_leaderboard_falls_back_to_each_runs_report(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(runs.values()))
    assert "not comparable" in md_unescape(app.warning[0].value)
    table = shown_table(app)
    for name, path in runs.items():
        for task, metrics in load_report(path)["tasks"].items():
            k = metrics["k"]
            shown = row(table, run=name, task=task)
            assert shown["mean@K"] == fmt(metrics[f"mean@{k}"]) and shown["pass@K"] == fmt(metrics[f"pass@{k}"])
            assert shown["k"] == str(k)


def test_sidebar_filters_change_what_is_shown(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, [runs[name] for name in STEP_RUNS])
    assert set(shown_table(app)["run"]) == set(STEP_RUNS)
    app.multiselect(key="filter_runs").set_value(["step100", "step300"]).run()
    assert set(shown_table(app)["run"]) == {"step100", "step300"}
    app.multiselect(key="filter_tasks").set_value(["amc23"]).run()
    assert set(shown_table(app)["task"]) == {"amc23", "average"}


def test_training_dynamics_equal_stats_report_and_trend(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [runs[name] for name in STEP_RUNS]
    app = open_app(monkeypatch, paths, "training")
    trends, values = shown_table(app, 0), shown_table(app, 1)
    samples = load_runs(paths, tokenizer=None).samples
    stats = structure_stats(samples, by=["task", "step"])
    for name in STEP_RUNS:
        step = int(name.removeprefix("step"))
        for task, metrics in load_report(runs[name])["tasks"].items():
            shown = row(values, task=task, step=str(step))
            assert shown["mean@K"] == fmt(metrics[f"mean@{metrics['k']}"])
            assert shown["parallel_ratio"] == fmt(row(stats, task=task, step=step)["parallel_ratio"])
    # the fixtures make 1, 2, then 3 of 4 samples right: mean@4 rises strictly with step
    assert [row(values, task="aime24", step=str(s))["mean@K"] for s in (100, 200, 300)] == ["0.2500", "0.5000", "0.7500"]
    assert row(trends, task="aime24", metric="mean@K")["spearman ρ"] == "1.0000"
    assert row(trends, task="aime24", metric="mean@K")["p"] == fmt(2 / 6)  # exact: 2 of 3! orderings as extreme
    assert len(app.get("plotly_chart")) == 6


def test_behaviour_equals_structure_stats_and_counts_format_failures(runs: dict[str, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(runs.values()), "behaviour")
    accuracy, table, failures = shown_table(app, 0), shown_table(app, 1), shown_table(app, 2)
    stats = structure_stats(load_runs(list(runs.values()), tokenizer=None).samples, by=["run", "task"])
    for record in stats.to_dict("records"):
        shown = row(table, run=record["run"], task=record["task"])
        for column in ("parallel_ratio", "blocks_per_response", "first_block_rel_pos", "block_rel_pos"):
            assert shown[column] == fmt(record[column])
        shown = row(accuracy, run=record["run"], task=record["task"])
        assert (shown["accuracy_with_block"], shown["n_samples"]) == (fmt(record["accuracy_with_block"]),
                                                                      str(record["n_samples"]))
    # one hostile response (h1, sample 0) opens a block with a single path; 1 of its run's 4 responses
    assert failures.to_dict("records") == [{"run": HOSTILE_RUN, "kind": "block N has N path(s), needs at least N",
                                            "responses": "1", "share of run": "0.2500"}]
    app.multiselect(key="filter_runs").set_value(list(STEP_RUNS)).run()
    assert len(app.table) == 2 and "passes the strict format check" in app.success[0].value


def test_diversity_and_roles_equal_the_analysis_api(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(runs.values()), "diversity")
    table = shown_table(app)
    blocks = assign_roles(load_runs(list(runs.values()), tokenizer=None).blocks)
    pairs = diversity(blocks, None)
    bleu = pairs.groupby(["run", "task"])["bleu"].mean()
    shares = role_shares(blocks, by=["run", "task"])
    for record in shares.to_dict("records"):
        shown = row(table, run=record["run"], task=record["task"])
        assert shown["bleu_mean"] == fmt(bleu[(record["run"], record["task"])])
        assert shown["share_exploration"] == fmt(record["share_exploration"])
        assert shown["n_blocks_roles"] == str(record["n_blocks_roles"])
    links = app.get("page_link")
    assert len(links) == 10
    best = pairs.sort_values("bleu", ascending=False, kind="stable").iloc[0]
    assert links[0].proto.query_string == (f"run={best.run}&task={best.task}&problem={best.problem_id}"
                                           f"&sample={best.sample_idx}")


def test_trace_viewer_deep_link_shows_hostile_text_literally(runs: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    link = {"run": HOSTILE_RUN, "task": "aime24", "problem": "h0", "sample": "0"}
    app = open_app(monkeypatch, list(runs.values()), "trace_viewer", link)
    assert (app.selectbox(key="tv_run").value, app.selectbox(key="tv_problem").value,
            app.selectbox(key="tv_sample").value) == (HOSTILE_RUN, "h0", 0)
    response = RunStore(runs[HOSTILE_RUN]).read_frame().set_index(["problem_id", "sample_idx"]).loc[("h0", 0), "response"]
    segments = response_segments(response)
    texts = [t.value for t in app.text]
    assert segments[0].text in texts and SCRIPT in segments[0].text  # the main line, markup and all
    block = next(s for s in segments if s.kind == "block")
    assert all(path in texts for path in block.paths) and block.summary in texts
    assert any(IMG in path for path in block.paths)
    for element in [*app.markdown, *app.caption, *app.success, *app.error, *app.warning]:
        assert "<script" not in element.value and "<img" not in element.value
    assert dict(app.query_params) == link


def test_trace_viewer_filters_and_steps(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, [runs["step100"]], "trace_viewer")
    samples = load_runs([runs["step100"]], tokenizer=None).samples
    aime = samples[samples["task"] == "aime24"]
    assert f"{len(aime)} trace(s) match" in app.sidebar.caption[-1].value
    app.multiselect(key="tv_outcomes").set_value(["correct"]).run()
    correct = aime[aime["correct"] == True]  # noqa: E712 - nullable booleans
    assert f"{len(correct)} trace(s) match" in app.sidebar.caption[-1].value
    first = correct.sort_values(["problem_id", "sample_idx"]).iloc[0]
    assert (app.selectbox(key="tv_problem").value, app.selectbox(key="tv_sample").value) == (
        first["problem_id"], int(first["sample_idx"]))
    app.multiselect(key="tv_outcomes").set_value(["correct", "wrong"]).run()
    app.radio(key="tv_has_block").set_value("no").run()
    no_block = aime[aime["n_blocks"] == 0]
    assert f"{len(no_block)} trace(s) match" in app.sidebar.caption[-1].value
    app.radio(key="tv_has_block").set_value("any").run()
    before = app.selectbox(key="tv_sample").value
    app.button(key="tv_next").click().run()
    assert app.selectbox(key="tv_sample").value == before + 1


def test_a_link_to_an_unknown_run_opens_nothing(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, [runs["step100"]], "trace_viewer", {"run": "/etc", "task": "x", "problem": "p", "sample": "0"})
    assert "not loaded" in app.warning[0].value
    assert app.selectbox(key="tv_run").value == "step100"


def test_compare_lists_the_flipped_problems(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, [runs[name] for name in STEP_RUNS], "compare")
    assert (app.selectbox(key="cmp_a").value, app.selectbox(key="cmp_b").value) == ("step100", "step300")
    # step 100: 1 of 4 samples right per problem, step 300: 3 of 4; by majority every problem flips
    assert [h.value for h in app.subheader][:2] == ["wrong → right: 4 problem(s)", "right → wrong: 0 problem(s)"]
    links = [link.proto.query_string for link in app.get("page_link")]
    assert len(links) == 8 and links[0].startswith("run=step100&task=aime24&problem=p0&sample=")
    app.radio(key="cmp_criterion").set_value("any").run()
    assert [h.value for h in app.subheader][:2] == ["wrong → right: 0 problem(s)", "right → wrong: 0 problem(s)"]


def test_a_run_that_changes_is_reloaded(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    run = Path(shutil.copytree(runs["step100"], tmp_path / "growing"))
    app = open_app(monkeypatch, [run], "behaviour")
    before = int(row(shown_table(app), task="aime24")["n_samples"])
    store = RunStore(run)
    extra = store.read_records()[0]
    extra.problem_id, extra.sample_idx = "new", 0
    store.append([extra])
    app.run()
    assert int(row(shown_table(app), task="aime24")["n_samples"]) == before + 1


def test_no_run_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    app = open_app(monkeypatch, [tmp_path])
    assert "No run could be loaded" in app.error[0].value
