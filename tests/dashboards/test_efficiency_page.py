"""The Efficiency page on fork-join runs whose path lengths are known by construction
(:mod:`tests.support.efficiency_fixtures`): every number shown equals the design counted here,
the frontier holds the checkpoint that is both sooner and more accurate, and each point links to
its traces. Runs without any critical path get a sentence, not an empty figure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
import pytest

from dashboards.components import fmt
from dashboards.data import MEMO
from tests.support import efficiency_fixtures as fx
from tests.support.app_harness import open_app, row, shown_table
from tests.support.dashboard_fixtures import build_runs


@pytest.fixture(scope="module")
def fj_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("efficiency")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR1_LOADER_CACHE", str(root / "cache"))
        yield fx.build_forkjoin_runs(root / "runs")
    MEMO.clear()


def test_the_page_shows_the_designed_latencies(fj_runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    app = open_app(monkeypatch, list(fj_runs.values()), "efficiency")
    assert [t.value for t in app.title] == ["Efficiency"]
    table = shown_table(app, 0)
    for step in fx.STEPS:
        cells = [(p, s) for p in range(fx.PROBLEMS) for s in range(fx.K)]
        lengths = [fx.length(p, s) for p, s in cells]
        paths = [fx.critical(step, p, s) for p, s in cells]
        shown = row(table, run=fx.run_name(step))
        assert shown["speedup"] == fmt(sum(lengths) / sum(paths))
        assert shown["critical_path"] == fmt(np.mean(paths), 1)
        assert shown["accuracy"] == fmt(np.mean([np.mean([fx.right(step, p, s) for s in range(fx.K)])
                                                 for p in range(fx.PROBLEMS)]))
        assert shown["parallel_ratio"] == fmt(np.mean([fx.branches(step, s) for _, s in cells]))
        assert shown["on frontier"] == ("★" if step == 200 else "")
    links = [parse_qs(link.proto.query_string) for link in app.get("page_link")]
    assert links == [{"run": [fx.run_name(s)], "task": [fx.TASK]} for s in fx.STEPS]  # each point opens its traces
    assert len(app.get("plotly_chart")) == 3  # frontier, histogram, steps
    wall = shown_table(app, 1)
    assert list(wall["run"]) == [fx.run_name(s) for s in fx.STEPS]
    assert wall["wall_s"].tolist() == [fmt(0.5 + 0.001 * np.mean([fx.critical(s, p, i) for p in range(fx.PROBLEMS)
                                                                  for i in range(fx.K)])) for s in fx.STEPS]


def test_a_sequentially_decoded_run_gets_its_critical_path_from_its_blocks(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A run decoded in one stream still wrote blocks an engine could run side by side: its parsed
    critical path is drawn (no "no critical path" sentence; the histogram and the frontier)."""
    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))
    runs = build_runs(tmp_path)
    app = open_app(monkeypatch, [runs["step100"]], "efficiency")
    assert not any("No selected sample has a critical path" in info.value for info in app.info)
    assert len(app.get("plotly_chart")) >= 2
    MEMO.clear()


def test_a_training_jobs_step_speedups_are_drawn_beside_the_checkpoints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.runs import steps as training_steps
    from tests.support.training_job_fixtures import build_job

    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))
    runs = fx.build_forkjoin_runs(tmp_path / "runs")
    build_job(tmp_path / "job", steps=(0, 25, 50))
    app = open_app(monkeypatch, [*runs.values(), tmp_path / "job"], "efficiency")
    assert not any("step summaries hold no speedup" in caption.value for caption in app.caption)
    assert len(app.get("plotly_chart")) == 4  # histogram, frontier, checkpoint steps, the job's steps
    MEMO.clear()
    training_steps.CACHE.clear()
