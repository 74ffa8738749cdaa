"""``pr1-repro``: build data, add tokens, run a stage (or print it), merge checkpoints, score them.

    pr1-repro add-tokens BASE OUT
    pr1-repro data [--out DIR] [--training-dir DIR]
    pr1-repro stages
    pr1-repro run STAGE --model PATH [--nodes N --gpus-per-node G] [--data-dir DIR] [--dry-run]
                  [--rollout-runs DIR] [--rollout-every N] [--no-rollout-runs] [-- hydra overrides]
    pr1-repro merge CKPT_DIR [--dry-run]
    pr1-repro score CKPT_ROOT [--tasks ...] [-k 16] [--decoding ...] [--dry-run] [-- pr1-eval sweep args]
    pr1-repro nano [--out DIR] [--plan full|ci] [--no-score] [--fresh]

Every error prints one line (``pr1-repro: …`` saying what, where and how to fix) and exits 2,
never a traceback: a training launch that dies in a stack trace after minutes of cluster setup
is the expensive way to learn a path was wrong. ``run`` therefore checks the model and data
paths the stage would read before it launches anything; ``--dry-run`` prints the command and
config and then the same checks (exit 2 when something is missing). Set ``PR1_DEBUG=1`` to get
the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

from pr1_eval.cli import main as pr1_eval_cli
from pr1_eval.cli.help import Parser
from pr1_eval.decoding.factory import DECODING_MODES
from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.checkpoints import discover_checkpoints
from pr1_eval.protocol.paper_settings import PAPER_K
from pr1_eval.records.steps import family_name
from repro import checkpoints, stages
from repro.data import Sources, build_all
from repro.tokens import add_tokens

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class OneLineParser(Parser):
    """argparse, but a usage error is one line (with where to read the usage) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """Arguments after a lone ``--`` are passed through (Hydra overrides, pr1-eval options)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def cmd_add_tokens(args: argparse.Namespace, extra: list[str]) -> int:

    problem = _model_problem(args.base)
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


def cmd_stages(args: argparse.Namespace, extra: list[str]) -> int:
    for stage in stages.STAGES.values():
        kind = "structured" if stage.structured else "causal"
        print(f"{stage.name:13} {stage.kind:4} {kind:10} from {stage.start_from:18} {stage.paper}")
    return 0


def _as_paths(value: Any) -> list[str]:
    """A config's file entry (None, one path, or a list of paths) as a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _model_problem(model: str) -> str | None:
    """Why ``model`` cannot be loaded, or None. A missing path shaped like ``org/name`` is a hub id
    (VERL downloads it) unless it looks local: ``./``, ``../``, ``~``, ``/``, or a first part that
    is a folder here (``models/qwen3-4b-tags`` beside a ``models/`` folder is a mistyped local
    path, and sending it to the hub would fail on the cluster). Anything else must be a local
    folder with ``config.json``."""
    path = Path(model).expanduser()
    if path.is_dir():
        return None if (path / "config.json").is_file() else f"model {path} has no config.json"
    if path.exists() or not HUB_ID.fullmatch(model) or model.startswith((".", "~", "/")):
        return f"model {path} does not exist"
    if path.parent.is_dir() and str(path.parent) != ".":
        return (f"model {path} does not exist ({path.parent}/ is a folder here, so this is a local path, not a hub "
                "id; check the name)")
    return None


def hub_note(model: str) -> str:
    """A note when ``model`` is read as a hub id (no such local folder): a mistyped local path looks the same."""
    if not Path(model).expanduser().exists() and _model_problem(model) is None:
        return f"model {model} is not a local folder, so VERL will fetch it from the hub"
    return ""


def missing_inputs(stage: stages.Stage, config: Any) -> list[str]:
    """What the composed stage config reads that is not there: the model, train and validation files."""
    from omegaconf import OmegaConf

    problems = [p for p in [_model_problem(str(OmegaConf.select(config, stage.model_key)))] if p]
    for key in ("data.train_files", "data.val_files"):
        for file in _as_paths(OmegaConf.select(config, key)):
            if not Path(file).expanduser().is_file():
                problems.append(f"{key} {file} does not exist")
    return problems


