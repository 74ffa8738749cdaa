"""``pr1-repro``: build data, add tokens, run a stage (or print it), merge checkpoints, score them.

    pr1-repro add-tokens BASE OUT
    pr1-repro data [--out DIR] [--training-dir DIR]
    pr1-repro stages
    pr1-repro run STAGE --model PATH [--nodes N --gpus-per-node G] [--data-dir DIR] [--dry-run] [-- hydra overrides]
    pr1-repro merge CKPT_DIR [--dry-run]
    pr1-repro score CKPT_ROOT [--tasks ...] [-k 16] [--decoding ...] [--dry-run] [-- pr1-eval args]

Errors the user can fix print one line and exit 2.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from repro import checkpoints, stages


def _split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """Arguments after a lone ``--`` are passed through (Hydra overrides, pr1-eval options)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def cmd_add_tokens(args: argparse.Namespace, extra: list[str]) -> int:
    from repro.tokens import add_tokens

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


def cmd_data(args: argparse.Namespace, extra: list[str]) -> int:
    from repro.data import Sources, build_all

    def path(value: str | None) -> Path | None:
        return Path(value).expanduser() if value else None

    sources = Sources(
        path(args.training_dir),
        path(args.benchmarks_dir),
        path(args.sft),
        path(args.gsm8k),
        path(args.dapo),
        args.keep_truncated,
    )
    reports = build_all(Path(args.out), sources, args.prompt)
    for report in reports:
        print(report.line())
        for why, examples in report.examples.items():
            print(f"  {why}: " + "; ".join(examples[:5]) + (" …" if len(examples) > 5 else ""))
        print(f"  → {report.path}")
    return 0


def cmd_stages(args: argparse.Namespace, extra: list[str]) -> int:
    for stage in stages.STAGES.values():
        kind = "structured" if stage.structured else "causal"
        print(f"{stage.name:13} {stage.kind:4} {kind:10} from {stage.start_from:18} {stage.paper}")
    return 0


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.stage not in stages.STAGES:
        raise SystemExit(f"unknown stage {args.stage!r}; choose one of {', '.join(stages.STAGES)}")
    flags = [e for e in extra if e.startswith("-")]
    if flags:
        raise SystemExit(
            f"after `--` come Hydra overrides (key=value), not options: {' '.join(flags)}; put options before `--`"
        )
    req = stages.RunRequest(
        stage=stages.STAGES[args.stage],
        model=args.model,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        data_dir=args.data_dir,
        out_dir=args.out,
        experiment=args.experiment,
        extra=tuple(extra),
        ray_address=args.ray_address,
    )
    cmd = stages.command(req)
    print("# command")
    print(stages.shell(cmd))
    if args.dry_run:
        print("# resolved config")
        print(stages.resolved_yaml(req))
        return 0
    return subprocess.call(stages.executable(cmd, req), env=stages.local_env())


def cmd_merge(args: argparse.Namespace, extra: list[str]) -> int:
    steps = checkpoints.find_steps(Path(args.ckpt_dir))
    if not steps:
        raise SystemExit(f"no global_step_N folders in {args.ckpt_dir}")
    status = 0
    for step in steps:
        if step.is_merged and not args.force:
            print(f"# step {step.step}: already merged at {step.merged}")
            continue
        cmd = checkpoints.merge_command(step)
        print(stages.shell(cmd))
        if not args.dry_run:
            status = status or subprocess.call(cmd, env=stages.local_env())
    return status


def cmd_score(args: argparse.Namespace, extra: list[str]) -> int:
    root = Path(args.ckpt_root)
    merged = [s for s in checkpoints.find_steps(root) if s.is_merged]
    if not merged:
        raise SystemExit(
            f"no merged checkpoints (global_step_N/{checkpoints.MERGED}) under {root}; run `pr1-repro merge {root}` first"
        )
    req = checkpoints.ScoreRequest(args.tasks, args.k, args.decoding, args.out_root, args.name, tuple(extra))
    name = args.name or root.resolve().name
    status = 0
    for step in merged:
        cmd = checkpoints.score_command(step, req, name)
        print(stages.shell(cmd))
        if not args.dry_run:
            status = status or subprocess.call(cmd)
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pr1-repro", description="Train Parallel-R1 checkpoints with VERL and score them."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("add-tokens", help="make the six tags single special tokens of a base model")
    p.add_argument("base")
    p.add_argument("out")
    p.add_argument("--dtype", default="auto")
    p = sub.add_parser("data", help="build the VERL parquet files from the shared training data")
    p.add_argument("--out", default="repro_data")
    p.add_argument("--training-dir", default=None, help="default: $PR1_TRAINING_DIR, else ../shared/data/training")
    p.add_argument("--benchmarks-dir", default=None, help="for the validation set; default: $PR1_DATA_DIR, else shared")
    p.add_argument("--sft", default=None, help="Parallel-GSM8K JSONL (id, problem, answer, response)")
    p.add_argument("--gsm8k", default=None, help="GSM8K train, pr1 JSONL or RL parquet")
    p.add_argument("--dapo", default=None, help="DAPO-Math-17k: the original hub parquet/JSONL keeps problems whole")
    p.add_argument("--keep-truncated", action="store_true", help="keep DAPO problems that end mid-statement (':')")
    p.add_argument("--prompt", default="parallel_r1_v3")
    sub.add_parser("stages", help="list the stages")
    p = sub.add_parser("run", help="run one stage with VERL (or print it with --dry-run)")
    p.add_argument("stage")
    p.add_argument("--model", required=True, help="HF checkpoint to start from")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument(
        "--data-dir", default=None, help="folder written by `pr1-repro data` (default: $PR1_REPRO_DATA or ./repro_data)"
    )
    p.add_argument("--out", default=None, help="checkpoint folder (trainer.default_local_dir)")
    p.add_argument("--experiment", default=None)
    p.add_argument("--ray-address", default=None, help="multi-node: Ray dashboard address (default $RAY_ADDRESS)")
    p.add_argument("--dry-run", action="store_true", help="print the command and the resolved config; run nothing")
    p = sub.add_parser("merge", help="convert VERL FSDP checkpoints to HF with VERL's model merger")
    p.add_argument("ckpt_dir")
    p.add_argument("--force", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p = sub.add_parser("score", help="evaluate every merged checkpoint with pr1-eval, one run per step")
    p.add_argument("ckpt_root")
    p.add_argument("--tasks", default="aime24,aime25,amc23,math500")
    p.add_argument("-k", type=int, default=16)
    p.add_argument("--decoding", default="sequential", choices=["sequential", "forkjoin", "structured"])
    p.add_argument("--out-root", default="runs")
    p.add_argument("--name", default=None, help="run-name prefix (default: the checkpoint folder's name)")
    p.add_argument("--dry-run", action="store_true")
    return parser


COMMANDS = {
    "add-tokens": cmd_add_tokens,
    "data": cmd_data,
    "stages": cmd_stages,
    "run": cmd_run,
    "merge": cmd_merge,
    "score": cmd_score,
}


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``pr1-repro``)."""
    own, extra = _split_extra(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(own)
    try:
        return COMMANDS[args.command](args, extra)
    except (FileNotFoundError, ValueError) as error:
        print(f"pr1-repro: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
