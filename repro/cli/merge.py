"""``pr1-repro merge``: convert VERL FSDP checkpoints to Hugging Face folders with VERL's merger."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from repro import checkpoints, stages


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="convert VERL FSDP checkpoints to HF with VERL's model merger",
                       description="Convert every global_step_N FSDP checkpoint under CKPT_DIR to a Hugging Face "
                                   "folder with VERL's model merger, so pr1-eval can score it.",
                       epilog="example:\n  pr1-repro merge checkpoints/rl_gsm8k")
    p.add_argument("ckpt_dir", metavar="CKPT_DIR", help="folder holding global_step_N checkpoints")
    p.add_argument("--force", action="store_true", help="merge again the steps that are already merged")
    p.add_argument("--dry-run", action="store_true", help="print the merge commands; run nothing")
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace, extra: list[str]) -> int:
    if not Path(args.ckpt_dir).is_dir():
        raise Pr1EvalError(f"{args.ckpt_dir}: no such folder; pass the trainer's checkpoint folder (trainer.default_local_dir)")
    steps = checkpoints.find_steps(Path(args.ckpt_dir))
    if not steps:
        raise Pr1EvalError(f"no global_step_N folders in {args.ckpt_dir}; pass the folder that holds them")
    status = 0
    for step in steps:
        if step.is_merged and not args.force:
            print(f"# step {step.step}: already merged at {step.model_dir}")
            continue
        cmd = checkpoints.merge_command(step)
        print(stages.shell(cmd))
        if not args.dry_run:
            status = status or subprocess.call(cmd, env=stages.local_env())
    return status
