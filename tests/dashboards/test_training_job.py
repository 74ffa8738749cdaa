"""The Training page on a training job's own step runs (a synthetic mid-training job whose behaviour
is known by construction, :mod:`tests.support.training_job_fixtures`): every number per step equals
the design counted here from the written texts (``str.index``, ``in``), the first block's drift
has a positive trend, the reward switch is marked on the figures, new steps of a followed folder
appear on the next rerun, and an incomplete step is marked and kept out of the trends."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from analysis.runs.steps import CACHE
from dashboards.components import fmt, md_unescape
from dashboards.data import MEMO
from dashboards.launch import app_path
from tests.support.deadlines import scaled
from tests.support.training_job_fixtures import (
    STEPS,
    SWITCH_STEP,
    StepDesign,
    build_job,
    first_block_position,
    n_parallel,
    write_step,
)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[tuple[str, int], StepDesign]]]:
    root = tmp_path_factory.mktemp("job")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR1_LOADER_CACHE", str(root / "cache"))
        yield root / "runs", build_job(root / "runs")
    MEMO.clear()
    CACHE.clear()


def open_app(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> AppTest:
    monkeypatch.setattr(sys, "argv", ["app.py", *args])
    app = AppTest.from_file(str(app_path()), default_timeout=scaled(180)).run()
    app.switch_page("views/training.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def values(app: AppTest) -> pd.DataFrame:
    return app.dataframe[0].value


def trends(app: AppTest) -> pd.DataFrame:
    return app.table[0].value.map(md_unescape)


def test_every_step_equals_the_design(job: tuple[Path, dict[tuple[str, int], StepDesign]],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, designs = job
    app = open_app(monkeypatch, [str(root)])
    table = values(app)
    assert len(table) == len(designs)
    for (kind, step), design in designs.items():
        label = "training rollouts" if kind == "train" else "validation"
        shown = table[(table["kind"] == label) & (table["step"] == step)].iloc[0]
        n = len(design.texts)
        assert shown["n_samples"] == n and shown["k"] == design.k and shown["complete"] == "yes"
        assert shown["parallel_ratio"] == pytest.approx(sum("<Parallel>" in t for t in design.texts) / n)
        assert shown["parallel_ratio"] == pytest.approx(n_parallel(step, n) / n)
        assert shown["accuracy"] == pytest.approx(sum(design.right) / n)
        assert shown["first_block_rel_pos"] == pytest.approx(first_block_position(design))
        assert shown["reward_mean"] == pytest.approx(sum(design.right) / n)
    # half the training steps were written without a summary: computed, and equal to the design all the same
    assert set(table["summary_source"]) == {"stored in run.json", "computed from the samples"}
    text = " ".join(c.value for c in app.caption)
    assert "at most 50 blocks per step" in text and "seed 0" in text


def test_the_drift_is_positive_and_the_switch_is_marked(job: tuple[Path, dict[tuple[str, int], StepDesign]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = job
    app = open_app(monkeypatch, [str(root)])
    shown = trends(app)
    position = shown[(shown["kind"] == "training rollouts") & (shown["metric"].str.startswith("first <Parallel>"))]
    assert position.iloc[0]["spearman ρ"] == fmt(1.0)  # the lead grows with every step: ranks agree exactly
    assert float(position.iloc[0]["p"]) < 0.001 and position.iloc[0]["n_steps"] == str(len(STEPS))
    ratio = shown[(shown["kind"] == "training rollouts") & (shown["metric"] == "parallel ratio")].iloc[0]
    assert abs(float(ratio["spearman ρ"])) < 0.5  # rises, then falls: no monotone trend
    first_after = min(s for s in STEPS if s > SWITCH_STEP)
    assert any(f"step {first_after}: reward: parallel_accuracy → accuracy" in md_unescape(c.value)
               for c in app.caption)
    paper = [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")[:3]]
    for spec in paper:  # parallel ratio, first-block position, accuracy: the switch drawn on each
        assert [shape["x0"] for shape in spec["layout"]["shapes"]] == [first_after]
    assert "ρ = +1.00" in paper[1]["layout"]["title"]["text"]


def test_a_followed_folder_shows_a_new_step_on_the_next_rerun(job: tuple[Path, dict[tuple[str, int], StepDesign]],
                                                              monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = Path(shutil.copytree(job[0], tmp_path / "runs"))
    app = open_app(monkeypatch, ["--follow", "1", str(root)])
    assert any(f"Following {root}" in md_unescape(c.value) for c in app.sidebar.caption)
    before = len(values(app))
    write_step(root, "train", 300, len(STEPS), with_summary=True)
    app.run()
    after = values(app)
    assert len(after) == before + 1 and 300 in set(after["step"])
    write_step(root, "train", 325, len(STEPS) + 1, with_summary=True, status="importing")  # still being written
    app.run()
    table, shown = values(app), trends(app)
    assert table[table["step"] == 325].iloc[0]["complete"] != "yes"
    position = shown[(shown["kind"] == "training rollouts") & (shown["metric"].str.startswith("first <Parallel>"))]
    assert position.iloc[0]["n_steps"] == str(len(STEPS) + 1)  # the incomplete step is not in the trend


def test_the_page_redraws_from_memory(job: tuple[Path, dict[tuple[str, int], StepDesign]],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = job
    app = open_app(monkeypatch, [str(root)])
    started = time.perf_counter()
    app.run()
    assert time.perf_counter() - started < 2.0
    assert not app.exception
