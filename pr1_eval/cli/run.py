"""``pr1-eval run``: generate, grade and store k samples per problem, then print the report."""

from __future__ import annotations

import argparse

from pr1_eval.cli.help import add_command
from pr1_eval.cli.options import add_generation_options, run_config

SUMMARY = "generate, grade and store k samples per problem"
DESCRIPTION = ("Generate k samples per problem of each task, grade them and store them as a run folder "
               "(samples.parquet + run.json), then print the report. Work is saved chunk by chunk: rerun the "
               "same command to resume a stopped run. A folder holding a run with other settings is refused.")
EXAMPLES = ("  pr1-eval run --model Qwen/Qwen3-1.7B --tasks aime24,amc23 -k 16\n"
            "  pr1-eval run --model ckpt/hf --tasks all --decoding forkjoin --out runs/fj")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "run", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("--model", required=True, help="model folder (Hugging Face layout) or hub id (org/name)")
    p.add_argument("--tasks", required=True, metavar="TASKS",
                   help="comma-separated: aime24, aime25, amc23, math500, math300_pr1, gsm8k; 'all' is every one "
                        "but gsm8k")
    add_generation_options(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="run folder (default runs/<model>-<decoding>-k<k>-seed<seed>)")
    p.add_argument("--revision", default=None, metavar="REV", help="hub revision (branch, tag or commit) of --model")
    p.add_argument("--step", type=int, default=None, metavar="N", help="checkpoint step (default: parsed from global_step_N)")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    from pr1_eval.cli.report import print_report
    from pr1_eval.generate.runner import run_eval

    out = run_eval(run_config(args))
    print_report(out)
    _print_scaleout_note(out)
    return 0


def _print_scaleout_note(run_dir: object) -> None:
    from pr1_eval.scaleout import summary_note

    note = summary_note(str(run_dir))
    if note:
        print(note)
