"""What a reader saw at 1440 px, measured in headless Chromium (as :mod:`tests.dashboards.test_browser`).

A newcomer's screenshots showed the ``leaderboard --html`` tables cut at the window's right edge
(three tasks of one sweep), and the accuracy–latency frontier with point labels printed over each
other and past the plot's edges, its title cut at the right, and lengths in tokens and in
characters on one x axis. Here the same shapes are drawn at 1440 px and measured in the DOM; the
screenshots go to ``ci-artifacts/dashboard/`` for a reader to look at.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.support.browser import DevTools, artifacts, chromium_binary
from tests.support.deadlines import scaled
from tests.support.leaderboard_fixtures import write_counts_run

pytestmark = pytest.mark.slow
WINDOW = 1440  # the newcomer's window
SWEEP = [f"seen-step{step}-sequential-k16-seed0" for step in (100, 200, 300)]
TASKS = ("aime24", "aime25", "amc23")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    devtools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    yield devtools
    devtools.close()


def _load(browser: DevTools, page: Path, shot: str, height: int = 1400) -> None:
    browser.call("Emulation.setDeviceMetricsOverride", width=WINDOW, height=height, deviceScaleFactor=1, mobile=False)
    browser.call("Page.navigate", url=page.as_uri())
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline and not browser.evaluate(
            "JSON.stringify(document.readyState === 'complete' && !!document.querySelector('.main-svg'))"):
        time.sleep(0.5)
    time.sleep(1.0)
    (artifacts() / shot).write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))


def test_the_leaderboard_tables_fit_a_1440px_window(browser: DevTools, tmp_path: Path) -> None:
    from analysis.leaderboard.board import compute_leaderboard
    from analysis.leaderboard.page import write_leaderboard_html

    rnd = random.Random(0)
    runs = [write_counts_run(tmp_path, name, {t: {f"{t}-{i}": rnd.randint(0, 16) for i in range(30)} for t in TASKS},
                             k=16, step=100 * (n + 1), family="/scratch/checkpoints/seen", block_every=3)
            for n, name in enumerate(SWEEP)]
    page = write_leaderboard_html(compute_leaderboard(runs), tmp_path / "leaderboard.html")
    _load(browser, page, "html-leaderboard-1440.png")
    sizes = browser.evaluate("""JSON.stringify({
      page: document.documentElement.scrollWidth,
      boxes: [...document.querySelectorAll('.wide')].map(b => [b.scrollWidth, b.clientWidth]),
      text: document.body.innerText})""")
    assert sizes["page"] <= WINDOW, sizes["page"]
    assert len(sizes["boxes"]) == 3  # ranked, per task, comparisons
    assert all(scroll <= client + 1 for scroll, client in sizes["boxes"]), sizes["boxes"]  # no table needs a scroll
    assert "amc23 mean@16" in " ".join(sizes["text"].split())  # the last task's column is there


def _points() -> pd.DataFrame:
    """A sweep's points in tokens (names alike but for the step: their labels used to overprint) and an
    import's in characters, one of them incomplete (the title names the mark)."""
    rows = [dict(run=name, task=task, accuracy=0.1 + 0.05 * n + 0.02 * t, critical_path=400 + 10 * n + 5 * t,
                 unit="token", complete=True, model="/ck/seen", step=100 * (n + 1), speedup=1.0, n_samples=64,
                 run_path=f"/runs/{name}")
            for n, name in enumerate(SWEEP) for t, task in enumerate(TASKS)]
    rows += [dict(run="global_step_200-sequential-k8-seed0", task=task, accuracy=0.2, critical_path=1300, unit="char",
                  complete=task == "amc23", model="/ck", step=200, speedup=1.0, n_samples=16, run_path="/runs/x")
             for task in ("aime24", "amc23")]
    return pd.DataFrame(rows)


def test_the_frontier_has_no_overprinted_labels_a_whole_title_and_an_axis_per_unit(browser: DevTools,
                                                                                   tmp_path: Path) -> None:
    from analysis.efficiency.figures import frontier_figure

    figure = frontier_figure(_points())
    assert figure is not None
    page = tmp_path / "frontier.html"
    figure.write_html(page, include_plotlyjs=True)
    _load(browser, page, "html-frontier-1440.png", height=700)
    dom = browser.evaluate("""JSON.stringify((() => {
      const svg = document.querySelector('.main-svg').getBoundingClientRect();
      const parts = [...document.querySelectorAll('.gtitle, .gtitle-subtitle')];
      const boxes = parts.map(p => p.getBoundingClientRect());
      return {svg: [svg.left, svg.right], title: [Math.min(...boxes.map(b => b.left)), Math.max(...boxes.map(b => b.right))],
              titleText: parts.map(p => p.textContent).join(' | '),
              labels: document.querySelectorAll('.scatterlayer .textpoint').length,
              xtitles: [...document.querySelectorAll('.g-xtitle, .g-x2title')].map(t => t.textContent)};
    })())""")
    assert dom["labels"] == 0  # points carry no text: run names are in the hover and the table
    assert dom["svg"][0] <= dom["title"][0] and dom["title"][1] <= dom["svg"][1], dom  # the title is not cut
    assert dom["titleText"].startswith("Accuracy against token latency | ★ on the Pareto frontier"), dom["titleText"]
    assert dom["titleText"].count("incomplete") == 1, dom["titleText"]  # was "⚠ incomplete incomplete"
    assert sorted(dom["xtitles"]) == ["mean critical path (characters) — lower is sooner",
                                      "mean critical path (tokens) — lower is sooner"], dom["xtitles"]
