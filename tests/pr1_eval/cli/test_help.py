"""What a new user meets first: ``--help`` that fits 80 columns and says what each command does,
and output piped into ``head`` that ends without a traceback."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from pr1_eval.cli.help import HelpFormatter
from pr1_eval.cli.main import build_parser
from repro.cli.main import build_parser as build_repro_parser
from tests.support.deadlines import scaled

MARKUP = ("``", ":func:", ":mod:", ":class:", ":data:", "Registers ")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("columns", ["200", "80", "60"])
def test_every_help_text_fits_80_columns_and_reads_as_user_text(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    width = 80  # examples are kept as written (at most 80 wide); a narrower terminal wraps them itself
    parsers = {"pr1-eval": build_parser(), "pr1-repro": build_repro_parser()}
    for prog, top in list(parsers.items()):
        parsers.update({f"{prog} {name}": sub for name, sub in _subparsers(top).items()})
    assert {"pr1-eval analyze", "pr1-eval leaderboard", "pr1-eval dashboard", "pr1-eval sweep"} <= set(parsers)
    for name, parser in parsers.items():
        text = parser.format_help()
        wide = [line for line in text.splitlines() if len(line) > width]
        assert not wide, (name, wide)
        assert not [m for m in MARKUP if m in text], (name, text)
        assert parser.description and len(parser.description) > 40, name  # says what the command does
        if name.startswith("pr1-eval ") and name != "pr1-eval lm-eval-path" or name == "pr1-repro data":
            assert "example" in text, name


def test_defaults_are_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = " ".join(_subparsers(build_parser())["run"].format_help().split())
    for shown in ("-k K samples per problem (default: 16)", "(default: 1.0)", "(default: 3000)",
                  "(default: sequential)", "(default: parallel_r1_v3)"):
        assert shown in text, shown
    assert "(default 16) (default" not in text  # a help that names its default is not given a second one


def _commands() -> dict[str, argparse.ArgumentParser]:
    return _subparsers(build_parser())


def test_every_command_says_what_it_does_and_shows_an_example() -> None:
    commands = _commands()
    assert {"run", "sweep", "merge", "report", "regrade", "import", "import-verl", "tiny-model", "demo",
            "lm-eval-path", "analyze", "leaderboard", "dashboard"} <= set(commands)
    for name, parser in commands.items():
        assert parser.description and not parser.description.startswith(("``", '"""')), name
        assert parser.epilog and parser.epilog.startswith("examples:\n"), name
        examples = parser.epilog.splitlines()[1:]
        assert examples and all(line.startswith("  ") for line in examples), (name, examples)
        assert any(f"pr1-eval {name}" in line for line in examples), (name, examples)  # an example of itself


def test_every_default_is_shown_in_every_command() -> None:
    checked = 0
    for name, parser in _commands().items():
        formatter = HelpFormatter(f"pr1-eval {name}", width=80)
        for action in parser._actions:
            if (not action.option_strings or action.default in (None, False, argparse.SUPPRESS)
                    or action.required or action.help == argparse.SUPPRESS):
                continue
            text = formatter._expand_help(action)
            assert "default" in text, (name, action.option_strings, text)
            checked += 1
    assert checked > 30  # run's and sweep's generation options, tiny-model --seed, dashboard --port, ...


def test_help_formatter_appends_a_default_only_where_the_help_has_none() -> None:
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    parser.add_argument("--a", default=3, help="plain")
    parser.add_argument("--b", default=3, help="says its default 3")
    parser.add_argument("--c", default=None, help="none")
    parser.add_argument("--d", action="store_true", help="flag")
    text = " ".join(parser.format_help().split())
    assert "plain (default: 3)" in text and "says its default 3 --c" in text
    assert "none --d" in text and "flag" in text and text.count("(default:") == 1


def _run_json(tmp_path: Path) -> Path:
    from pr1_eval.ingest.importer import import_jsonl

    src = tmp_path / "x.jsonl"
    src.write_text("".join(f'{{"task": "t", "problem_id": "p{i}", "sample_idx": 0, "response": "Final Answer: 1", '
                           f'"gold": "1"}}\n' for i in range(3)))
    return import_jsonl(src, tmp_path / "run", workers=1)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    run = _run_json(tmp_path)
    for args in (["report", str(run)], ["report", str(run), "--json"], ["--help"]):
        child = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # `| head` that has already exited: every write hits a closed pipe
        err = child.stderr.read().decode()
        status = child.wait(timeout=scaled(120))
        assert status == 141 or (args == ["--help"] and status == 0), (args, err)  # argparse ignores a closed pipe
        assert "Traceback" not in err and "BrokenPipeError" not in err, (args, err)


def test_the_program_ends_with_the_status_and_the_whole_output_of_main(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``pr1-eval`` (``entry``) prints what ``main`` prints and exits with its status, having frozen
    the collector (the teardown's quick exit); ``main`` alone, for callers that go on, does not."""
    import json

    import pr1_eval.cli.main as cli

    run = _run_json(tmp_path)
    child = subprocess.run([sys.executable, "-m", "pr1_eval", "report", str(run), "--json"], capture_output=True,
                           text=True, timeout=scaled(120))
    assert child.returncode == 0 and json.loads(child.stdout), child.stderr
    missing = subprocess.run([sys.executable, "-m", "pr1_eval", "report", str(tmp_path / "nothing")],
                             capture_output=True, text=True, timeout=scaled(120))
    assert missing.returncode == 2 and missing.stderr.startswith("error:"), missing.stderr
    frozen: list[bool] = []
    monkeypatch.setattr(cli.gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr(cli, "main", lambda argv=None: 3)
    with pytest.raises(SystemExit) as stopped:
        cli.entry([])
    assert stopped.value.code == 3 and frozen == [True]
