"""The efficiency pictures in a real browser (headless Chromium, as :mod:`tests.dashboards.test_browser`):
the dashboard's Efficiency page and ``analyze``'s three HTML pages, on designed fork-join runs
(:mod:`tests.support.efficiency_fixtures`) beside a pair whose run and model names are attacks.

Checked: the page draws the frontier, the histogram and the step lines with the runs' names as
literal text, no link, image or script from data; a click on a frontier point of the HTML page
opens that run's ``run.json``. Screenshots go to ``ci-artifacts/dashboard/`` for a reader to look at.
A server of its own, so the main browser test's runs and defaults stay as they are.
"""

from __future__ import annotations

import base64
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
    WIDTH,
    DevTools,
    artifacts,
    assert_inert,
    chromium_binary,
    free_port,
    wait_healthy,
)
from tests.support.deadlines import scaled
from tests.support.hostile_fixtures import MARKER, RUN_ATTACK, payload

pytestmark = pytest.mark.slow
HOSTILE_PREFIX = f"fj {RUN_ATTACK}"


@pytest.fixture(scope="module")
def fj_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fj-browser")
    runs = fx.build_forkjoin_runs(root / "runs" / "plain")
    runs.update(fx.build_forkjoin_runs(root / "runs" / "hostile", prefix=HOSTILE_PREFIX,
                                       model=f"/ck/{payload('model')}/step-*"))
    return runs


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    devtools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    yield devtools
    devtools.close()


@pytest.fixture(scope="module")
def server(fj_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("fj-server")
    port = free_port()
    log = root / "server.log"
    env = {**os.environ, "PR1_LOADER_CACHE": str(root / "cache")}
    folders = sorted({str(path.parent) for path in fj_runs.values()})
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", *folders, "--port", str(port)],
                                   env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(process, base, log)
        yield base, log
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=scaled(30))


def test_efficiency_page_renders_in_chromium(server: tuple[str, Path], browser: DevTools) -> None:
    base, log = server
    expected = ("Accuracy against token latency", "Speedup per problem", "Over training steps", "★",
                fx.run_name(200), f"{HOSTILE_PREFIX}-step200", "Wall clock (generated runs)")
    state = browser.open(base + "efficiency", expected)
    dom = browser.evaluate(ATTACKS)
    browser.screenshot(artifacts() / "efficiency.png")
    assert state["title"] == "Efficiency"
    assert_inert(dom, "Efficiency")
    missing = [text for text in (*expected, "mean critical path (tokens)", "speedup (1 = no gain)")
               if text not in dom["text"]]
    assert not missing, f"not on the page as literal text: {missing}"
    assert MARKER in dom["text"]
    output = log.read_text(encoding="utf-8")
    assert "Traceback" not in output and "Error" not in output, output


def test_analyze_pages_render_and_a_point_opens_its_run(fj_runs: dict[str, Path], browser: DevTools,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "analysis"
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "analyze", *map(str, fj_runs.values()),
                           "--out", str(out), "--no-embeddings"], env={**os.environ, "PR1_LOADER_CACHE": str(tmp_path)},
                          capture_output=True, text=True, timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # the names as analyze shows them (model_name: the hostile model's last folder, step-*)
    shown = {"latency_frontier": "step 200", "speedup_hist": "step 200", "efficiency_steps": "step-* · forkjoin"}
    for name, text in shown.items():
        browser.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=1000, deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", url=(out / f"{name}.html").as_uri())
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline and not browser.evaluate(
                "JSON.stringify(document.readyState === 'complete' && !!document.querySelector('.main-svg'))"):
            time.sleep(0.5)
        time.sleep(1.0)
        dom = browser.evaluate(ATTACKS)
        shot = browser.call("Page.captureScreenshot", format="png")
        (artifacts() / f"html-analyze-{name}.png").write_bytes(base64.b64decode(shot["data"]))
        assert_inert(dom, name)
        if name == "latency_frontier":  # points carry no text label (they overprinted): the run is in the hover
            hovers = browser.evaluate("JSON.stringify([...document.querySelector('.js-plotly-plot').data]"
                                      ".flatMap(t => t.hovertext || []))")
            assert any(text in h for h in hovers), name
            assert "Accuracy against token latency" in dom["text"], name
        else:
            assert text in dom["text"], name
    # still on the last page: go back to the frontier and click the hostile step-200 point through plotly
    browser.call("Page.navigate", url=(out / "latency_frontier.html").as_uri())
    time.sleep(3.0)
    opened = browser.evaluate("""(() => {
      const plot = document.querySelector('.js-plotly-plot');
      const opened = [];
      window.open = (url) => { opened.push(url); return null; };
      const trace = plot.data.findIndex(t => t.customdata && t.customdata.length);
      const index = plot.data[trace].customdata.findIndex(c => c[1].endsWith('fj-200'));
      plot.emit('plotly_click', {points: [{customdata: plot.data[trace].customdata[index]}]});
      return JSON.stringify(opened);
    })()""")
    assert len(opened) == 1 and opened[0].startswith("file:///") and opened[0].endswith("/fj-200/run.json")
    assert json.dumps(opened)  # a plain URL, percent-encoded by the page's data
