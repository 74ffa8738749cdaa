"""The dashboard in a real browser: ``pr1-eval dashboard`` on loopback, each page loaded in headless
Chromium (Debian's ``chromium``, driven over the DevTools protocol), its rendered DOM checked and a
screenshot kept in ``ci-artifacts/dashboard/`` (``$PR1_ARTIFACTS_DIR/dashboard`` when set).

Untrusted text: besides the fixture checkpoints, the dashboard serves the two runs of
:mod:`hostile_fixtures`, whose every field (run and task names, problem ids, model path and
family, finish reasons, problem texts, responses) carries links, images and scripts. On every
page, and on the ``leaderboard --html`` and ``analyze`` pages of those runs, the test counts every
anchor and image (HTML and SVG) whose target comes from data — any target off the page's origin
(plotly's own logo link aside), any non-http(s) target, any target naming ``evil.example`` outside
a query string — and requires 0, requires that no script from data ran, and that the attacks are
on the page as literal text (Markdown labels carry invisible word joiners; they are removed
before comparing). The server's log must hold no traceback or widget-state stack afterwards.

Why the DevTools protocol rather than ``chromium --dump-dom``: Streamlit renders over a
websocket after the page has loaded, so a dump taken on a virtual-time budget returns before
the app has drawn anything; here each page is polled until the app is idle and its content is
there. The client is ``websockets``, which Streamlit itself requires.

Without chromium the test skips with the reason; under CI (``CI=true``) it fails instead,
because ``.ci/run`` installs chromium and a silent skip would hide a broken browser check.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browser import (
    ATTACKS,
    DEMO_RUN,
    TEXT,
    WIDTH,
    DevTools,
    artifacts,
    assert_inert,
    chromium_binary,
    free_port,
    wait_healthy,
)
from tests.support.dashboard_fixtures import HOSTILE_RUN, build_runs
from tests.support.deadlines import scaled
from tests.support.hostile_fixtures import (
    HOSTILE_RUNS,
    PROBLEM_IDS,
    RUN_ATTACK,
    TASK,
    build_hostile_runs,
    payload,
)
from tests.support.training_job_fixtures import STEPS, build_job, write_step

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Path], Path]]:
    """``pr1-eval dashboard`` serving the fixture runs and the hostile runs on a free loopback port;
    yields its address, the runs and the file its output goes to."""
    root = tmp_path_factory.mktemp("browser")
    runs = {**build_runs(root), **build_hostile_runs(root / "hostile-runs")}
    served = [str(root / "runs"), str(root / "hostile-runs")]
    if (DEMO_RUN / "run.json").is_file():  # CI runs `pr1-eval demo` first: its run is served too
        served.append(str(DEMO_RUN))
    port = free_port()
    env = {**os.environ, "PR1_LOADER_CACHE": str(root / "cache")}
    log = root / "server.log"
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", *served, "--port", str(port)],
                                   env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(process, base, log)
        yield base, runs, log
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=scaled(30))
    output = log.read_text(encoding="utf-8")
    assert process.returncode == 0, output
    assert base in output and "dashboard stopped" in output


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    devtools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    yield devtools
    devtools.close()



def trace_link(run: str, task: str, problem: str, sample: int) -> str:
    return "trace?" + urllib.parse.urlencode({"run": run, "task": task, "problem": problem, "sample": sample})


HOSTILE_TRACE = trace_link(HOSTILE_RUNS[0], TASK, PROBLEM_IDS[0], 0)
#: url path → (page title, texts its DOM must contain)
PAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "": ("Leaderboard", ("step100", "step300", HOSTILE_RUN, "0.7500", HOSTILE_RUNS[0], TASK)),
    "leaderboard": ("Leaderboard", ("step100", "step300", HOSTILE_RUN, "0.7500", HOSTILE_RUNS[0], TASK)),  # by name
    "training": ("Training dynamics", ("global_step_*", "0.7500", payload("model"))),
    "behaviour": ("Behaviour", ("step200", "Format-check failures by kind", HOSTILE_RUNS[1])),
    "diversity": ("Diversity and roles", ("Most similar pairs", "BLEU", f"1.0000 · {HOSTILE_RUNS[0]} · {TASK}")),
    "trace?run=hostile&task=aime24&problem=h0&sample=0": ("Trace viewer", (
        "<script>window.__pwned = 'script'</script>", "<img src=x onerror=", "javascript:window.__pwned",
        "Path one", "Summary")),
    HOSTILE_TRACE: ("Trace viewer", (
        HOSTILE_RUNS[0], TASK, PROBLEM_IDS[0], f"What is 2 + 2? {payload('problem')}", payload("response"),
        payload("path"), payload("summary"), f"finish reason: stop {payload('finish')}")),
    "compare": ("Compare two runs", ("wrong → right", f"A: {PROBLEM_IDS[1]} in {HOSTILE_RUNS[0]} (0/2 correct)",
                                     f"B: {PROBLEM_IDS[1]} in {HOSTILE_RUNS[1]} (2/2 correct)")),
}
#: Texts of plotly figures (SVG) each page must draw literally.
FIGURE_TEXTS: dict[str, tuple[str, ...]] = {
    "training": (payload("model"),),
    "behaviour": (HOSTILE_RUNS[0], f"{HOSTILE_RUNS[1]} · {TASK}"),
    "diversity": (f"{HOSTILE_RUNS[0]} (mean 1.0000, n=2)",),
}



#: Opens every "Full run names" expander (the full names of the runs a table shows by a short label).
OPEN_RUN_NAMES = """JSON.stringify([...document.querySelectorAll('summary')].filter(s => s.innerText.includes(
  'Full run names')).map(s => { s.click(); return true; }).length)"""


def shot_name(path: str) -> str:
    page = path.split("?")[0] or "home"
    return f"{page}-hostile" if path == HOSTILE_TRACE else page


@pytest.mark.parametrize("path", list(PAGES), ids=shot_name)
def test_page_renders_in_chromium_with_hostile_text_inert(server: tuple[str, dict[str, Path], Path],
                                                          browser: DevTools, path: str) -> None:
    base = server[0]
    title, expected = PAGES[path]
    state = browser.open(base + path, tuple(t for t in expected if t not in HOSTILE_RUNS))
    if browser.evaluate(OPEN_RUN_NAMES):  # a table shows a long run name cut; the expander gives it whole
        time.sleep(2)
    dom = browser.evaluate(ATTACKS)
    browser.screenshot(artifacts() / f"{shot_name(path)}.png")
    assert state["title"] == title
    assert "Page not found" not in dom["text"], f"/{path}: Streamlit did not know this page"
    assert_inert(dom, title)
    missing = [text for text in (*expected, *FIGURE_TEXTS.get(path, ())) if text not in dom["text"]]
    assert not missing, f"{title}: not in the rendered page as literal text: {missing}"


def test_server_log_has_no_traceback_after_the_pages_and_deep_links(server: tuple[str, dict[str, Path], Path],
                                                                     browser: DevTools) -> None:
    """A deep link sets the trace viewer's widgets through Session State: no widget may also get a
    default then (Streamlit logs a 40-line stack for it), and nothing else may fail. Two deep
    links in a row, then a rerun through the page's own widgets (the sidebar's next button)."""
    base, _, log = server
    browser.open(base + HOSTILE_TRACE, (payload("response"),))
    browser.open(base + trace_link("step200", "amc23", "p1", 2), ("step200",))
    assert browser.evaluate("JSON.stringify((() => { const next = [...document.querySelectorAll('button')]"
                            ".find(b => b.innerText.includes('next')); if (next) next.click(); return !!next; })())")
    time.sleep(3)
    browser.open(base + "compare", ("wrong → right",))
    output = log.read_text(encoding="utf-8")
    for sign in ("Traceback", "Stack (most recent call last)", "Session State API", "Error"):
        assert sign not in output, output


@pytest.fixture(scope="module")
def report_pages(server: tuple[str, dict[str, Path], Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``leaderboard --html`` and ``analyze``'s figure pages of the two hostile runs, made by the commands."""
    runs = server[1]
    out = tmp_path_factory.mktemp("hostile-html")
    hostile = [str(runs[name]) for name in HOSTILE_RUNS]
    env = {**os.environ, "PR1_LOADER_CACHE": str(out / "cache")}
    command = [sys.executable, "-m", "pr1_eval.cli.main"]
    done = subprocess.run([*command, "leaderboard", *hostile, "--html", str(out / "leaderboard.html")], env=env,
                          capture_output=True, text=True, timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([*command, "analyze", *hostile, "--out", str(out / "analysis"), "--no-embeddings"], env=env,
                          capture_output=True, text=True, timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    pages = {"leaderboard": out / "leaderboard.html"}
    pages.update({f"analyze-{page.stem}": page for page in sorted((out / "analysis").rglob("*.html"))})
    assert len(pages) >= 3, pages  # the leaderboard and at least parallel ratio and block position
    return pages


#: Texts each HTML page must show literally (tables as text, figures as SVG text).
HTML_TEXTS: dict[str, tuple[str, ...]] = {
    "leaderboard": (HOSTILE_RUNS[0], HOSTILE_RUNS[1], TASK, PROBLEM_IDS[0], PROBLEM_IDS[1]),
    "analyze-parallel_ratio": (TASK,),
}


def test_leaderboard_and_analyze_html_show_hostile_text_inert(report_pages: dict[str, Path], browser: DevTools) -> None:
    for name, page in report_pages.items():
        browser.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=2400, deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", url=page.as_uri())
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline and not browser.evaluate(
                "JSON.stringify(document.readyState === 'complete' && !!document.querySelector('.main-svg'))"):
            time.sleep(0.5)
        time.sleep(1.0)
        dom = browser.evaluate(ATTACKS)
        shot = browser.call("Page.captureScreenshot", format="png")
        (artifacts() / f"html-{name}.png").write_bytes(base64.b64decode(shot["data"]))
        assert_inert(dom, name)
        missing = [text for text in HTML_TEXTS.get(name, ()) if text not in dom["text"]]
        assert not missing, f"{name}: not on the page as literal text: {missing}"
        assert RUN_ATTACK in dom["text"] or name.startswith("analyze"), name


def test_a_followed_job_shows_new_steps_without_a_reload(browser: DevTools, tmp_path: Path) -> None:
    """``pr1-eval dashboard --follow JOB --poll 2`` on the Training page: a step written while the page
    is open appears on it, no reload, no click; the screenshot shows the job's figures."""
    job = tmp_path / "job"
    build_job(job)
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "PR1_LOADER_CACHE": str(tmp_path / "cache")}
    with log.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", "--follow", str(job),
                                    "--poll", "2", "--port", str(port)], env=env, stdout=sink,
                                   stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(process, base, log)
        before = f"training rollouts: {len(STEPS)} step(s)"
        state = browser.open(base + "training", (before, "reward: parallel_accuracy → accuracy", "Following"))
        assert state["title"] == "Training dynamics"
        assert before in browser.evaluate(TEXT)
        browser.screenshot(artifacts() / "training-job.png")
        write_step(job, "train", 300, len(STEPS), with_summary=True)
        after = f"training rollouts: {len(STEPS) + 1} step(s)"
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline and after not in browser.evaluate(TEXT):
            time.sleep(1.0)
        assert after in browser.evaluate(TEXT), "the new step did not appear within 60 s"
        assert_inert(browser.evaluate(ATTACKS), "training job")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=scaled(30))
    output = log.read_text(encoding="utf-8")
    assert "Traceback" not in output and "following" in output, output
