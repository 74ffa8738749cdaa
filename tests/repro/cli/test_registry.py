"""``pr1-repro``'s commands: one module each under :mod:`repro.cli` (parser and handler), each
registered once, in the order ``--help`` lists them; and ``python -m repro.cli`` (how the nano
curriculum and the GPU check run stages) is the same command."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from repro.cli import main as cli_main

CLI = Path(cli_main.__file__).parent
ROOT = CLI.parents[1]
NOT_COMMANDS = {"__init__", "__main__", "main", "inputs"}


def test_every_command_module_is_registered_once() -> None:
    modules = {path.stem for path in CLI.glob("*.py")} - NOT_COMMANDS
    assert {m.__name__.rpartition(".")[2] for m in cli_main.COMMANDS} == modules  # no module left out
    assert len(set(cli_main.COMMANDS)) == len(cli_main.COMMANDS)


def test_each_module_adds_one_command_whose_handler_it_holds_in_help_order() -> None:
    names = []
    for module in cli_main.COMMANDS:
        subparsers = cli_main.OneLineParser(prog="pr1-repro").add_subparsers(dest="command")
        module.register(subparsers)
        (name, parser), = subparsers.choices.items()
        handler = parser.get_default("func")
        assert callable(handler) and handler.__module__ == module.__name__, (module.__name__, handler)
        names.append(name)
    top = list(next(a for a in cli_main.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices)
    assert top == names == ["model", "add-tokens", "data", "stages", "run", "sft-cpu", "merge", "score", "nano"]


def test_python_dash_m_is_the_console_command() -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "repro.cli", *argv], capture_output=True, text=True,
                              check=False, cwd=ROOT)

    stages = run("stages")
    assert stages.returncode == 0, stages.stderr
    assert stages.stdout.split()[0] == "sft"
    usage = run("run")
    assert usage.returncode == 2 and usage.stderr.strip().endswith("(see `pr1-repro run --help`)")
