"""Text from runs is inert on the command line's surfaces: ``leaderboard --markdown`` rendered by two
Markdown libraries with raw HTML on, terminal output of every command that prints data, and CSV.

Second readings: Python-Markdown (the ``markdown`` package, which passes raw HTML through) and
markdown-it (CommonMark with tables, HTML on and off) render the leaderboard's Markdown, and lxml
counts the elements that came out; the terminal checks look for the bytes a terminal acts on.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import lxml.html
import pytest
from markdown_it import MarkdownIt

from pr1_eval.cli.main import main
from pr1_eval.cli.sweep import format_sweep_table
from pr1_eval.generate.sweep import SweepRow
from pr1_eval.inputs.checkpoints import Checkpoint
from pr1_eval.terminal import terminal_json, terminal_text
from tests.support.hostile_fixtures import MARKER, build_hostile_runs

markdown = pytest.importorskip("markdown")

#: Escape sequences: clear screen, OSC 8 hyperlink, window title, colour by C1 CSI, bell, carriage return.
ESCAPES = "\x1b[2J\x1b]8;;https://evil.example/t\x07link\x1b]8;;\x07\x1b]0;title\x07\x9b31m\x07\r"
#: What a terminal acts on (a carriage return moves the cursor: never from data on stdout).
ACTIVE = ("\x1b", "\x07", "\x9b", "\x90", "\x9d")
ELEMENTS = ("script", "img", "a", "iframe", "style", "object", "embed", "svg", "input", "form")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    build_hostile_runs(root)
    return root


def _elements(rendered: str) -> dict[str, int]:
    tree = lxml.html.fragment_fromstring(rendered, create_parent="div")
    return {tag: len(tree.findall(f".//{tag}")) for tag in ELEMENTS}


def test_leaderboard_markdown_makes_no_element_from_data(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", str(hostile), "--markdown"]) == 0
    text = capsys.readouterr().out
    renders = {"python-markdown": markdown.markdown(text, extensions=["tables"]),
               "markdown-it html on": MarkdownIt("commonmark", {"html": True}).enable("table").render(text),
               "markdown-it html off": MarkdownIt("commonmark", {"html": False}).enable("table").render(text)}
    for name, rendered in renders.items():
        assert _elements(rendered) == dict.fromkeys(ELEMENTS, 0), name
        tree = lxml.html.fragment_fromstring(rendered, create_parent="div")
        assert len(tree.findall(".//table")) == 3, name  # the tables still are tables
        shown = tree.text_content().replace("\u2060", "")
        if name == "python-markdown":  # it resolves fewer backslash escapes than CommonMark: some stay visible
            shown = shown.replace("\\", "")
        assert "<script>window.__pwned='task'</script>" in shown, name  # the attack is shown as text
        assert f"[md-task](https://{MARKER}/task/md)" in shown, name


def _escaping_run(tmp_path: Path) -> Path:
    rows = [{"task": f"t{ESCAPES}", "problem_id": f"p{i}{ESCAPES}", "sample_idx": s, "gold": "1",
             "response": "Final Answer: 1", "model": f"m{ESCAPES}/global_step_5"} for i in range(2) for s in range(2)]
    rows.pop()  # one problem short: the incomplete lines name it
    source = tmp_path / "esc.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / "run"
    assert main(["import", str(source), "--out", str(run), "--grade-workers", "0"]) == 0
    return run


def _strings(value: object) -> list[str]:
    """Every string in a JSON document, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_inert(out: str, err: str) -> None:
    for ch in ACTIVE:
        assert ch not in out and ch not in err, repr(ch)
    assert "\r" not in out


@pytest.mark.parametrize("argv", [["report", "{run}"], ["report", "{run}", "--strict"], ["leaderboard", "{run}"],
                                  ["leaderboard", "{run}", "--include-incomplete"],
                                  ["leaderboard", "{run}", "--include-incomplete", "--markdown"],
                                  ["leaderboard", "{run}", "--include-incomplete", "--csv"],  # issue 48 N9
                                  ["analyze", "{run}", "--no-embeddings", "--out", "{out}"],
                                  ["report", "{run}", "--json"],
                                  ["leaderboard", "{run}", "--include-incomplete", "--json"],
                                  ["analyze", "{run}", "--no-embeddings", "--out", "{out}", "--json"]])
def test_commands_print_no_escape_sequence_from_data(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    argv: list[str]) -> None:
    run = _escaping_run(tmp_path)
    _assert_inert(*capsys.readouterr())
    main([a.format(run=run, out=tmp_path / "analysis") for a in argv])
    out, err = capsys.readouterr()
    _assert_inert(out, err)
    assert "x1b" in out + err or "u001b" in out  # what was there is shown
    if "--json" in argv:  # still JSON, and it reads back to the data as written
        assert any(ESCAPES in text for text in _strings(json.loads(out)))


def test_the_sweep_table_prints_no_escape_sequence_from_data(tmp_path: Path) -> None:
    row = SweepRow(Checkpoint(tmp_path / f"ck{ESCAPES}", None, tmp_path), status="failed",
                   reason=f"bad{ESCAPES}", metrics={f"t{ESCAPES}": 0.5}, incomplete=[f"t{ESCAPES}: short"])
    table = format_sweep_table([row])
    _assert_inert(table, "")
    assert "\\x1b]0;title\\x07" in table


def test_terminal_text_shows_every_control_character_and_nothing_else_changes() -> None:
    controls = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))]
    assert [terminal_text(c) for c in controls] == [c.encode("unicode_escape").decode() for c in controls]
    assert all(len(terminal_text(c)) > 1 for c in controls)
    plain = "aime24 — 漢字 😀 \u2028 ok"
    assert terminal_text(plain) == plain


def test_terminal_json_escapes_raw_controls_and_reads_back_the_same() -> None:
    document = {"name": f"漢字 😀 {ESCAPES}\x7f\x85", "n": [1, 2.5, None]}
    text = terminal_json(document)
    assert not any(chr(c) in text for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) != "\n")
    assert json.loads(text) == document
    assert "漢字 😀" in text  # readable non-ASCII stays readable
    assert json.loads(terminal_json(document, indent=None)) == document


def test_leaderboard_csv_neutralises_formulas_in_text_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"task": "=HYPERLINK(\"https://evil.example\")", "problem_id": f"p{i}", "sample_idx": 0, "gold": "1",
             "response": "Final Answer: 1" if i else "Final Answer: 2", "model": "@SUM(1+1)"} for i in range(2)]
    source = tmp_path / "f.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = tmp_path / "-run"
    assert main(["import", str(source), "--out", str(run), "--grade-workers", "0"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", str(run), "--csv"]) == 0
    table = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    head, row = table[0], dict(zip(table[0], table[1], strict=True))
    assert row["name"] == "'-run" and row["model"] == "'@SUM(1+1)"
    task_columns = [h for h in head if "HYPERLINK" in h]
    assert task_columns and all(h.startswith("'=HYPERLINK") for h in task_columns)
    assert row[next(h for h in task_columns if h.endswith(".mean@1"))] == "0.5"
    assert all(not cell.startswith(("=", "+", "@", "\t", "\r")) for line in table for cell in line)
