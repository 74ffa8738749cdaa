"""Every dashboard page through Streamlit's test harness on fixture runs imported like users import
theirs: the numbers shown equal values derived here from the fixtures' design by hand (sample i of
problem p is right when (p + i) % 4 < step / 100, so every problem holds step / 100 of 4 right) or
by a second method on the raw rows (regular expressions over the responses, sacrebleu directly),
never by the functions the pages call. The sidebar filters change what is shown, deep links reopen
a trace, hostile responses only ever reach elements that show text literally, and a killed run is
marked on every page and kept out of trends and the ranking unless the sidebar toggle lets it in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sacrebleu.metrics import BLEU

from analysis.common.completeness import INCLUDE_LABEL, MARK
from analysis.runs.loader import load_runs
from analysis.runs.trace import response_segments
from dashboards.components import fmt, fmt_interval, md_unescape
from dashboards.data import MEMO
from pr1_eval.store.run_store import RunStore
from tests.support.app_harness import open_app, row, shown_table
from tests.support.dashboard_fixtures import (
    HOSTILE_RUN,
    IMG,
    KILLED_PROBLEMS,
    KILLED_RUN,
    KILLED_STEP,
    SCRIPT,
    STEPS,
    TASKS,
    build_killed_run,
    build_runs,
    hostile_rows,
    step_rows,
    write_import,
)

STEP_RUNS = ("step100", "step200", "step300")
K = 4
PATH = re.compile(r"<Path>(.*?)</Path>", re.DOTALL)
BLOCK = re.compile(r"<Parallel>(.*?)</Parallel>", re.DOTALL)
PAGES = {"leaderboard": "Leaderboard", "training": "Training dynamics", "behaviour": "Behaviour",
         "diversity": "Diversity and roles", "trace_viewer": "Trace viewer", "compare": "Compare two runs",
         "efficiency": "Efficiency"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("dashboard")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR1_LOADER_CACHE", str(root / "cache"))
        yield build_runs(root)
    MEMO.clear()


@pytest.fixture(scope="module")
def killed(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_killed_run(tmp_path_factory.mktemp("killed"))


def raw_rows() -> dict[str, list[dict[str, Any]]]:
    """The rows each fixture run was imported from (the second method reads these, not the store)."""
    return {**{f"step{s}": step_rows(s) for s in STEPS}, HOSTILE_RUN: hostile_rows()}


def by_hand(run: str, task: str) -> dict[str, Any]:
    """Numbers of one run × task counted from its raw rows: samples, right answers (the fixture's
    rule), responses with a block (a '<Parallel>' in the text), blocks, right answers among those."""
    rows = [r for r in raw_rows()[run] if r["task"] == task]
    if run == HOSTILE_RUN:  # Final Answer: 4 is right except in the response whose answer is an <img> tag
        right = [str(r["response"]).rstrip().endswith("Final Answer: 4") for r in rows]
    else:
        step = int(run.removeprefix("step"))
        right = [(int(str(r["problem_id"])[1:]) + int(str(r["sample_idx"]))) % 4 < step // 100 for r in rows]
    blocked = ["<Parallel>" in str(r["response"]) for r in rows]
    return {"n": len(rows), "accuracy": sum(right) / len(rows), "parallel_ratio": sum(blocked) / len(rows),
            "blocks_per_response": sum(str(r["response"]).count("<Parallel>") for r in rows) / len(rows),
            "accuracy_with_block": (sum(a and b for a, b in zip(right, blocked, strict=True)) / sum(blocked)
                                    if any(blocked) else None)}


def bleu_pairs(run: str) -> list[tuple[str, str, int, float]]:
    """(task, problem, sample, symmetric BLEU on 0–1) of every pair of sibling paths, by sacrebleu directly."""
    scorer = BLEU(effective_order=True)
    out = []
    for r in raw_rows()[run]:
        for block in BLOCK.findall(str(r["response"])):
            paths = [p.strip() for p in PATH.findall(block)]
            for i in range(len(paths)):
                for j in range(i + 1, len(paths)):
                    score = (scorer.sentence_score(paths[i], [paths[j]]).score
                             + scorer.sentence_score(paths[j], [paths[i]]).score) / 200
                    out.append((str(r["task"]), str(r["problem_id"]), int(str(r["sample_idx"])), score))
    return out


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
    for name in STEP_RUNS:
        c = int(name.removeprefix("step")) // 100  # right samples of 4, on every problem
        for task, n_problems in TASKS.items():
            shown = row(table, run=name, task=task)
            assert shown["rank"] == str(4 - c) and shown["complete"] == "yes"  # step300 first
            assert shown["mean@K"] == fmt(c / K) and shown["n_problems"] == str(n_problems)
            assert shown["ci95"] == fmt_interval([c / K, c / K])  # every problem scores c/4: no spread to resample
            assert shown["pass@K"] == fmt(1.0)  # n = k = 4 and c ≥ 1: every problem solved at least once
            assert shown["maj@K"] == {1: fmt(0.0), 2: shown["maj@K"], 3: fmt(1.0)}[c]  # 2 of 4: the tie rule's
            assert shown["parallel_ratio"] == fmt(by_hand(name, task)["parallel_ratio"])
    latency = shown_table(app, 1)  # token latency in a table of its own, so the ranking fits the page
    assert "speedup" in latency and "mean@K" not in latency and "speedup" not in table
    assert list(latency["run"]) == list(table["run"]) and list(latency["task"]) == list(table["task"])
    comparisons = shown_table(app, len(app.table) - 1)
    assert len(comparisons) == 2 * len(TASKS)  # step200 and step300 against the lowest step, per task
    assert row(comparisons, run="step300", task="aime24")["Δ mean@K"] == fmt(0.75 - 0.25)
    assert any("Answer policy of every run: paper." in c.value for c in app.caption)  # the fixture runs record none: paper


def test_leaderboard_falls_back_to_each_runs_report(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(runs.values()))
    warning = md_unescape(app.warning[0].value)
    assert "not comparable" in warning and "select fewer runs" in warning
    assert "Compare on shared problems only" not in warning  # no problem is shared: the toggle cannot work here
    assert "--intersect" not in warning and len(warning) < 400  # the differences sit behind an expander
    assert any("only by run 'hostile'" in t.value for t in app.text)
    table = shown_table(app)
    for name in STEP_RUNS:
        c = int(name.removeprefix("step")) // 100
        for task in TASKS:
            shown = row(table, run=name, task=task)
            assert shown["mean@K"] == fmt(c / K) and shown["pass@K"] == fmt(1.0) and shown["k"] == str(K)
    hostile = row(table, run=HOSTILE_RUN, task="aime24")
    assert hostile["k"] == "2" and hostile["mean@K"] == fmt(3 / 4)  # h0: 1 of 2 right, h1: 2 of 2


def test_the_per_run_report_stars_partial_numbers_and_keeps_notes_below(
        runs: dict[str, Path], killed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An incomplete run in the per-run report: its partial numbers, starred as `report` stars them
    (it showed '—'), and its long note below the table, so the rows stay one line high."""
    app = open_app(monkeypatch, [*runs.values(), killed])
    table = shown_table(app)
    held = row(table, run=KILLED_RUN, task="aime24")
    assert held["complete"] == MARK and held["mean@K"] == fmt(1 / 4) + "*"  # 1 of 4 right on each held problem
    assert held["note"].startswith("(") and len(held["note"]) <= 4
    assert row(table, run="step100", task="aime24")["mean@K"] == fmt(1 / K)  # complete: no star
    captions = [md_unescape(c.value) for c in app.caption]
    assert any(c.startswith(f"{held['note']} {KILLED_RUN} · aime24: ") and "2 of 4 problem(s)" in c for c in captions)
    assert any("marked * are partial" in c for c in captions)


