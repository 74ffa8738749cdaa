"""``pr1-repro add-tokens``: make the six tags single special tokens of a base model."""

from __future__ import annotations

import argparse

from pr1_eval.errors import Pr1EvalError
from repro.cli.inputs import model_problem
from repro.tokens import add_tokens


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("add-tokens", help="make the six tags single special tokens of a base model",
                       description="Copy a base model and make <Parallel>, </Parallel>, <Path>, </Path>, <Summary> and "
                                   "</Summary> single special tokens of its tokenizer (reusing free embedding rows, "
                                   "else resizing the embeddings).",
                       epilog="example:\n  pr1-repro add-tokens Qwen/Qwen3-4B-Base models/qwen3-4b-tags")
    p.add_argument("base", metavar="BASE", help="base model folder or hub id")
    p.add_argument("out", metavar="OUT", help="folder for the model with the tags")
    p.add_argument("--dtype", default="auto", help="dtype the base model is loaded in (auto: as saved)")
    p.set_defaults(func=cmd_add_tokens)


def cmd_add_tokens(args: argparse.Namespace, extra: list[str]) -> int:
    problem = model_problem(args.base)
    if problem:
        raise Pr1EvalError(f"base {problem}; pass a local model folder or a hub id")
    report = add_tokens(args.base, args.out, dtype=args.dtype)
    print(f"tags {report.tag_ids}; added {len(report.added)}, already present {len(report.already_present)}")
    how = (
        "reused free embedding rows"
        if report.reused_free_rows
        else "resized embeddings"
        if report.resized
        else "no new rows"
    )
    print(f"embedding rows {report.rows_before} → {report.rows_after} ({how}); saved to {report.out}")
    return 0
