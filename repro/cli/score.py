"""``pr1-repro score``: evaluate every checkpoint with ``pr1-eval sweep``, one run per step."""

from __future__ import annotations

import argparse
from pathlib import Path

from pr1_eval.cli import main as pr1_eval_cli
from pr1_eval.decoding.factory import DECODING_MODES
from pr1_eval.inputs.checkpoints import discover_checkpoints
from pr1_eval.protocol.paper_settings import PAPER_K
from pr1_eval.records.steps import family_name
from repro import stages


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="evaluate every checkpoint with pr1-eval sweep, one run per step",
                       description="Score every checkpoint under CKPT_ROOT with `pr1-eval sweep`, one run per step "
                                   "(VERL shards are merged first). Arguments after a lone -- go to pr1-eval sweep.",
                       epilog="example:\n  pr1-repro score checkpoints/rl_gsm8k -k 16 -- --limit 10")
    p.add_argument("ckpt_root", metavar="CKPT_ROOT", help="folder holding the global_step_N checkpoints")
    p.add_argument("--tasks", default="aime24,aime25,amc23,math500", help="comma-separated tasks")
    p.add_argument("-k", type=int, default=PAPER_K, help="samples per problem")
    p.add_argument("--decoding", default=DECODING_MODES[0], choices=DECODING_MODES,
                   help="decoding mode, as in pr1-eval run")
    p.add_argument("--out-root", default="runs", metavar="DIR", help="where the runs go, one folder per step")
    p.add_argument("--name", default=None,
                   help="the training job's name, the runs' name prefix (default: the checkpoint folder's name)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the pr1-eval sweep command and what it would do with each checkpoint; run nothing")
    p.set_defaults(func=cmd_score)


def sweep_argv(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The ``pr1-eval sweep`` that ``score`` is: its options, then the ones after ``--``."""
    family = ["--family", args.name] if args.name else []
    return ["sweep", args.ckpt_root, "--tasks", args.tasks, "-k", str(args.k), "--decoding", args.decoding,
            "--out-root", args.out_root, *family, *extra]


def cmd_score(args: argparse.Namespace, extra: list[str]) -> int:
    """``pr1-eval sweep`` over the checkpoints (it merges VERL shards first, when VERL is here)."""

    argv = sweep_argv(args, extra)
    if not args.dry_run:
        return pr1_eval_cli.main(argv)
    print(stages.shell(["pr1-eval", *argv]))
    options = pr1_eval_cli.build_parser().parse_args(argv)
    family = options.family or family_name(args.ckpt_root)
    for c in discover_checkpoints(args.ckpt_root):
        out = Path(options.out_root) / c.run_name(family, options.decoding, options.k, options.seed)
        if c.problem:
            print(f"# {c.label}: skipped: {c.problem}")
        elif c.needs_merge:
            print(f"# {c.label}: merged first into {c.model_dir} (pr1-repro merge {c.path}), then scored into {out}")
        else:
            print(f"# {c.label}: {c.model_dir} -> {out}")
    return 0
