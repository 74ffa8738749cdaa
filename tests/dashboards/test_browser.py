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
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dashboard_fixtures import HOSTILE_RUN, build_runs
from tests.support.hostile_fixtures import (
    HOSTILE_RUNS,
    MARKER,
    PROBLEM_IDS,
    RUN_ATTACK,
    TASK,
    build_hostile_runs,
    payload,
)
from tests.support.training_job_fixtures import STEPS, build_job, write_step

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DEMO_RUN = ROOT / "pr1-demo" / "run"
WIDTH = 1600  # a desktop browser window
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--remote-debugging-port=0"]
#: How long chromium may take to open its DevTools endpoint. A first start reads some 200 MB of
#: browser from a cold disk; beside CI's other work one start took over 30 s.
CHROMIUM_START_S = 120
#: Streamlit marks its root with the script's state ('running' / 'notRunning'), as its own e2e tests use.
READY = """(() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  const title = document.querySelector('h1');
  const idle = !!app && app.getAttribute('data-test-script-state') === 'notRunning'
               && app.getAttribute('data-test-connection-state') === 'CONNECTED';
  return JSON.stringify({ready: !!(idle && main && title), title: title ? title.innerText : null,
                         size: main ? main.innerText.length : 0});
})()"""
TEXT = "JSON.stringify(document.body.innerText.replaceAll('\\u2060', ''))"
#: Origins a page may link to on its own (plotly's modebar logo).
OWN_LINKS = ("https://plotly.com",)
ATTACKS = """(() => {
  const marker = /MARKER|javascript:|mailto:|data:/i;
  const target = e => (e.getAttribute('href') || e.getAttribute('xlink:href') || e.getAttribute('src') || '').trim();
  const fromData = e => {
    const raw = target(e);
    if (!raw || raw.startsWith('#')) return false;
    let url;
    try { url = new URL(raw, location.href); } catch (err) { return true; }
    if (!['http:', 'https:', 'file:'].includes(url.protocol)) return true;
    if (url.origin !== location.origin && !OWN.includes(url.origin)) return true;
    return marker.test(raw.split('?')[0]) || (e.tagName.toLowerCase() !== 'a' && raw === 'x');
  };
  const describe = e => e.tagName + ' ' + target(e).slice(0, 200);
  return JSON.stringify({
    pwned: window.__pwned === undefined ? null : String(window.__pwned),
    scripts: [...document.querySelectorAll('script')].filter(s => s.textContent.includes("__pwned='")
             && !s.textContent.includes('Plotly.newPlot')).length,
    links: [...document.querySelectorAll('a')].filter(fromData).map(describe),
    images: [...document.querySelectorAll('img, image, iframe, object, embed')]
            .filter(i => !i.closest('.heatmaplayer'))  // plotly paints a heatmap as an image of its own
            .filter(i => fromData(i) || i.hasAttribute('onerror')).map(describe),
    errors: [...document.querySelectorAll('[data-testid="stException"]')].map(e => e.innerText.slice(0, 500)),
    text: (document.body.innerText + '\\n' + [...document.querySelectorAll('svg text')].map(t => t.textContent).join('\\n'))
          .replaceAll('\\u2060', ''),
  });
})()""".replace("MARKER", MARKER.replace(".", "\\.")).replace("OWN", json.dumps(list(OWN_LINKS)))


