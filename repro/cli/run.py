"""``pr1-repro run``: launch one training stage with VERL, or print it (``--dry-run``).

The model and data paths are checked first (:mod:`repro.cli.inputs`), so a wrong path is one
line here rather than a stack trace after minutes of cluster setup. When an RL stage's trainer
exits (whatever its status), the rollouts its killed reward workers left in their journals are
stored in their step runs (:mod:`repro.rollouts.finish`).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
from pathlib import Path
from typing import Any

from pr1_eval.cli.numbers import positive_int
from pr1_eval.errors import Pr1EvalError
from repro import stages
from repro.cli.inputs import hub_note, missing_inputs, missing_message


def register(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--nodes", type=positive_int, default=1, metavar="N", help="nodes to train on")
    p.add_argument("--gpus-per-node", type=positive_int, default=8, metavar="G", help="GPUs per node")
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
    p.set_defaults(func=cmd_run)


def _request(args: argparse.Namespace, extra: list[str]) -> stages.RunRequest:
    """The stage run the options ask for, refused (one line each) when they do not fit together."""
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
    return req


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    req = _request(args, extra)
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
        raise Pr1EvalError(missing_message(args.stage, problems, args.data_dir))
    if args.dry_run:
        return 0
    print("# command")
    print(stages.shell(cmd))
    status = subprocess.call(stages.executable(cmd, req), env=stages.local_env())
    if req.stage.kind == "ppo":
        finish_rollout_runs(config)
    return status


def finish_rollout_runs(config: Any) -> None:
    """Store what the job's reward workers left journaled (:mod:`repro.rollouts.finish`), said in one line.
    A failure here is reported, never raised: the trainer's exit status is the command's."""
    from repro.rollouts.finish import finish_rollout_runs as finish
    from repro.rollouts.runs import RolloutRunsOptions, options_from_config

    section = (config.get("repro", {}) or {}).get("rollout_runs", {}) or {}
    if not section.get("dir"):
        return
    root = Path(str(section["dir"])).expanduser().resolve()

    def fallback() -> RolloutRunsOptions | None:
        try:
            return options_from_config(config)
        except Exception:  # noqa: BLE001 - only a fallback for journals without recorded options
            return None

    try:
        print("# " + finish(root, fallback).line(root), flush=True)
    except Exception as exc:  # noqa: BLE001 - the job ran; its status must not be lost to this
        logging.getLogger(__name__).exception("rollout runs: could not store the journals' rows under %s", root)
        print(f"# rollout runs: could not store the rows left in the journals under {root} ({exc}); the next "
              "writer there stores them", flush=True)
