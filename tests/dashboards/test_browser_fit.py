"""The leaderboard page fits a 1600-px window with a real mix of runs, in headless Chromium (the
driver of :mod:`tests.dashboards.test_browser`).

The runs are named as imported checkpoints often are, by long absolute paths: three steps of a
job, a killed step (incomplete, its partial numbers starred), a hostile run and two fork-join runs
carrying the token-latency columns. Served together they are not comparable, so the page shows
each run's own report; the fork-join pair alone gets the paired leaderboard with its latency
table. On both pages every table must be no wider than its column and the window (the DOM's
``scrollWidth`` against ``clientWidth``: a wider table clips or scrolls its last columns) and no
row taller than two lines of text (a four-line run name or a long note made rows 90-300 px tall).
Screenshots go to ``ci-artifacts/dashboard/fit-*.png``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import efficiency_fixtures as fx
from tests.support.browser import (
    ATTACKS,
    TEXT,
    WIDTH,
    DevTools,
    artifacts,
    assert_inert,
    chromium_binary,
    free_port,
    wait_healthy,
)
from tests.support.dashboard_fixtures import build_killed_run, build_runs
from tests.support.deadlines import scaled

pytestmark = pytest.mark.slow
ROOT = "/mnt/shared/checkpoints/parallel-r1/experiments/seen-qwen3-4b-lr1e-6"
#: Two lines of table text and the cell padding (a one-line row is about 35 px).
ROW_LIMIT_PX = 64
#: Per table in the main column: its width against its container's, its right edge, its tallest row.
MEASURE = """(() => JSON.stringify({
  page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  tables: [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stTable"]')].map(box => {
    const table = box.querySelector('table');
    const rows = [...table.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height);
    return {columns: [...table.querySelectorAll('thead th')].map(th => th.innerText).join(' | '),
            width: table.scrollWidth, room: box.clientWidth, right: table.getBoundingClientRect().right,
            tallest: Math.max(0, ...rows)};
  }),
}))()"""


#: Opens the expander listing the full run names (true when it was found).
OPEN_LEGEND = """JSON.stringify((() => { const summary = [...document.querySelectorAll('summary')]
  .find(s => s.innerText.includes('Full run names')); if (summary) summary.click(); return !!summary; })())"""


def long_name(name: str) -> str:
    return f"{ROOT}/{name}/actor-sequential-k4-seed0"


@pytest.fixture(scope="module")
def mix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs under ``root/runs``, each renamed in its run.json to a long absolute path."""
    root = tmp_path_factory.mktemp("fit")
    runs = {**build_runs(root), "killed": build_killed_run(root), **fx.build_forkjoin_runs(root / "runs" / "fj")}
    for name, path in runs.items():
        record = json.loads((path / "run.json").read_text(encoding="utf-8"))
        record["name"] = long_name(name)
        (path / "run.json").write_text(json.dumps(record), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    devtools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    yield devtools
    devtools.close()


#: folder served → (texts the page shows once drawn, the run labels and latency table it must show)
SCENARIOS = {
    "runs": (("Per-run report", "0.2500*", "are partial"), ("…/step100/…", "…/killed/…", "Full run names")),
    "runs/fj": (("Sorted by the average", "speedup"), ("Token latency", "…/fj-step200/…", "Full run names")),
}


@pytest.mark.parametrize("served", list(SCENARIOS), ids=["per-run-report", "leaderboard"])
def test_leaderboard_tables_fit_the_window_with_long_run_names(mix: Path, browser: DevTools, tmp_path: Path,
                                                                served: str) -> None:
    drawn, labels = SCENARIOS[served]
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "PR1_LOADER_CACHE": str(tmp_path / "cache")}
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", str(mix / served),
                                    "--port", str(port)], env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(process, base, log)
        state = browser.open(base, ("Leaderboard", *drawn))
        measured = browser.evaluate(MEASURE)
        dom = browser.evaluate(ATTACKS)
        browser.screenshot(artifacts() / f"fit-{served.replace('/', '-')}.png")
        opened = browser.evaluate(OPEN_LEGEND)
        time.sleep(2)
        legend = browser.evaluate(TEXT)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=scaled(30))
    assert state["title"] == "Leaderboard" and all(text in dom["text"] for text in drawn), state
    assert_inert(dom, "leaderboard")
    assert measured["tables"], "no table on the leaderboard page"
    assert measured["page"][0] <= measured["page"][1], f"the page scrolls sideways: {measured['page']}"
    for table in measured["tables"]:
        assert table["width"] <= table["room"] + 1 and table["right"] <= WIDTH, f"wider than the page: {table}"
        assert table["tallest"] <= ROW_LIMIT_PX, f"a row taller than two lines: {table}"
    missing = [text for text in labels if text not in dom["text"]]
    assert not missing, f"not on the page: {missing}"
    full = long_name(labels[1].split("/")[1])
    assert opened and f"{labels[1]}  =  {full}" in legend, "the expander does not give the full run name"
