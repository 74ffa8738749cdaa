"""``pr1-eval``'s commands: one module each (parser, help and handler), registered by the list in
:mod:`pr1_eval.cli.main`; plugins the same shape; building the parser loads nothing heavy; and
the choices a command offers are its owner's."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from pr1_eval.cli import main as cli_main
from pr1_eval.cli.help import Parser
from tests.support.deadlines import scaled

CLI = Path(cli_main.__file__).parent
PLUGINS = ("analysis.command", "analysis.leaderboard.command", "analysis.efficiency.replay_command", "dashboards.command")
NOT_COMMANDS = {"__init__", "__main__", "main", "help", "options", "numbers", "commands", "sweep_adaptive"}


def _registered(module_name: str) -> dict[str, argparse.ArgumentParser]:
    subparsers = Parser(prog="pr1-eval").add_subparsers(dest="command", parser_class=Parser)
    importlib.import_module(module_name).register(subparsers)
    return dict(subparsers.choices)


def test_every_command_module_is_registered_once() -> None:
    modules = {path.stem for path in CLI.glob("*.py")} - NOT_COMMANDS
    assert {m.__name__.rpartition(".")[2] for m in cli_main.COMMANDS} == modules  # no module left out
    assert len(set(cli_main.COMMANDS)) == len(cli_main.COMMANDS)


def test_each_module_adds_one_command_whose_handler_it_holds() -> None:
    names = []
    for module_name in [m.__name__ for m in cli_main.COMMANDS] + list(PLUGINS):
        added = _registered(module_name)
        assert len(added) == 1, (module_name, sorted(added))
        (name, parser), = added.items()
        handler = parser.get_default("func")
        assert callable(handler) and handler.__module__ == module_name, (module_name, handler)
        names.append(name)
    top = list(next(a for a in cli_main.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices)
    assert top[:len(cli_main.COMMANDS)] == names[:len(cli_main.COMMANDS)]  # --help lists them in COMMANDS' order
    assert set(names) == set(top)  # and the installed plugins are exactly the plugin modules


def test_building_the_parser_loads_no_heavy_package() -> None:
    code = ("import sys; from pr1_eval.cli.main import build_parser; build_parser(); "
            "heavy = ('torch', 'transformers', 'pyarrow', 'pandas', 'numpy', 'scipy', 'streamlit', 'plotly', "
            "'math_verify', 'pr1_eval.testing', 'pr1_eval.store', 'pr1_eval.grading'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_choices_come_from_their_owners() -> None:
    from analysis.common.completeness import INCLUDE_FLAG
    from analysis.leaderboard.board import AVERAGES
    from pr1_eval.cli.import_run import FORMATS
    from pr1_eval.records.training import KIND_DIRS

    def choices(module: str, option: str) -> list[str]:
        (parser,) = _registered(module).values()
        action = next(a for a in parser._actions if option in a.option_strings)
        return list(action.choices or [])

    assert choices("analysis.leaderboard.command", "--average") == list(AVERAGES)
    assert choices("pr1_eval.cli.import_verl", "--kind") == list(KIND_DIRS)
    assert choices("pr1_eval.cli.import_run", "--format") == list(FORMATS) == ["jsonl", "lm-eval", "parallel-probe"]
    for plugin in ("analysis.command", "analysis.leaderboard.command"):  # the flag the notes tell users to pass
        (parser,) = _registered(plugin).values()
        assert any(INCLUDE_FLAG in a.option_strings for a in parser._actions), plugin
