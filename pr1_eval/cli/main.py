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

Every failure prints at least one line on stderr (an exit status with nothing said is a defect):
a full disk that no writer translated names the command's own target (its ``RUN``/``--out``
folder, never the working folder); any other ``OSError`` is one line with its file and reason
(exit 2); any other exception is an internal error: one line with its type, message and where it
was raised, exit 70 (``EX_SOFTWARE``: neither a user error, 2, nor a partial result, 1).
``PR1_EVAL_TRACEBACK=1`` lets the traceback through, for whoever debugs it.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import NoReturn

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
from pr1_eval.errors import Pr1EvalError, describe_exception, is_disk_full, no_space
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


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``pr1-eval`` program (its console script, ``python -m pr1_eval``): :func:`main`, then the
    process ends with its status. In a process that goes on (tests, notebooks), call :func:`main`.

    Why not ``main`` itself: before the interpreter's teardown, every object left is moved out of
    the cyclic collector's reach (``gc.freeze``), so the teardown does not collect, cycle by cycle,
    the modules, classes and tables it is about to drop with the process: a tenth of a second
    after a sweep's ``analyze`` had printed everything (``docs/performance.md``, "(i57, the idle
    start)"). Objects without cycles are still freed and their files closed as before, and
    ``atexit`` handlers still run; what is skipped is only what Python never promises at exit
    (``__del__`` of objects still alive in cycles)."""
    status = main(argv)
    gc.freeze()
    raise SystemExit(status)


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
        if isinstance(exc, BrokenPipeError) or os.environ.get(TRACEBACK_ENV) == "1":
            raise  # a closed pipe: main() ends quietly (141)
        if not is_disk_full(exc):
            print(f"error: {terminal_text(_os_error_line(exc))}", file=sys.stderr)
            return 2
        where = Path(exc.filename).parent if isinstance(exc.filename, str) else command_target(args)
        print(f"error: {terminal_text(no_space(where))}", file=sys.stderr)  # still one line
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished chunks are saved — rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence: said in one line, never silent
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(f"error: internal error in pr1-eval {terminal_text(args.command)}: "
              f"{terminal_text(describe_exception(exc))} (at {_raised_at(exc)}); this is a bug: rerun with "
              f"{TRACEBACK_ENV}=1 for the traceback and report it",
              file=sys.stderr)
        return INTERNAL_ERROR


#: Set to ``1`` to see the traceback of an unexpected error instead of its one line.
TRACEBACK_ENV = "PR1_EVAL_TRACEBACK"
#: The exit status of an internal error (``EX_SOFTWARE`` of sysexits.h).
INTERNAL_ERROR = 70


def command_target(args: argparse.Namespace) -> Path:
    """The folder a command writes or reads: its ``RUN``, ``--out`` or first ``RUN_OR_ROOT``;
    the working folder only for a command with none of them."""
    for name in ("run", "out", "runs", "run_dir"):
        value = getattr(args, name, None)
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if isinstance(value, (str, Path)) and str(value):
            return Path(value)
    return Path.cwd()


def _os_error_line(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename is not None else ""
    reason = exc.strerror or describe_exception(exc)
    return (f"cannot access{where}: {reason.lower()}; check that the path exists and that you may read "
            "(or write) it")


def _raised_at(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "an unknown place"
    return f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"


if __name__ == "__main__":
    entry()
