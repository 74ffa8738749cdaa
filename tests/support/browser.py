"""Headless Chromium over the DevTools protocol for the dashboard's browser tests
(``tests/dashboards/test_browser.py`` and ``test_browser_efficiency.py``): finding the binary, a
free port, waiting for a served app, the DOM probes and the inertness check, the screenshot folder.
See ``tests/dashboards/test_browser.py`` for why the DevTools protocol."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.deadlines import scaled
from tests.support.hostile_fixtures import MARKER

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
            message = json.loads(self.socket.recv(timeout=scaled(60)))
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


def wait_healthy(process: subprocess.Popen[str], base: str, log: Path) -> None:
    deadline = time.monotonic() + scaled(90)
    while True:
        try:
            with urllib.request.urlopen(base + "_stcore/health", timeout=2) as answer:
                if answer.read().decode().strip() == "ok":
                    return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dashboard did not start:\n{log.read_text()}") from None
            time.sleep(0.5)


def artifacts() -> Path:
    folder = Path(os.environ.get("PR1_ARTIFACTS_DIR", ROOT / "ci-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def assert_inert(dom: dict[str, Any], where: str) -> None:
    """No link or image from data, no script from data ran, no error shown."""
    assert not dom["errors"], dom["errors"]
    assert dom["links"] == [], f"{where}: links from data: {dom['links']}"
    assert dom["images"] == [], f"{where}: images from data: {dom['images']}"
    assert (dom["pwned"], dom["scripts"]) == (None, 0), f"{where}: a script from data ran or was inserted"


def shoot(pairs: list[tuple[str, Path]], timeout: float = 120.0) -> None:
    """Screenshot each served dashboard page (url, png) once it is idle and stopped changing.

    Why not ``chromium --headless --screenshot``: a Streamlit page fills over its websocket after the
    load event, so Chromium's own screenshot (with ``--virtual-time-budget`` or ``--timeout``) catches
    the empty skeleton; this waits in real time for the app's idle mark (:data:`READY`), as the
    browser tests do. ``python -m tests.support.browser URL OUT.png [URL OUT.png …]``."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pr1-shot-") as profile:
        browser = DevTools(chromium_binary(), Path(profile) / "profile")
        try:
            for url, out in pairs:
                browser.open(url, (), timeout=timeout)
                browser.screenshot(out)
                print(f"wrote {out}")
        finally:
            browser.close()


if __name__ == "__main__":
    import sys

    ARGS = sys.argv[1:]
    if not ARGS or len(ARGS) % 2:
        raise SystemExit("usage: python -m tests.support.browser URL OUT.png [URL OUT.png ...]")
    shoot([(ARGS[i], Path(ARGS[i + 1])) for i in range(0, len(ARGS), 2)])
