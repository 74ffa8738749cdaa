"""Run the nano curriculum: each stage through ``pr1-repro run`` on VERL's own trainers, then merge.

Every stage is a child process (``python -m repro.cli run …``), exactly the command a GPU user
types, with the CPU platform loaded through VERL's plugin hook (:func:`repro.testing.verl_cpu.
cpu_environment`). Its whole log is kept in ``OUT/logs/<stage>.log``; VERL's own metric lines are
echoed, shortened, as progress. A stage that fails stops the job with its log's last lines, since
every later stage starts from its checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.scaleout.ray_startup import RAY_START_TIMEOUT, START_ATTEMPTS, retry_note
from repro import stages as repro_stages
from repro.checkpoints import find_steps
from repro.nano.metrics import parse_metric_line, step_metrics
from repro.nano.plan import Draw, NanoStage, Scale, cpu_overrides, scale_overrides
from repro.testing.broken import BREAK_ENV
from repro.testing.broken import overrides as broken_overrides
from repro.testing.cpu_rollout import FROZEN_ENV
from repro.testing.verl_cpu import cpu_environment

EXTRA_MODULES = ("repro.testing.cpu_rollout", "repro.testing.determinism")
SHOWN = {"train/loss": "loss (nats/token)", "critic/score/mean": "mean reward",
         "rollout_corr/kl": "rollout-actor kl (nats/token)", "response_length/mean": "mean response tokens"}
"""VERL's keys echoed as progress, with the label each is printed under."""


@dataclass
class StageResult:
    """What one stage did: its VERL metrics per step, checkpoint, merged model and time."""

    stage: NanoStage
    kind: str
    start_model: str
    out: Path
    log: Path
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    merged: str | None = None
    seconds: float = 0.0

    @property
    def rollout_runs(self) -> Path:
        return self.out / "rollout_runs"


def child_environment(frozen: bool = False, variant: str = "ok") -> dict[str, str]:
    """This process's environment plus the CPU platform's variables (and the frozen-server control, or a
    trainer broken on purpose: :mod:`repro.testing.broken`)."""
    modules = EXTRA_MODULES if variant == "ok" else (*EXTRA_MODULES, "repro.testing.broken")
    env = {**os.environ, **cpu_environment(modules), "PYTHONUNBUFFERED": "1"}  # progress as it happens
    if variant != "ok":
        env[BREAK_ENV] = variant
    env.pop("CUDA_VISIBLE_DEVICES", None)  # Ray refuses logical GPUs when it is set empty
    # a cluster of the job's own: ray.init() would otherwise join the newest local cluster on this
    # machine (/tmp/ray/ray_current_cluster), another job's, whose actor names would collide
    env["RAY_ADDRESS"] = "local"
    if frozen:
        env[FROZEN_ENV] = "1"
    return env


def draw_overrides(stage: NanoStage, draw: Draw) -> list[str]:
    """A GRPO stage's overrides for ``draw``: its rollout seed and its breakage (none for SFT)."""
    spec = repro_stages.STAGES[stage.stage]
    if spec.kind != "ppo":
        return []
    seed = [] if draw.rollout_seed is None else [f"actor_rollout_ref.rollout.seed={draw.rollout_seed}"]
    return seed + broken_overrides(draw.variant, spec.structured)


def stage_argv(stage: NanoStage, model: str, out: Path, data_dir: Path, scale: Scale,
               draw: Draw | None = None) -> list[str]:
    """``pr1-repro run`` arguments: the stage config, then CPU's overrides, then the nano sizes (and a
    draw's seed and breakage)."""
    spec = repro_stages.STAGES[stage.stage]
    overrides = [o.text for o in cpu_overrides(spec.kind, spec.structured)]
    overrides += scale_overrides(stage, spec.kind, scale) + list(stage.extra)
    overrides += draw_overrides(stage, draw or Draw())
    return ["run", stage.stage, "--model", model, "--gpus-per-node", "1", "--out", str(out),
            "--data-dir", str(data_dir), "--experiment", stage.name, "--", *overrides]


def _short(step: int, metrics: dict[str, float]) -> str:
    shown = [f"{label} {metrics[key]:.4g}" for key, label in SHOWN.items() if key in metrics]
    return f"step {step}: " + ", ".join(shown)


def stream(argv: list[str], log: Path, env: dict[str, str], echo: Callable[[str], None]) -> int:
    """Run ``argv``, write all output to ``log``, echo VERL's metric lines shortened; the exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        # run in the job's folder: Hydra writes its outputs/ folder into the working directory
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                                errors="replace", cwd=log.parent.parent)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            parsed = parse_metric_line(line)
            if parsed:
                echo("    " + _short(*parsed))
        return proc.wait()


def _tail(log: Path, lines: int = 15) -> str:
    text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:])


def merge_last(out: Path, log: Path, env: dict[str, str], echo: Callable[[str], None]) -> str:
    """Merge every checkpoint of a stage with ``pr1-repro merge``; the last step's HF folder."""
    status = stream([sys.executable, "-m", "repro.cli", "merge", str(out)], log, env, echo)
    steps = find_steps(out)
    if status != 0 or not steps or not steps[-1].is_merged:
        raise Pr1EvalError(f"pr1-repro merge {out} failed (exit {status}); its log: {log}\n{_tail(log)}")
    return str(steps[-1].model_dir)


def ray_start_timed_out(status: int, metrics: dict[int, dict[str, float]], lines: list[str]) -> bool:
    """Whether a stage failed only because Ray's node did not start in its fixed wait
    (:mod:`pr1_eval.scaleout.ray_startup`; VERL calls ``ray.init`` itself, so the stage is started again
    whole): a failed exit, no step logged, and Ray's message in the log (a stage that ran a step failed
    for another reason)."""
    return status != 0 and not metrics and any(RAY_START_TIMEOUT in line for line in lines)


def run_stage(stage: NanoStage, model: str, root: Path, data_dir: Path, scale: Scale,
              echo: Callable[[str], None], frozen: bool = False, draw: Draw | None = None) -> StageResult:
    """One stage from ``model``: train, read VERL's metrics back, merge the last checkpoint."""
    kind = repro_stages.STAGES[stage.stage].kind
    draw = draw or Draw()
    result = StageResult(stage, kind, model, root / stage.name, root / "logs" / f"{stage.name}.log")
    env = child_environment(frozen, draw.variant if kind == "ppo" else "ok")
    argv = [sys.executable, "-m", "repro.cli", *stage_argv(stage, model, result.out, data_dir, scale, draw)]
    echo(f"[{stage.name}] pr1-repro run {stage.stage} ({kind}, {stage.steps} steps) from {model}")
    started = time.monotonic()
    for attempt in range(1, START_ATTEMPTS + 1):
        status = stream(argv, result.log, env, echo)
        lines = result.log.read_text(encoding="utf-8", errors="replace").splitlines()
        result.metrics = step_metrics(lines)
        if attempt == START_ATTEMPTS or not ray_start_timed_out(status, result.metrics, lines):
            break
        echo(f"[{stage.name}] no step ran: {retry_note(attempt)}")
    if status != 0 or len(result.metrics) < stage.steps:
        raise Pr1EvalError(f"stage {stage.name} ({stage.stage}) failed: exit {status}, {len(result.metrics)} of "
                           f"{stage.steps} steps logged; its log: {result.log}\n{_tail(result.log)}")
    result.merged = merge_last(result.out, root / "logs" / f"{stage.name}.merge.log", env, echo)
    result.seconds = time.monotonic() - started
    echo(f"[{stage.name}] done in {result.seconds:.0f} s; merged → {result.merged}")
    return result
