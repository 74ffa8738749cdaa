"""``pr1-eval sweep``: score every checkpoint of a training job, one run per step.

The sweep's options and its work are :mod:`pr1_eval.generate.sweep`'s; this module gives the
command its user-facing help and its handler.
"""

from __future__ import annotations

import argparse

from pr1_eval.generate.sweep import add_parser, run_sweep

DESCRIPTION = ("Score every checkpoint of a training job (global_step_N folders), one run per step, with "
               "run's options; finished steps are skipped, and a table of mean@k per step is printed at the end.")
EXAMPLES = "  pr1-eval sweep checkpoints/ --tasks aime24,amc23 -k 16 --every 100"


def register(subparsers: argparse._SubParsersAction) -> None:
    add_parser(subparsers)
    parser = subparsers.choices["sweep"]
    parser.description = DESCRIPTION
    parser.epilog = f"examples:\n{EXAMPLES}"
    parser.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    return int(run_sweep(args))
