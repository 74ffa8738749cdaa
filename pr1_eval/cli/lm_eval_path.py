"""``pr1-eval lm-eval-path``: where pr1-eval's lm-evaluation-harness tasks are, for ``--include_path``."""

from __future__ import annotations

import argparse

from pr1_eval.cli.help import add_command
from pr1_eval.lm_eval_tasks import include_path

SUMMARY = "print the --include_path for lm-evaluation-harness"
DESCRIPTION = "Print the folder of pr1-eval's lm-evaluation-harness tasks, for lm_eval --include_path."
EXAMPLES = "  lm_eval --include_path $(pr1-eval lm-eval-path) --tasks pr1_aime24 ..."


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "lm-eval-path", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.set_defaults(func=_cmd_lm_eval_path)


def _cmd_lm_eval_path(args: argparse.Namespace) -> int:
    print(include_path())
    return 0
