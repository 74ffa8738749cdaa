"""The dashboard in a real browser: ``pr1-eval dashboard`` on loopback, each page loaded in headless
Chromium (Debian's ``chromium``, driven over the DevTools protocol), its rendered DOM checked and a
screenshot kept in ``ci-artifacts/dashboard/`` (``$PR1_ARTIFACTS_DIR/dashboard`` when set).

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
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_fixtures import HOSTILE_RUN, build_runs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
DEMO_RUN = ROOT / "pr1-demo" / "run"
WIDTH = 1600  # a desktop browser window
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--remote-debugging-port=0"]
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
TEXT = "JSON.stringify(document.body.innerText)"
ATTACKS = """(() => JSON.stringify({
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
  scripts: [...document.querySelectorAll('script')].filter(s => s.textContent.includes('__pwned')).length,
  images: [...document.querySelectorAll('img')].filter(i => i.hasAttribute('onerror')
           || (i.getAttribute('src') || '') === 'x').length,
  jsLinks: [...document.querySelectorAll('a[href]')].filter(a => a.href.trim().toLowerCase()
           .startsWith('javascript:')).length,
  errors: [...document.querySelectorAll('[data-testid="stException"]')].map(e => e.innerText.slice(0, 500)),
  text: document.body.innerText,
}))()"""


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

        self.process = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
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
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Path]]]:
    """``pr1-eval dashboard`` serving the fixture runs on a free loopback port."""
    root = tmp_path_factory.mktemp("browser")
    runs = build_runs(root)
    served = [str(root / "runs")]
    if (DEMO_RUN / "run.json").is_file():  # CI runs `pr1-eval demo` first: its run is served too
        served.append(str(DEMO_RUN))
    port = free_port()
    env = {**os.environ, "PR1_LOADER_CACHE": str(root / "cache")}
    process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", *served, "--port", str(port)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(base + "_stcore/health", timeout=2) as answer:
                if answer.read().decode().strip() == "ok":
                    break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dashboard did not start:\n{process.stdout.read() if process.stdout else ''}") from None
            time.sleep(0.5)
    yield base, runs
    process.send_signal(2)
    output, _ = process.communicate(timeout=30)
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


#: url path → (page title, texts its DOM must contain)
PAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "": ("Leaderboard", ("step100", "step300", HOSTILE_RUN, "0.7500")),
    "training": ("Training dynamics", ("global_step_*", "0.7500")),
    "behaviour": ("Behaviour", ("step200", "Format-check failures by kind")),
    "diversity": ("Diversity and roles", ("Most similar pairs", "BLEU")),
    "trace?run=hostile&task=aime24&problem=h0&sample=0": ("Trace viewer", (
        "<script>window.__pwned = 'script'</script>", "<img src=x onerror=", "javascript:window.__pwned",
        "Path one", "Summary")),
    "compare": ("Compare two runs", ("wrong → right", "step100", "step300")),
}


@pytest.mark.parametrize("path", list(PAGES))
def test_page_renders_in_chromium_with_hostile_text_inert(server: tuple[str, dict[str, Path]], browser: DevTools,
                                                          path: str) -> None:
    base, _ = server
    title, expected = PAGES[path]
    state = browser.open(base + path, expected)
    dom = browser.evaluate(ATTACKS)
    browser.screenshot(artifacts() / f"{path.split('?')[0] or 'leaderboard'}.png")
    assert state["title"] == title
    assert not dom["errors"], dom["errors"]
    missing = [text for text in expected if text not in dom["text"]]
    assert not missing, f"{title}: not in the rendered page: {missing}"
    assert (dom["pwned"], dom["scripts"], dom["images"], dom["jsLinks"]) == (None, 0, 0, 0)
