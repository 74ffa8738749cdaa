"""``pr1-repro data``: build the VERL parquet files from the training sets and the benchmarks."""

from __future__ import annotations

import argparse
from pathlib import Path

from repro.data import Sources, build_all


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="build the VERL parquet files from the training sets and the benchmarks",
                       description="Build the parquet files the stages read: SFT on Parallel-GSM8K, RL on GSM8K "
                                   "train and DAPO-Math-17k, and the paper's validation mix (AIME24/25, AMC23 x16, "
                                   "MATH300 x1). Every input is checked before anything is written; a malformed row "
                                   "is named by file and line.",
                       epilog="example:\n  pr1-repro data --training-dir shared/data/training --out repro_data")
    p.add_argument("--out", default="repro_data", metavar="DIR", help="folder the parquet files are written to")
    p.add_argument("--training-dir", default=None, help="default: $PR1_TRAINING_DIR, else shared/data/training beside the checkout")
    p.add_argument("--benchmarks-dir", default=None, help="validation benchmarks; default: $PR1_DATA_DIR, else the packaged copy")
    p.add_argument("--sft", default=None, help="Parallel-GSM8K JSONL: id, problem, answer and the --sft-text field "
                   "(default: parallel_gsm8k_sft.jsonl, or parallel_gsm8k.jsonl with --sft-text released)")
    p.add_argument("--sft-text", choices=("official", "released"), default="official",
                   help="SFT response text: official = sft_answer, the text the official SFT trained on "
                        "(extra_info.answer of its SFT parquet); released = the released Parallel-GSM8K response")
    p.add_argument("--gsm8k", default=None, help="GSM8K train, pr1 JSONL or RL parquet")
    p.add_argument("--dapo", default=None, help="DAPO-Math-17k: the original hub parquet/JSONL keeps problems whole")
    p.add_argument("--keep-truncated", action="store_true", help="keep DAPO problems that end mid-statement (':')")
    p.add_argument("--prompt", default="parallel_r1_v3", metavar="NAME|FILE", help="prompt template of every row")
    p.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace, extra: list[str]) -> int:

    def path(value: str | None) -> Path | None:
        return Path(value).expanduser() if value else None

    sources = Sources(
        path(args.training_dir),
        path(args.benchmarks_dir),
        path(args.sft),
        path(args.gsm8k),
        path(args.dapo),
        args.keep_truncated,
        args.sft_text,
    )
    reports = build_all(Path(args.out), sources, args.prompt)
    for report in reports:
        print(report.line())
        for why, examples in report.examples.items():
            print(f"  {why}: " + "; ".join(examples[:5]) + (" …" if len(examples) > 5 else ""))
        print(f"  → {report.path}")
    return 0
