"""``pr1-repro sft-cpu``: the official SFT stage on a CPU for a real small model (:mod:`repro.cpu_sft`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pr1_eval.cli.numbers import positive_int
from pr1_eval.errors import Pr1EvalError
from repro.cpu_sft import SCHEDULES, CpuSftPlan, run_cpu_sft, summary_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sft-cpu", help="the SFT stage on a CPU for a small real model (SmolLM2-135M)",
                       description="Run `pr1-repro run sft` (VERL's own SFT trainer, the stage config a GPU user runs) "
                                   "on this machine's CPU with the nano job's CPU overrides, on the first --rows "
                                   "Parallel-GSM8K rows that fit --max-length, saving --checkpoints checkpoints, and "
                                   "merge every one to an HF folder. Prints VERL's loss per step; OUT/sft_cpu.json "
                                   "holds every figure, OUT/logs/ the whole logs.",
                       epilog="example:\n  pr1-repro model smollm2 --out models/smollm2-tags\n"
                              "  pr1-repro data --out repro_data\n"
                              "  pr1-repro sft-cpu --model models/smollm2-tags --data-dir repro_data \\\n"
                              "      --out ckpt/smollm2-sft --rows 80 --max-length 640 --steps 40 \\\n"
                              "      --lr 5e-4 --schedule constant")
    p.add_argument("--model", required=True, help="HF checkpoint with the six tags (pr1-repro model / add-tokens)")
    p.add_argument("--out", required=True, metavar="DIR", help="checkpoint folder (global_step_N, merged to …/hf)")
    p.add_argument("--data-dir", default="repro_data", metavar="DIR", help="folder written by `pr1-repro data`")
    p.add_argument("--rows", type=positive_int, default=None, help="train on the first N rows that fit (default: all)")
    p.add_argument("--max-length", type=positive_int, default=1024, metavar="TOKENS",
                   help="rows longer than this are left out, never cut (default 1024; the paper's 4096)")
    p.add_argument("--batch", type=positive_int, default=4, help="rows per optimiser step (the paper's 128)")
    p.add_argument("--steps", type=positive_int, default=None, help="optimiser steps (default: one epoch)")
    p.add_argument("--checkpoints", type=positive_int, default=4, help="checkpoints to save, evenly spaced")
    p.add_argument("--lr", type=float, default=1e-4, help="peak learning rate after a 10%% warm-up (paper 1e-5)")
    p.add_argument("--schedule", choices=SCHEDULES, default="cosine",
                   help="learning rate after the warm-up: cosine to 0 at the last step (the paper's) or constant")
    p.set_defaults(func=cmd_sft_cpu)


def cmd_sft_cpu(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise Pr1EvalError(f"sft-cpu takes no arguments after `--` (got {' '.join(extra)})")
    if not Path(args.model).is_dir():
        raise Pr1EvalError(f"--model {args.model}: no such folder; write it with `pr1-repro model smollm2 --out DIR`")
    plan = CpuSftPlan(args.rows, args.max_length, args.batch, args.steps, args.checkpoints, args.lr, args.schedule)
    report = run_cpu_sft(args.model, Path(args.out), Path(args.data_dir), plan)
    print(summary_table(report))
    return 0
