"""The text-safety helpers, each checked by a second reading of its output: a CommonMark parser and
the GFM autolink rules for Markdown, plotly.js's own tag split for plotly labels, lxml for HTML;
and the HTML pages built from the hostile runs, parsed without a browser (the browser test opens
them in Chromium)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import lxml.html
import pandas as pd
import pytest
from markdown_it import MarkdownIt

from analysis.common.safe_text import WORD_JOINER, html_text, markdown_plain, markdown_text, plot_frame, plot_text
from analysis.leaderboard.board import compute_leaderboard
from analysis.leaderboard.page import leaderboard_html
from analysis.pipeline.figures import write_figures
from analysis.runs.loader import load_runs
from analysis.summary import analyze
from tests.support.hostile_fixtures import (
    HOSTILE_RUNS,
    MARKER,
    PROBLEM_IDS,
    RUN_ATTACK,
    TASK,
    assert_inert_page,
    build_hostile_runs,
    payload,
)

ATTACKS = [payload("field"), RUN_ATTACK, PROBLEM_IDS[0], "</script><script>window.__pwned='id'</script>",
           "WWW.EVIL.EXAMPLE and Https://Evil.Example", "x@y.co", ":red[red] :smile: :material/home: 12:30",
           "1. not a list", "- not a list", "# not a heading", "a & b &lt; c", "    four spaces", "`code` *em* _u_ ~s~"]
#: GFM's autolink literals (spec, "Autolinks (extension)"): what GitHub-flavoured Markdown
#: links after parsing, whatever escapes the source had.
GFM_AUTOLINK = re.compile(r"(?i)(?:https?://|www\.)[^\s<]|[\w.+-]+@[\w-]+\.[\w.-]*\w|(?:mailto|xmpp):")
#: plotly.js's tag split (``svg_text_utils``: ``/(<[^<>]*>)/``) and its TeX test (``/^\$.*\$$/``-like).
PLOTLY_TAG = re.compile(r"(<[^<>]*>)")


@pytest.mark.parametrize("text", ATTACKS)
def test_markdown_text_renders_as_the_same_literal_text_with_no_element(text: str) -> None:
    """A CommonMark parser (raw HTML on) makes one paragraph of plain text from it: no link, image,
    HTML, code or emphasis; the text is the input (less the invisible joiners); and what the
    autolink pass would see has no GFM autolink literal left."""
    rendered = MarkdownIt("commonmark", {"html": True}).render(markdown_text(text)).strip()
    assert rendered.startswith("<p>") and rendered.endswith("</p>"), rendered
    inner = rendered[3:-4]
    assert "<" not in inner, rendered  # every '<' of the input came out as &lt;
    assert html.unescape(inner).replace(WORD_JOINER, "") == text
    assert not GFM_AUTOLINK.search(html.unescape(inner)), html.unescape(inner)


def test_markdown_plain_reads_back_what_markdown_text_was_given() -> None:
    for text in ATTACKS:
        assert markdown_plain(markdown_text(text)) == text
    assert markdown_text("a\nb\r\nc") == "a b c"


def test_word_joiners_sit_only_where_markdown_would_act() -> None:
    assert markdown_text("Final answer 42, ratio 0.5") == "Final answer 42, ratio 0.5"
    assert markdown_text("https://x.io") == "https\\:" + WORD_JOINER + "//x.io"
    assert markdown_text("www.x.io") == "www" + WORD_JOINER + ".x.io"
    assert markdown_text("a@x.io") == "a@" + WORD_JOINER + "x.io"
    assert markdown_text("12:30 :red") == "12\\:30 \\:" + WORD_JOINER + "red"


@pytest.mark.parametrize("text", ATTACKS)
def test_plot_text_has_no_tag_and_no_formula_for_plotly(text: str) -> None:
    safe = plot_text(text)
    assert PLOTLY_TAG.split(safe) == [safe]  # plotly finds no tag to draw
    assert "$" not in safe
    assert html.unescape(safe) == text  # plotly decodes the entities it finds: the reader sees the input


@pytest.mark.parametrize("text", ATTACKS)
def test_html_text_is_one_text_node(text: str) -> None:
    page = lxml.html.fromstring(f"<div title=\"{html_text(text)}\">{html_text(text)}</div>")
    assert len(page) == 0 and page.text_content() == text and page.get("title") == text


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR1_LOADER_CACHE", str(root / "cache"))
        yield build_hostile_runs(root / "runs")


def _plotly_json(text: str) -> str:
    """``text`` as plotly.io writes a string into a page (JSON, then its three swaps)."""
    return json.dumps(text)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\u002f")


def test_leaderboard_html_keeps_hostile_names_and_ids_as_text(hostile_runs: dict[str, Path]) -> None:
    board = compute_leaderboard(load_runs([hostile_runs[name] for name in HOSTILE_RUNS], tokenizer=None))
    page = leaderboard_html(board)
    tree = assert_inert_page(page, "leaderboard --html")
    cells = {cell.text_content() for cell in tree.xpath("//td")}
    assert set(HOSTILE_RUNS) <= cells and TASK in cells
    # the figures hold ids and names as plot_text (entities), in plotly's JSON: '<', '>' and '/'
    # written as \u escapes (so no '</script>' can close the block); no tag made of data anywhere
    for text in (*PROBLEM_IDS, TASK, *HOSTILE_RUNS):
        assert _plotly_json(plot_text(text)) in page, text
    figures = page.replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u002f", "/")
    assert f'<a href="https://{MARKER}' not in figures and "<img src=x" not in figures


def test_analyze_pages_keep_hostile_names_as_text(hostile_runs: dict[str, Path], tmp_path: Path) -> None:
    analysis = analyze(load_runs([hostile_runs[name] for name in HOSTILE_RUNS], tokenizer=None))
    written, _ = write_figures(analysis, tmp_path)
    assert written
    for path in written:
        page = path.read_text(encoding="utf-8")
        assert_inert_page(page, path.name)
        figures = page.replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u002f", "/")
        assert f'<a href="https://{MARKER}' not in figures and "<img src=x" not in figures, path.name


def test_plot_frame_escapes_the_label_columns_only() -> None:
    frame = pd.DataFrame({"task": ["<a href='https://x.io'>t</a>", "plain"], "value": [0.5, 1.0]})
    out = plot_frame(frame, ["task", "absent"])
    assert list(out["task"]) == ["&lt;a href='https://x.io'&gt;t&lt;/a&gt;", "plain"]
    assert list(out["value"]) == [0.5, 1.0] and frame["task"].iat[0].startswith("<a")  # the input is untouched
