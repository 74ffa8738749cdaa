"""How ``--help`` reads: user-facing descriptions with an example, defaults shown, 80 columns at most.

Why: ``--help`` is the first thing a new user reads, so it speaks to them, not to developers
(a module docstring is no description), and argparse alone wraps to the terminal's width (a
wide terminal gets lines of any length) and shows no defaults. Every parser of ``pr1-eval`` and
``pr1-repro`` (plugins included: they are built through the same subparsers action, so they get
the same parser class) uses :class:`HelpFormatter`:

- at most :data:`MAX_WIDTH` columns, whatever the terminal (narrower terminals get narrower text);
- descriptions and epilogs keep their paragraphs; an indented line (an example command) is kept
  as written, other paragraphs are re-wrapped;
- an option with a default says ``(default: X)`` unless its help already names its default.

Each command writes its summary, description and examples beside its parser (its module under
:mod:`pr1_eval.cli`, or a plugin's command module) and adds itself with :func:`add_command`.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import Any

MAX_WIDTH = 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, capped at 80 columns, keeping examples, showing defaults (see module doc)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 28,
                 width: int | None = None) -> None:
        columns = width if width is not None else shutil.get_terminal_size((MAX_WIDTH, 24)).columns
        super().__init__(prog, indent_increment, max_help_position, min(columns, MAX_WIDTH) - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = textwrap.dedent(text).strip("\n").split("\n\n")
        out = []
        for paragraph in paragraphs:
            lines = paragraph.splitlines()
            if any(line.startswith((" ", "\t")) for line in lines):  # examples (and their heading): as written
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(paragraph.split()), width, initial_indent=indent,
                                         subsequent_indent=indent))
        return "\n\n".join(out)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or isinstance(default, bool) or default == argparse.SUPPRESS
                or not action.option_strings or action.required):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help uses :class:`HelpFormatter` (subparsers inherit the class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


TOP = """\
Evaluate models that think in parallel (Parallel-R1): generate k samples per
problem, grade them with math-verify and the paper's checker, and report
Mean@k and Pass@k; analyse, rank and browse the runs.

Start here:
  pr1-eval demo              # the whole pipeline on a tiny model, on CPU
  pr1-eval run --model MODEL --tasks aime24,amc23 -k 16
  pr1-eval report runs/RUN

Run `pr1-eval COMMAND --help` for the options of one command."""

def add_command(subparsers: argparse._SubParsersAction, name: str, *, summary: str, description: str,
                examples: str) -> argparse.ArgumentParser:
    """Add command ``name``: ``summary`` is its line in ``pr1-eval --help``; ``description`` (what it
    does, for a user) and ``examples`` (indented command lines, kept as written) head and end its own
    ``--help``. Every command is added through here, so none lacks a description or an example."""
    if not examples.strip() or not all(line.startswith("  ") for line in examples.splitlines()):
        raise ValueError(f"{name}: examples are command lines indented by two spaces")
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=summary, description=description, epilog=f"examples:\n{examples}", formatter_class=HelpFormatter)
    return parser
