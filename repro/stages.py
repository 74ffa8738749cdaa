"""The training stages: which VERL entry point, which config, and the exact command to run it.

Each stage is a Hydra config in ``repro/configs`` composed on VERL's own (``ppo_trainer`` or
``sft_trainer_engine``, found through ``hydra.searchpath: pkg://verl.trainer.config``), so a run
is VERL's unmodified trainer with our overrides. ``pr1-repro run STAGE --dry-run`` composes the
same config in-process and prints it fully resolved next to the command.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.data import OUTPUTS

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


@dataclass(frozen=True)
class Stage:
    """One training stage of the paper's curriculum."""

    name: str
    kind: str  # "sft" | "ppo"
    paper: str
    structured: bool
    start_from: str
    train_data: str

    @property
    def model_key(self) -> str:
        return "model.path" if self.kind == "sft" else "actor_rollout_ref.model.path"


STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage("sft", "sft", "Seen: cold-start SFT on Parallel-GSM8K", False, "add-tokens output", OUTPUTS["sft"]),
        Stage(
            "sft_unseen",
            "sft",
            "Unseen: cold-start SFT with the structured mask",
            True,
            "add-tokens output",
            OUTPUTS["sft"],
        ),
        Stage("rl_gsm8k", "ppo", "Seen stage 2: RL on GSM8K, parallel AND correct", False, "sft", OUTPUTS["gsm8k"]),
        Stage("rl_dapo", "ppo", "Seen stage 3: RL on DAPO, accuracy", False, "rl_gsm8k", OUTPUTS["dapo"]),
        Stage("unseen_s1", "ppo", "Unseen S1: structured, RL on DAPO, accuracy", True, "sft_unseen", OUTPUTS["dapo"]),
        Stage(
            "unseen_s2",
            "ppo",
            "Unseen S2: structured, RL on DAPO, alternating reward",
            True,
            "sft_unseen",
            OUTPUTS["dapo"],
        ),
        Stage(
            "mid_training",
            "ppo",
            "Mid-training scaffold: S2 rewards to step 200, accuracy after",
            True,
            "sft_unseen",
            OUTPUTS["dapo"],
        ),
    )
}


@dataclass
class RunRequest:
    """What the user asked ``pr1-repro run`` for."""

    stage: Stage
    model: str
    nodes: int = 1
    gpus_per_node: int = 8
    data_dir: str | None = None
    out_dir: str | None = None
    experiment: str | None = None
    extra: tuple[str, ...] = ()
    ray_address: str | None = None
    rollout_runs: str | None = None  # RL: where each step's rollout run goes (default: under out_dir)
    rollout_every: int | None = None  # RL: keep about one training group in n
    no_rollout_runs: bool = False


def rollout_overrides(req: RunRequest) -> list[str]:
    """Where an RL stage's rollout runs go (:mod:`repro.rollouts.runs`), always as an absolute
    path when the request names one, since VERL's reward workers need not share our directory."""
    if req.stage.kind != "ppo":
        return []
    out = []
    if req.no_rollout_runs:
        out.append("repro.rollout_runs.dir=null")
    elif req.rollout_runs or req.out_dir:
        folder = Path(req.rollout_runs) if req.rollout_runs else Path(str(req.out_dir)) / "rollout_runs"
        out.append(f"repro.rollout_runs.dir={folder.expanduser().resolve()}")
    if req.rollout_every is not None:
        out.append(f"repro.rollout_runs.every={int(req.rollout_every)}")
    return out


def overrides(req: RunRequest) -> list[str]:
    """Hydra overrides for the request, in a stable order (user extras last, so they win)."""
    out = [
        f"{req.stage.model_key}={req.model}",
        f"trainer.nnodes={req.nodes}",
        f"trainer.n_gpus_per_node={req.gpus_per_node}",
    ]
    if req.data_dir:
        data = Path(req.data_dir).expanduser().resolve()
        out.append(f"data.train_files={data / req.stage.train_data}")
        out.append(f"data.val_files={data / OUTPUTS['val']}" if req.stage.kind == "ppo" else "data.val_files=null")
    if req.out_dir:
        out.append(f"trainer.default_local_dir={Path(req.out_dir).expanduser().resolve()}")
    if req.experiment:
        out.append(f"trainer.experiment_name={req.experiment}")
    return out + rollout_overrides(req) + list(req.extra)


def entrypoint(req: RunRequest) -> list[str]:
    """VERL's entry point: torchrun SPMD SFT on one node, VERL's Ray SFT across nodes, main_ppo for RL."""
    config = [f"--config-path={CONFIG_DIR}", f"--config-name={req.stage.name}"]
    if req.stage.kind == "ppo":
        return ["python", "-m", "verl.trainer.main_ppo", *config]
    if req.nodes > 1:
        return ["python", "-m", "verl.trainer.sft_trainer_ray", *config]
    torchrun = ["torchrun", "--standalone", "--nnodes=1", f"--nproc_per_node={req.gpus_per_node}"]
    return [*torchrun, "-m", "verl.trainer.sft_trainer", *config]


def command(req: RunRequest) -> list[str]:
    """The full command: local, or ``ray job submit`` to the cluster for more than one node."""
    cmd = entrypoint(req) + overrides(req)
    if req.nodes > 1:
        address = req.ray_address or "${RAY_ADDRESS}"
        return ["ray", "job", "submit", f"--address={address}", "--", *cmd]
    return cmd


def shell(cmd: list[str]) -> str:
    """The command as one copy-pasteable shell line (``${RAY_ADDRESS}`` left for the shell)."""
    return " ".join(part if part == "--address=${RAY_ADDRESS}" else shlex.quote(part) for part in cmd)


def executable(cmd: list[str], req: RunRequest) -> list[str]:
    """The printed command made runnable here: this interpreter for local ``python``/``torchrun`` (the
    one with VERL and repro installed), ``$RAY_ADDRESS`` filled in for a cluster submission."""
    if req.nodes > 1:
        address = os.environ.get("RAY_ADDRESS", "auto")
        return [c.replace("${RAY_ADDRESS}", address) for c in cmd]
    if cmd[0] == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", *cmd[1:]]
    return [sys.executable, *cmd[1:]] if cmd[0] == "python" else cmd


def compose(req: RunRequest) -> Any:
    """The stage config exactly as VERL will see it (Hydra compose with the same overrides)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return hydra_compose(config_name=req.stage.name, overrides=overrides(req))


def resolved_yaml(req: RunRequest) -> str:
    """The composed config with every interpolation resolved, as YAML."""
    from omegaconf import OmegaConf

    return str(OmegaConf.to_yaml(compose(req), resolve=True))


def local_env() -> dict[str, str]:
    """Environment for a local run: VERL must find this package in every worker it starts."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