def _missing_message(stage: str, problems: list[str], data_dir: str | None) -> str:
    """One line: what is missing, then how to provide each kind."""
    hints = []
    if any(p.startswith("model") for p in problems):
        hints.append("pass --model a local checkpoint folder or a hub id")
    if any(p.startswith("data.") for p in problems):
        folder = data_dir or os.environ.get("PR1_REPRO_DATA") or "repro_data"
        hints.append(f"build the data with `pr1-repro data --out {folder}` (or pass --data-dir)")
    hints.append("--no-path-check skips this when only the cluster sees these paths")
    return f"stage {stage}: {'; '.join(problems)}. Fix: {'; '.join(hints)}"


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.stage not in stages.STAGES:
        raise Pr1EvalError(f"unknown stage {args.stage!r}; choose one of {', '.join(stages.STAGES)}")
    flags = [e for e in extra if e.startswith("-")]
    if flags:
        raise Pr1EvalError(
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
        rollout_runs=args.rollout_runs,
        rollout_every=args.rollout_every,
        no_rollout_runs=args.no_rollout_runs,
    )
    rollout_flags = args.rollout_runs or args.rollout_every is not None or args.no_rollout_runs
    if rollout_flags and req.stage.kind != "ppo":
        raise Pr1EvalError(f"stage {args.stage} is SFT: --rollout-runs, --rollout-every and --no-rollout-runs "
                           "apply to the RL stages (see `pr1-repro stages`)")
    if args.rollout_every is not None and args.rollout_every < 1:
        raise Pr1EvalError(f"--rollout-every {args.rollout_every}: pass 1 (every group) or more")
    from omegaconf import OmegaConf

    cmd = stages.command(req)
    config = stages.compose(req)
    problems = [] if args.no_path_check else missing_inputs(req.stage, config)
    if args.dry_run:  # what needs fixing first: the command and config run to hundreds of lines
        print("# inputs: " + ("not checked (--no-path-check)" if args.no_path_check else "; ".join(problems) or "all found"))
    if hub_note(args.model):
        print(f"# note: {hub_note(args.model)}")
    if args.dry_run:
        print("# command")
        print(stages.shell(cmd))
        print("# resolved config")
        print(OmegaConf.to_yaml(config, resolve=True))
    if problems:
        raise Pr1EvalError(_missing_message(args.stage, problems, args.data_dir))
    if args.dry_run:
        return 0
    print("# command")
    print(stages.shell(cmd))
    return subprocess.call(stages.executable(cmd, req), env=stages.local_env())


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


def cmd_nano(args: argparse.Namespace, extra: list[str]) -> int:
    """The whole curriculum on a tiny model on CPU, through VERL's own trainers (``repro.nano``)."""
    from repro.nano.job import run_nano, summary_table

    if extra:
        raise Pr1EvalError(f"nano takes no arguments after `--` (got {' '.join(extra)})")
    report = run_nano(Path(args.out), plan=args.plan, score=not args.no_score, fresh=args.fresh)
    print(summary_table(report))
    return 0 if report.passed else 1