def test_compare_starts_on_two_runs_that_share_a_task(tmp_path: Path) -> None:
    from dashboards.tables import default_a, default_b

    samples = pd.DataFrame({"run": ["a", "b", "c", "d"], "task": ["gsm8k", "aime24", "aime24", "amc23"],
                            "model_family": ["x", "y", "z", "y"]})
    runs = ["a", "b", "c", "d"]
    assert default_a(samples, runs) == "b" and default_b(samples, runs, "b") == "c"
    assert default_b(samples, runs, "a") == "b"  # none shares a task with a: the next run


def test_not_comparable_names_the_toggle_and_reads_right_for_a_run_named_run(
        runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    demo = write_import([r for r in step_rows(100) if r["problem_id"] != "p3"], tmp_path / "run")  # the demo's name
    app = open_app(monkeypatch, [runs["step100"], demo])
    assert "'Compare on shared problems only' in the sidebar" in md_unescape(app.warning[0].value)
    differences = [t.value for t in app.text if "problems" in t.value]
    assert any("run 'run' has 3 problems, run 'step100' has 4 (0 held only by run 'run', 1 only by run "
               "'step100': p3)" in d for d in differences), differences
    app.toggle(key="lb_intersect").set_value(True).run()
    assert not app.warning and set(shown_table(app)["run"]) == {"run", "step100"}


def test_sidebar_filters_change_what_is_shown(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, [runs[name] for name in STEP_RUNS])
    assert set(shown_table(app)["run"]) == set(STEP_RUNS)
    app.multiselect(key="filter_runs").set_value(["step100", "step300"]).run()
    assert set(shown_table(app)["run"]) == {"step100", "step300"}
    app.multiselect(key="filter_tasks").set_value(["amc23"]).run()
    assert set(shown_table(app)["task"]) == {"amc23", "average"}


def test_training_dynamics_equal_hand_counts_and_trend(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [runs[name] for name in STEP_RUNS]
    app = open_app(monkeypatch, paths, "training")
    trends, values = shown_table(app, 0), shown_table(app, 1)
    for name in STEP_RUNS:
        step = int(name.removeprefix("step"))
        for task in TASKS:
            shown = row(values, task=task, step=str(step))
            assert shown["mean@K"] == fmt(step / 400) and shown["complete"] == "yes"
            assert shown["parallel_ratio"] == fmt(by_hand(name, task)["parallel_ratio"])
    # the fixtures make 1, 2, then 3 of 4 samples right: mean@4 rises strictly with step
    assert [row(values, task="aime24", step=str(s))["mean@K"] for s in (100, 200, 300)] == ["0.2500", "0.5000", "0.7500"]
    assert row(trends, task="aime24", metric="mean@K")["spearman ρ"] == "1.0000"
    assert row(trends, task="aime24", metric="mean@K")["p"] == fmt(2 / 6)  # exact: 2 of 3! orderings as extreme
    assert len(app.get("plotly_chart")) == 6


def test_behaviour_equals_hand_counts_and_counts_format_failures(runs: dict[str, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(runs.values()), "behaviour")
    accuracy, table, failures = shown_table(app, 0), shown_table(app, 1), shown_table(app, 2)
    cells = [(name, task) for name in STEP_RUNS for task in TASKS] + [(HOSTILE_RUN, "aime24")]
    assert len(table) == len(cells)
    for run, task in cells:
        hand = by_hand(run, task)
        shown = row(table, run=run, task=task)
        assert shown["complete"] == "yes"
        assert shown["parallel_ratio"] == fmt(hand["parallel_ratio"])
        assert shown["blocks_per_response"] == fmt(hand["blocks_per_response"])
        shown = row(accuracy, run=run, task=task)
        assert shown["n_samples"] == str(hand["n"]) and shown["accuracy"] == fmt(hand["accuracy"])
        assert shown["accuracy_with_block"] == fmt(hand["accuracy_with_block"])
    assert row(accuracy, run="step300", task="amc23")["accuracy"] == "0.7500" and by_hand("step300", "amc23")["n"] == 12
    # one hostile response (h1, sample 0) opens a block with a single path; 1 of its run's 4 responses
    assert failures.to_dict("records") == [{"run": HOSTILE_RUN, "kind": "block N has N path(s), needs at least N",
                                            "responses": "1", "share of run": "0.2500"}]
    app.multiselect(key="filter_runs").set_value(list(STEP_RUNS)).run()
    assert len(app.table) == 2 and "passes the strict format check" in app.success[0].value


def test_diversity_and_roles_equal_sacrebleu_on_the_raw_paths(runs: dict[str, Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(runs.values()), "diversity")
    table = shown_table(app)
    every = []
    for run in runs:
        pairs = bleu_pairs(run)
        every += [(score, run) for *_, score in pairs]
        for task in TASKS if run != HOSTILE_RUN else ["aime24"]:
            scores = [score for t, *_, score in pairs if t == task]
            blocks = sum(str(r["response"]).count("<Parallel>") for r in raw_rows()[run] if r["task"] == task)
            shown = row(table, run=run, task=task)
            assert shown["complete"] == "yes" and shown["n_blocks_roles"] == str(blocks)
            assert shown["bleu_mean"] == (fmt(sum(scores) / len(scores)) if scores else "—")
            assert shown["n_pairs"] == str(len(scores))
    links = app.get("page_link")
    assert len(links) == 10
    assert links[0].proto.label.startswith(f"{max(every)[0]:.4f} · ")  # the most similar pair comes first


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
        # the problem is Markdown now (its formulas typeset): a tag may appear only escaped, as text
        assert not re.search(r"(?<!\\)<(script|img)", element.value), element.value
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


def test_a_run_that_changes_is_reloaded_and_an_undeclared_sample_is_not_counted(
        runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    run = Path(shutil.copytree(runs["step100"], tmp_path / "growing"))
    app = open_app(monkeypatch, [run], "behaviour")
    assert row(shown_table(app), task="aime24")["n_samples"] == "16"  # 4 problems × 4 samples
    store = RunStore(run)
    extra = store.read_records()[0]
    extra.problem_id, extra.sample_idx = "new", 0  # a problem run.json does not declare
    store.append([extra])
    app.run()
    shown = row(shown_table(app), task="aime24")
    assert shown["n_samples"] == "16" and shown["complete"] == MARK  # reloaded: marked, and "new" not counted
    texts = [t.value for t in app.text]
    assert any("not in run.json's problem list (new)" in t for t in texts)
    assert any("1 sample(s) of 1 problem(s) run.json does not declare left out" in t for t in texts)


def test_a_killed_run_is_marked_everywhere_and_kept_out_of_trends(runs: dict[str, Path], killed: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [*(runs[name] for name in STEP_RUNS), killed]
    app = open_app(monkeypatch, paths, "behaviour")
    accuracy = shown_table(app, 0)
    held = row(accuracy, run=KILLED_RUN, task="aime24")
    assert held["complete"] == MARK and held["n_samples"] == str(len(KILLED_PROBLEMS) * K)
    assert held["accuracy"] == fmt(1 / 4)  # shown on what it holds (1 of 4 right per problem), marked
    never = row(accuracy, run=KILLED_RUN, task="amc23")  # declared, never started: a row, not a gap
    assert never["complete"] == MARK and never["n_samples"] == "0"
    assert any(INCLUDE_LABEL in c.value and "2 run × task(s)" in c.value for c in app.caption)
    assert any("aime24: 2 of 4 problem(s) have no samples (p2, p3)" in t.value for t in app.text)

    app.switch_page("views/training.py").run()
    trends, values = shown_table(app, 0), shown_table(app, 1)
    assert str(KILLED_STEP) not in set(values["step"])
    assert row(trends, task="aime24", metric="mean@K")["n_steps"] == "3"
    assert row(trends, task="aime24", metric="mean@K")["spearman ρ"] == "1.0000"
    app.toggle(key="include_incomplete").set_value(True).run()
    trends, values = shown_table(app, 0), shown_table(app, 1)
    point = row(values, task="aime24", step=str(KILLED_STEP))
    assert point["complete"] == MARK and point["mean@K"] == fmt(1 / 4)
    # steps 100, 200, 250, 300 against 0.25, 0.5, 0.25, 0.75: Spearman's ρ is Pearson's r of the ranks
    # (1, 2, 3, 4) and (1.5, 3, 1.5, 4), ties averaged, computed here by hand
    x, y = [1, 2, 3, 4], [1.5, 3, 1.5, 4]
    mx, my = sum(x) / 4, sum(y) / 4
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    rho = cov / (sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y)) ** 0.5
    assert row(trends, task="aime24", metric="mean@K")["n_steps"] == "4"
    assert row(trends, task="aime24", metric="mean@K")["spearman ρ"] == fmt(rho)
    app.toggle(key="include_incomplete").set_value(False).run()

    app.switch_page("views/leaderboard.py").run()
    assert not app.exception
    warning = md_unescape(app.warning[0].value)
    assert KILLED_RUN in warning and INCLUDE_LABEL in warning
    assert set(shown_table(app)["run"]) == set(STEP_RUNS)

    app.switch_page("views/diversity.py").run()
    assert row(shown_table(app), run=KILLED_RUN, task="aime24")["complete"] == MARK

    app.switch_page("views/compare.py").run()
    app.selectbox(key="cmp_a").set_value(KILLED_RUN).run()
    assert any(MARK in w.value and "lacks samples its run.json declares" in w.value for w in app.warning)


def test_no_run_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    app = open_app(monkeypatch, [tmp_path])
    assert "No run could be loaded" in app.error[0].value
