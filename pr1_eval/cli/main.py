"""``pr1-eval``: the registry of its commands, and what every command shares (errors, closed pipes).

One module per command under :mod:`pr1_eval.cli` holds that command's parser, help and handler
and exposes ``register(subparsers)``; :data:`COMMANDS` lists them in the order ``pr1-eval
--help`` shows them. A command module imports its work inside its handler, so building the
parser (every start, ``--help`` included) loads no torch, pyarrow or grader.

Plugins: ``analyze``, ``leaderboard`` and ``dashboard`` belong to ``analysis`` and
``dashboards``, packages built on ``pr1_eval`` that ``pr1_eval`` must not import (dependencies
point one way: ``tests/test_architecture.py``). So they are not in :data:`COMMANDS`: each
registers itself through the ``pr1_eval.commands`` entry-point group (pyproject.toml), one
module per command with a ``register(subparsers)`` like the modules here.

User errors print one clear line and exit with status 2, never a traceback. Output piped into a
reader that stops early (``pr1-eval report RUN | head``) ends quietly: the closed pipe is handled
once here, for every command (plugins run through :func:`main` too), with the exit status a
command killed by SIGPIPE has (141). Help texts: :mod:`pr1_eval.cli.help`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from pr1_eval.cli import (
    demo,
    import_run,
    import_verl,
    lm_eval_path,
    merge,
    regrade,
    report,
    run,
    sweep,
    tiny_model,
)
from pr1_eval.cli.help import TOP, Parser
from pr1_eval.errors import Pr1EvalError, is_disk_full, no_space
from pr1_eval.terminal import terminal_text

#: pr1-eval's own commands, in the order ``--help`` lists them (plugins follow).
COMMANDS: tuple[ModuleType, ...] = (run, sweep, merge, report, regrade, import_run, tiny_model, demo, lm_eval_path,
                                    import_verl)
PLUGIN_GROUP = "pr1_eval.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pr1-eval", description=TOP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands",
                                parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    _register_plugins(sub)
    return parser


def _register_plugins(sub: argparse._SubParsersAction) -> None:
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            entry.load()(sub)
        except ImportError as exc:
            print(f"warning: command {entry.name!r} unavailable ({exc})", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _main(argv)
        sys.stdout.flush()  # inside the try: a reader gone before the last buffered write is the same case
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return 141


def _quiet_stdout() -> None:
    """The reader of stdout is gone: point stdout at /dev/null so the interpreter's final flush
    does not raise a second BrokenPipeError on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to flush
        pass


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except Pr1EvalError as exc:
        print(f"error: {terminal_text(exc)}", file=sys.stderr)  # errors quote data (names, paths): shown, never run
        return 2
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        where = Path(exc.filename).parent if isinstance(exc.filename, str) else Path.cwd()
        print(f"error: {no_space(where)}", file=sys.stderr)  # a writer without its own message: still one line
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished chunks are saved — rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