REPRO_HELP = """\
Train Parallel-R1 checkpoints with VERL and score them: build the data, add
the six tags to a base model, run the curriculum stages (SFT cold start, RL on
easy then hard problems), merge the checkpoints and evaluate every step.

Start here:
  pr1-repro data --out repro_data
  pr1-repro stages
  pr1-repro run sft --model MODEL --dry-run

Run `pr1-repro COMMAND --help` for the options of one command."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="pr1-repro", description=REPRO_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands",
                                parser_class=OneLineParser)
    p = sub.add_parser("add-tokens", help="make the six tags single special tokens of a base model",
                       description="Copy a base model and make <Parallel>, </Parallel>, <Path>, </Path>, <Summary> and "
                                   "</Summary> single special tokens of its tokenizer (reusing free embedding rows, "
                                   "else resizing the embeddings).",
                       epilog="example:\n  pr1-repro add-tokens Qwen/Qwen3-4B-Base models/qwen3-4b-tags")
    p.add_argument("base", metavar="BASE", help="base model folder or hub id")
    p.add_argument("out", metavar="OUT", help="folder for the model with the tags")
    p.add_argument("--dtype", default="auto", help="dtype the base model is loaded in (auto: as saved)")
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
    sub.add_parser("stages", help="list the stages", description="List the training stages `pr1-repro run` knows, "
                   "with what each starts from and trains on.")
    p = sub.add_parser("run", help="run one stage with VERL (or print it with --dry-run)",
                       description="Launch one training stage with VERL (SFT cold start, RL on GSM8K, RL on DAPO, "
                                   "the Seen and Unseen variants). The model and data paths are checked first; "
                                   "--dry-run prints the command and resolved config and runs nothing. Arguments "
                                   "after a lone -- are Hydra overrides.",
                       epilog="examples:\n  pr1-repro stages\n"
                              "  pr1-repro run sft --model models/qwen3-4b-tags --dry-run\n"
                              "  pr1-repro run rl_gsm8k --model ckpt/sft/hf -- trainer.total_epochs=2")
    p.add_argument("stage", metavar="STAGE", help="a stage name from `pr1-repro stages`")
    p.add_argument("--model", required=True, help="HF checkpoint to start from")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes to train on")
    p.add_argument("--gpus-per-node", type=int, default=8, metavar="G", help="GPUs per node")
    p.add_argument(
        "--data-dir", default=None, help="folder written by `pr1-repro data` (default: $PR1_REPRO_DATA or ./repro_data)"
    )
    p.add_argument("--out", default=None, help="checkpoint folder (trainer.default_local_dir)")
    p.add_argument("--experiment", default=None, help="trainer.experiment_name (default: the stage config's)")
    p.add_argument("--ray-address", default=None, help="multi-node: Ray dashboard address (default $RAY_ADDRESS)")
    p.add_argument("--rollout-runs", default=None, metavar="DIR",
                   help="RL: store every rollout as a pr1-eval run per step in DIR/train/step-N and DIR/val/step-N "
                        "(default: OUT/rollout_runs with --out, else the config's, under the checkpoint folder)")
    p.add_argument("--rollout-every", type=int, default=None, metavar="N",
                   help="RL: keep about one training group in N, chosen by problem (default 1: all; validation is "
                        "kept whole). All rollouts of a 300-step job take about 5-7 GB")
    p.add_argument("--no-rollout-runs", action="store_true", help="RL: store no rollout runs")
    p.add_argument("--dry-run", action="store_true", help="print the command, the resolved config and missing inputs; run nothing")
    p.add_argument("--no-path-check", action="store_true", help="skip checking the model and data paths (cluster-only paths)")
    p = sub.add_parser("merge", help="convert VERL FSDP checkpoints to HF with VERL's model merger",
                       description="Convert every global_step_N FSDP checkpoint under CKPT_DIR to a Hugging Face "
                                   "folder with VERL's model merger, so pr1-eval can score it.",
                       epilog="example:\n  pr1-repro merge checkpoints/rl_gsm8k")
    p.add_argument("ckpt_dir", metavar="CKPT_DIR", help="folder holding global_step_N checkpoints")
    p.add_argument("--force", action="store_true", help="merge again the steps that are already merged")
    p.add_argument("--dry-run", action="store_true", help="print the merge commands; run nothing")
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
    p = sub.add_parser("nano", help="train the whole curriculum on a tiny model on CPU (VERL's own trainers)",
                       description="Run every stage of the curriculum (Seen: SFT, RL on GSM8K, RL on DAPO; Unseen: "
                                   "structured SFT, S1, S2, mid-training) on pr1-eval's tiny model, on CPU, through "
                                   "`pr1-repro run` and VERL's unmodified trainers, then score the merged checkpoints "
                                   "(pr1-eval sweep), rank them and analyse the per-step rollout runs. Prints VERL's "
                                   "metric lines as it goes and a table of checks at the end (exit 1 if one fails). "
                                   "The full plan takes about 40 minutes on two cores, the CI slice about 10.",
                       epilog="example:\n  pr1-repro nano --out pr1-nano\n  pr1-eval dashboard pr1-nano")
    p.add_argument("--out", default="pr1-nano", metavar="DIR", help="where checkpoints, logs, runs and nano.json go")
    p.add_argument("--plan", default="full", choices=["full", "ci"],
                   help="full: every stage; ci: Seen SFT, Seen GRPO and Unseen GRPO for a few steps")
    p.add_argument("--no-score", action="store_true", help="skip the sweep, leaderboard and analysis at the end")
    p.add_argument("--fresh", action="store_true", help="delete --out first when it holds an earlier job")
    return parser


COMMANDS = {
    "add-tokens": cmd_add_tokens,
    "data": cmd_data,
    "stages": cmd_stages,
    "run": cmd_run,
    "merge": cmd_merge,
    "score": cmd_score,
    "nano": cmd_nano,
}


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``pr1-repro``)."""
    own, extra = _split_extra(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(own)
    try:
        return COMMANDS[args.command](args, extra)
    except KeyboardInterrupt:
        print("pr1-repro: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # one line, never a traceback (PR1_DEBUG=1 shows it)
        if os.environ.get("PR1_DEBUG"):
            raise
        print(f"pr1-repro {args.command}: {one_line(error)}", file=sys.stderr)
        return 2


def one_line(error: BaseException) -> str:
    """The error as one line: its own message for errors the user can fix, else its type and first line."""
    lines = str(error).strip().splitlines() or [""]
    text = " ".join(line.strip() for line in lines) if isinstance(error, Pr1EvalError) else lines[0]
    if isinstance(error, (Pr1EvalError, FileNotFoundError, ValueError)):
        return text
    return f"{type(error).__name__}: {text} (unexpected; PR1_DEBUG=1 shows the traceback)"


if __name__ == "__main__":
    sys.exit(main())