def chromium_binary() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed, but CI must run the browser test: .ci/run installs it "
                    "with `apt-get install -y chromium`")
    pytest.skip("chromium not installed (apt-get install -y chromium); the browser test runs in CI")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DevTools:
    """A minimal Chrome DevTools protocol client for one headless page."""

    def __init__(self, binary: str, profile: Path) -> None:
        from websockets.sync.client import connect

        log = profile.parent / f"{profile.name}-chromium.log"
        with log.open("w") as sink:
            self.process = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                            stdout=sink, stderr=subprocess.STDOUT)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + CHROMIUM_START_S
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self._stop()
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"chromium did not start its DevTools endpoint within {CHROMIUM_START_S} s "
                                   f"(exit status {self.process.returncode}); its output ends:\n{tail}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        self.last_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        self.socket.send(json.dumps({"id": self.last_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return json.loads(result["result"]["value"])

    def open(self, url: str, expected: tuple[str, ...], timeout: float = 120.0) -> dict[str, Any]:
        """Load ``url`` and wait until the app is idle, shows every ``expected`` text and stopped changing
        (returns the last state either way; the test asserts on it)."""
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=1000, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        deadline, last, stable = time.monotonic() + timeout, None, 0
        while time.monotonic() < deadline:
            time.sleep(1.0)
            state = self.evaluate(READY)
            shown = state["ready"] and all(text in self.evaluate(TEXT) for text in expected)
            stable = stable + 1 if shown and state == last else 0
            last = state
            if stable >= 2:
                break
        return last or {}

    def screenshot(self, path: Path) -> None:
        """The whole main column: the viewport is stretched to the height of its content."""
        height = self.evaluate("JSON.stringify(Math.min(8000, Math.max(1000, "
                               "document.querySelector('[data-testid=\"stMainBlockContainer\"]').scrollHeight + 120)))")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=height, deviceScaleFactor=1, mobile=False)
        time.sleep(1.5)
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self.socket.close()
        self._stop()

    def _stop(self) -> None:
        """End chromium, also when it never came up (a leaked browser outlives the test run)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def _wait_healthy(process: subprocess.Popen[str], base: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(base + "_stcore/health", timeout=2) as answer:
                if answer.read().decode().strip() == "ok":
                    return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dashboard did not start:\n{log.read_text()}") from None
            time.sleep(0.5)


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
        _wait_healthy(process, base, log)
        yield base, runs, log
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    output = log.read_text(encoding="utf-8")
    assert process.returncode == 0, output
    assert base in output and "dashboard stopped" in output


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    devtools = DevTools(chromium_binary(), tmp_path_factory.mktemp("chromium-profile"))
    yield devtools
    devtools.close()


def artifacts() -> Path:
    folder = Path(os.environ.get("PR1_ARTIFACTS_DIR", ROOT / "ci-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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


def assert_inert(dom: dict[str, Any], where: str) -> None:
    """No link or image from data, no script from data ran, no error shown."""
    assert not dom["errors"], dom["errors"]
    assert dom["links"] == [], f"{where}: links from data: {dom['links']}"
    assert dom["images"] == [], f"{where}: images from data: {dom['images']}"
    assert (dom["pwned"], dom["scripts"]) == (None, 0), f"{where}: a script from data ran or was inserted"


def shot_name(path: str) -> str:
    page = path.split("?")[0] or "home"
    return f"{page}-hostile" if path == HOSTILE_TRACE else page


@pytest.mark.parametrize("path", list(PAGES), ids=shot_name)
def test_page_renders_in_chromium_with_hostile_text_inert(server: tuple[str, dict[str, Path], Path],
                                                          browser: DevTools, path: str) -> None:
    base = server[0]
    title, expected = PAGES[path]
    state = browser.open(base + path, expected)
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
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([*command, "analyze", *hostile, "--out", str(out / "analysis"), "--no-embeddings"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
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
        deadline = time.monotonic() + 60
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
        _wait_healthy(process, base, log)
        before = f"training rollouts: {len(STEPS)} step(s)"
        state = browser.open(base + "training", (before, "reward: parallel_accuracy → accuracy", "Following"))
        assert state["title"] == "Training dynamics"
        assert before in browser.evaluate(TEXT)
        browser.screenshot(artifacts() / "training-job.png")
        write_step(job, "train", 300, len(STEPS), with_summary=True)
        after = f"training rollouts: {len(STEPS) + 1} step(s)"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and after not in browser.evaluate(TEXT):
            time.sleep(1.0)
        assert after in browser.evaluate(TEXT), "the new step did not appear within 60 s"
        assert_inert(browser.evaluate(ATTACKS), "training job")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    output = log.read_text(encoding="utf-8")
    assert "Traceback" not in output and "following" in output, output
