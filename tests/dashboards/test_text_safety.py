"""Every dashboard page on the two hostile runs, through Streamlit's test harness (fast, no browser):
every Markdown string a page sends (Markdown, captions, alerts, metrics, table cells, headings,
link labels) is read by a CommonMark parser and must make no link, image or HTML and hold no GFM
autolink literal; every string of every plotly figure must hold no tag plotly would draw. The
browser test (test_browser.py) checks the rendered pages themselves."""

from __future__ import annotations

import html
import json
import re
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from dashboards.data import MEMO
from dashboards.launch import app_path
from tests.support.deadlines import scaled
from tests.support.hostile_fixtures import HOSTILE_RUNS, MARKER, PROBLEM_IDS, TASK, build_hostile_runs

PAGES = ("leaderboard", "training", "behaviour", "diversity", "trace_viewer", "compare", "efficiency")
#: GFM autolink literals (the spec's extension): links made after parsing, whatever the escapes.
GFM_AUTOLINK = re.compile(r"(?i)(?:https?://|www\.)[^\s<]|[\w.+-]+@[\w-]+\.[\w.-]*\w|(?:mailto|xmpp):")
#: A tag plotly.js would parse (its split is ``/(<[^<>]*>)/``); ``<br>`` and ``<extra>`` are ours.
PLOTLY_TAG = re.compile(r"<(?!/?(?:br|extra)>)[^<>]*>", re.IGNORECASE)
_PARSER = MarkdownIt("commonmark", {"html": True})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    root = tmp_path_factory.mktemp("hostile-dashboard")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR1_LOADER_CACHE", str(root / "cache"))
        runs = build_hostile_runs(root / "runs")
        yield [runs[name] for name in HOSTILE_RUNS]
    MEMO.clear()


def open_page(monkeypatch: pytest.MonkeyPatch, paths: list[Path], page: str,
              params: dict[str, str] | None = None) -> AppTest:
    monkeypatch.setattr(sys, "argv", ["app.py", *map(str, paths)])
    app = AppTest.from_file(str(app_path()), default_timeout=scaled(180)).run()
    app.query_params.update(params or {})
    app.switch_page(f"views/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def markdown_strings(app: AppTest) -> list[str]:
    """Every string the page hands Streamlit's Markdown renderer."""
    texts: list[str] = []
    for kind in ("markdown", "caption", "warning", "error", "success", "info", "title", "header", "subheader"):
        texts += [str(element.value) for element in getattr(app, kind)]
    for metric in app.metric:
        texts += [str(metric.label), str(metric.value)]
    for table in app.table:
        frame = table.value
        texts += [str(c) for c in frame.columns] + [str(v) for v in frame.to_numpy().ravel()]
    texts += [str(link.proto.label) for link in app.get("page_link")]
    return texts


def figure_strings(app: AppTest) -> list[str]:
    """Every string inside every plotly figure of the page."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for chart in app.get("plotly_chart"):
        figure = json.loads(chart.proto.spec)
        walk(figure.get("data"))
        walk(figure.get("layout"))
    return found


def assert_page_inert(app: AppTest, where: str) -> tuple[list[str], list[str]]:
    texts, strings = markdown_strings(app), figure_strings(app)
    for text in texts:
        rendered = _PARSER.render(text)
        tags = re.findall(r"<(?!/?(?:p|strong|em|code|h\d)>)[^>]*>", rendered)
        assert not tags, (where, text[:200], tags)  # no link, image or HTML; emphasis only where the page wrote it
        assert not GFM_AUTOLINK.search(html.unescape(re.sub(r"<[^>]+>", "", rendered))), (where, text[:200])
    for text in strings:
        assert not PLOTLY_TAG.search(text) and "$" not in text, (where, text[:200])
    return texts, strings


@pytest.mark.parametrize("page", PAGES)
def test_every_page_sends_hostile_text_only_as_literal_text(hostile: list[Path], monkeypatch: pytest.MonkeyPatch,
                                                            page: str) -> None:
    app = open_page(monkeypatch, hostile, page)
    texts, strings = assert_page_inert(app, page)
    assert any(MARKER in text for text in texts + strings), f"{page}: no hostile text reached the page"


def test_a_hostile_deep_link_opens_its_trace_and_stays_literal(hostile: list[Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    link = {"run": HOSTILE_RUNS[1], "task": TASK, "problem": PROBLEM_IDS[0], "sample": "1"}
    assert urllib.parse.parse_qs(urllib.parse.urlencode(link))["problem"] == [PROBLEM_IDS[0]]
    app = open_page(monkeypatch, hostile, "trace_viewer", link)
    assert (app.selectbox(key="tv_run").value, app.selectbox(key="tv_problem").value,
            app.selectbox(key="tv_sample").value) == (HOSTILE_RUNS[1], PROBLEM_IDS[0], 1)
    assert_page_inert(app, "trace viewer")
    # the wrong answer carrying the attacks is shown literally, in a code block
    assert any("5 [md-answer](https://evil.example/answer/md)" in code.value for code in app.code)
