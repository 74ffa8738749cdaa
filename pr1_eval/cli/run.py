"""``pr1-eval run``: generate, grade and store k samples per problem, then print the report.

The handler plans the run (every input read and checked before a model loads), executes the
plan and prints the report. The heavy imports (the runner, the engines) load when it runs, so
``pr1-eval --help`` stays fast.
"""

from __future__ import annotations

import argparse

from pr1_eval.cli import report
from pr1_eval.cli.help import add_command
from pr1_eval.cli.numbers import step_int
from pr1_eval.cli.options import add_generation_options, add_tasks_option, run_config
from pr1_eval.report.tracking import add_tracking_options, check_installed, log_runs, vars_for_log
from pr1_eval.scaleout import summary_note

SUMMARY = "generate, grade and store k samples per problem"
DESCRIPTION = ("Generate k samples per problem of each task, grade them and store them as a run folder "
               "(samples.parquet + run.json), then print the report. Work is saved chunk by chunk: rerun the "
               "same command to resume a stopped run. A folder holding a run with other settings is refused.")
EXAMPLES = ("  pr1-eval run --model Qwen/Qwen3-1.7B --tasks aime24,amc23 -k 16\n"
            "  pr1-eval run --model ckpt/hf --tasks all --decoding forkjoin --out runs/fj\n"
            "  pr1-eval run --model base --tasks gsm8k --family sft-job --step 0")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``run`` to ``pr1-eval``'s commands."""
    p = add_command(subparsers, "run", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("--model", required=True, help="model folder (Hugging Face layout) or hub id (org/name)")
    add_tasks_option(p)
    add_generation_options(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="run folder (default runs/<model>-<decoding>-k<k>-seed<seed>)")
    p.add_argument("--revision", default=None, metavar="REV", help="hub revision (branch, tag or commit) of --model")
    p.add_argument("--step", type=step_int, default=None, metavar="N",
                   help="checkpoint step (default: parsed from global_step_N)")
    p.add_argument("--family", default=None, metavar="NAME",
                   help="the training job this checkpoint belongs to, as `sweep --family` names it: `analyze` then "
                        "puts the run in that job's drift over steps (e.g. the base model as step 0: "
                        "--family JOB --step 0)")
    add_tracking_options(p)
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Plan, run, report; a ``--ray`` run ends with a line on how its replicas fared."""
    from pr1_eval.generate.runner import run_eval

    check_installed(getattr(args, "log_to", None))  # a tracker not installed: refused before the model loads
    out = run_eval(run_config(args))
    report.print_report(out)
    note = summary_note(str(out))
    if note:
        print(note)
    log_runs(args, [out], name=out.name, config={"command": "run", "run": str(out), **vars_for_log(args)})
    return 0
