"""``pr1-repro nano``: the whole curriculum on a tiny model on CPU, then what a researcher does next.

Order: build the data (:mod:`repro.nano.data`) → every stage of the plan through VERL
(:mod:`repro.nano.runner`) → the checks (:mod:`repro.nano.checks`) → ``pr1-eval sweep`` over the
merged checkpoints (Seen with sequential decoding, Unseen with fork-join) → ``pr1-eval
leaderboard`` → ``pr1-eval analyze`` over the per-step rollout runs the job wrote. Everything lands
in ``OUT`` and ``OUT/nano.json`` holds the figures; the last thing printed is the checks' table.
Exit status 0 only when every stage ran and every check passed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.testing.tiny_model import cached_tiny_model
from repro import stages as repro_stages
from repro.nano import checks, gain
from repro.nano.data import build_nano_data, build_rl_data
from repro.nano.merged_start import CONTROL, start_as_merged
from repro.nano.nll import response_nll
from repro.nano.plan import PLANS, Draw, NanoStage, Scale
from repro.nano.provenance import machine_record, weights_digest
from repro.nano.runner import StageResult, run_stage
from repro.nano.scoring import score_and_rank
from repro.nano.stored import stored_steps
from repro.nano.targets import TargetChoice, choose_target
from repro.rewards import TAG_MODES
from repro.rollouts.journal import journal_rows


@dataclass
class NanoReport:
    """Everything the job measured, written to ``OUT/nano.json``."""

    plan: str
    out: Path
    stages: list[StageResult] = field(default_factory=list)
    checks: list[checks.Check] = field(default_factory=list)
    scoring: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, TargetChoice] = field(default_factory=dict)
    start_weights: dict[str, str] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    draw: Draw = field(default_factory=Draw)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan, "passed": self.passed, "seconds": round(self.seconds, 1), "frozen_control": CONTROL,
            "stages": [{"name": r.stage.name, "stage": r.stage.stage, "kind": r.kind, "start": r.start_model,
                        "steps": r.stage.steps, "merged": r.merged, "seconds": round(r.seconds, 1),
                        "log": str(r.log), "metrics": {str(s): m for s, m in r.metrics.items()}}
                       for r in self.stages],
            "checks": [c.as_dict() for c in self.checks],
            "targets": {name: t.as_dict() for name, t in self.targets.items()},
            "start_weights": self.start_weights, "machine": self.machine, "draw": asdict(self.draw),
            "scoring": self.scoring,
        }


def start_model(stage: NanoStage, done: dict[str, StageResult], tiny_seed: int = 0) -> str:
    """The model a stage starts from: a tiny model kind (trained from ``tiny_seed``), or an earlier
    stage's last merged checkpoint."""
    if stage.start.startswith("tiny:"):
        return str(cached_tiny_model(kind=stage.start.split(":", 1)[1], seed=tiny_seed))
    earlier = done.get(stage.start)
    if earlier is None or earlier.merged is None:
        raise Pr1EvalError(f"stage {stage.name} starts from {stage.start}, which has not run in this plan")
    return earlier.merged


def stage_checks(result: StageResult, data_dir: Path, scale: Scale, target: TargetChoice | None = None) -> list[checks.Check]:
    """The checks that apply to one stage (SFT: loss and NLL; RL: learning against the frozen start model,
    the reward's trend, on-policy, stored runs, engine)."""
    name = result.stage.name
    if result.kind == "sft":
        found = [checks.loss_falls(name, result.metrics)]
        losses = [m["train/loss"] for _, m in sorted(result.metrics.items()) if "train/loss" in m]
        if result.merged and losses:
            parquet = data_dir / "sft_parallel_gsm8k.parquet"
            start, end = response_nll(result.start_model, parquet), response_nll(result.merged, parquet)
            found.append(checks.nll_falls(name, start, end, losses[0], losses[-1]))
        return found
    runs = stored_steps(result.rollout_runs / "train")
    rewards = {step: run["groups"] for step, run in runs.items()}
    parallel = {step: run["parallel_groups"] for step, run in runs.items()}
    found = []
    structured = repro_stages.STAGES[result.stage.stage].structured
    control = None
    if target is not None and result.merged:
        control = frozen_control(result.stage, result.start_model, result.merged, target.target, scale)
        found.append(gain.gain_check(name, control[0].earned, control[1].earned, required=result.stage.expect_rise))
    found.append(checks.reward_rises(name, rewards, required=False))
    found += parallel_checks(name, parallel, reward_parallel_demand(result.stage), control)
    found.append(checks.rollout_runs_match(name, result.metrics, runs, scale.rl_prompts * scale.rl_n,
                                           journal_rows(result.rollout_runs)))
    if structured:
        found.append(checks.structured_engine_used(name, result.log))
    else:
        found.append(checks.on_policy(name, result.metrics))
    return found


def frozen_control(stage: NanoStage, start_model: str, trained_model: str, target: int,
                   scale: Scale) -> tuple[gain.Outcomes, gain.Outcomes]:
    """An RL stage's trained model and its frozen start, sampled as the stage samples (:mod:`repro.nano.gain`):
    per sample, the reward its gold was chosen for and whether it opened a block. The start is sampled as the
    merge would have written it (:mod:`repro.nano.merged_start`): a stage that learns nothing is then
    compared with the very same weights."""
    return gain.frozen_control(start_as_merged(start_model, trained_model), trained_model, target,
                               **control_sampling(stage, scale))


def control_sampling(stage: NanoStage, scale: Scale) -> dict[str, Any]:
    """How the frozen control samples a stage: as its rollouts do (fork-join for a structured stage, its cap),
    judged by the reward its gold was chosen for (:func:`repro.nano.gain.frozen_control`'s settings)."""
    return {"structured": repro_stages.STAGES[stage.stage].structured, "mode": target_mode(stage),
            "response_length": scale.response_length, "max_path_tokens": scale.max_path_tokens}


def parallel_checks(name: str, parallel: checks.Groups, demand: str,
                    control: tuple[gain.Outcomes, gain.Outcomes] | None) -> list[checks.Check]:
    """The parallel ratio's verdict. Where the reward pays for blocks every step and the frozen start model
    already branches in :data:`repro.nano.checks.SATURATED` of its samples or more (the Seen GSM8K stage: ~97 %),
    the trained model's share is judged against the start model's on the control's samples
    (:func:`repro.nano.gain.parallel_holds_check`) and the trend over the steps only reported: the trend sees 32
    prompt groups and sat only 1.0-1.3 above its bar on the working draws. Where the start is not saturated the
    ratio must rise by its trend over the steps (:func:`repro.nano.checks.parallel_ratio`), as before: both tiny
    models start saturated, so no draw has measured a rise against the start to set a bar for one. Without a
    control (no gold or no merged checkpoint) the trend decides, as before."""
    if control is None:
        return [checks.parallel_ratio(name, parallel, demand)]
    start, trained = control
    share = float(start.parallel.mean())
    if demand == "every step" and share >= checks.SATURATED:
        return [gain.parallel_holds_check(name, start.parallel, trained.parallel),
                checks.parallel_ratio(name, parallel, demand, start_share=share, judged_elsewhere=True)]
    return [checks.parallel_ratio(name, parallel, demand, start_share=share)]


def stage_data(stage: NanoStage, out: Path) -> Path:
    """The data folder of a stage: an RL stage's own ``data-<name>`` (golds chosen from its start model,
    :func:`prepare_rl_data`), ``data`` for the SFT stages."""
    return out / (f"data-{stage.name}" if repro_stages.STAGES[stage.stage].kind == "ppo" else "data")


def reward_mode(stage: NanoStage) -> str:
    """The stage's reward mode, from its stage config with the nano stage's own reward overrides."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(repro_stages.CONFIG_DIR), version_base=None):
        config = compose(config_name=stage.stage, overrides=[o for o in stage.extra if "reward_kwargs" in o])
    return str(OmegaConf.select(config, "reward.custom_reward_function.reward_kwargs.mode"))


def prepare_rl_data(stage: NanoStage, model: str, out: Path, scale: Scale, echo: Callable[[str], None],
                    rl_problems: int = 16, seed: int = 0) -> TargetChoice:
    """Choose an RL stage's gold from its start model (:mod:`repro.nano.targets`) and write its data."""
    structured = repro_stages.STAGES[stage.stage].structured
    choice = choose_target(model, structured=structured, mode=target_mode(stage), response_length=scale.response_length,
                           max_path_tokens=scale.max_path_tokens, problems_needed=rl_problems, seed=seed)
    echo(f"[{stage.name}] golds {choice.target}: the start model earns the reward with it on {choice.share:.1%} "
         f"of {choice.rollouts} sampled rollouts (candidates {', '.join(f'{k}: {v:.1%}' for k, v in choice.shares.items())})")
    build_rl_data(out, stage_data(stage, out).name, choice.target, rl_problems=rl_problems)
    return choice


def target_mode(stage: NanoStage) -> str:
    """What the stage's gold is chosen for and its learning judged by: ``parallel_accuracy`` where that is its
    reward, else ``accuracy`` (the first step of the S2 schedule is an accuracy step: it pays for a right answer)."""
    return "parallel_accuracy" if reward_mode(stage) == "parallel_accuracy" else "accuracy"


def reward_parallel_demand(stage: NanoStage) -> str:
    """How the stage's reward pays for parallel structure (:data:`repro.nano.checks.DEMANDS`)."""
    mode = reward_mode(stage)
    if mode in ("parallel_accuracy", "tiered"):
        return "every step"
    return "tiered steps" if mode in TAG_MODES else "never"


def prepare_out(out: Path, fresh: bool) -> Path:
    """``out`` ready for a new job. VERL resumes from the newest checkpoint it finds (``resume_mode:
    auto``), so a stage folder left by an earlier job would make its stage train zero steps: an
    existing non-empty folder is refused, or emptied with ``fresh``."""
    if out.exists() and any(out.iterdir()):
        if not fresh:
            raise Pr1EvalError(f"{out} is not empty (an earlier nano job?); pass --fresh to delete it first, "
                               "or another --out")
        import shutil

        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_nano(out: Path, plan: str = "full", scale: Scale | None = None, score: bool = True,
             echo: Callable[[str], None] = print, fresh: bool = False, draw: Draw | None = None,
             only: Collection[str] | None = None) -> NanoReport:
    """Run the plan into ``out`` and return its report (also written to ``out/nano.json``). ``draw``
    changes the tiny models' seed, the rollout seed or breaks the trainer (``bench/bench_nano_draws.py``).
    ``only``: run just these stages of the plan (each must start from a tiny model or from another of them):
    a breakage that touches one stage needs no other (``bench_nano_draws.py --variant nospans``)."""
    draw = draw or Draw()
    if plan not in PLANS:
        raise Pr1EvalError(f"unknown nano plan {plan!r}; choose one of {', '.join(PLANS)}")
    stages = [s for s in PLANS[plan] if only is None or s.name in only]
    if only is not None and len(stages) != len(set(only)):
        unknown = sorted(set(only) - {s.name for s in PLANS[plan]})
        raise Pr1EvalError(f"plan {plan!r} has no stage {', '.join(unknown)}; its stages: "
                           f"{', '.join(s.name for s in PLANS[plan])}")
    scale = scale or Scale()
    out = prepare_out(out.expanduser().resolve(), fresh)
    report = NanoReport(plan, out, machine=machine_record(), draw=draw)
    started = time.monotonic()
    echo(f"nano ({plan}): building the data in {out / 'data'}")
    data_dir = build_nano_data(out)
    done: dict[str, StageResult] = {}
    for stage in stages:
        model = start_model(stage, done, draw.tiny_seed)
        report.start_weights[stage.name] = weights_digest(model)
        if repro_stages.STAGES[stage.stage].kind == "ppo":
            report.targets[stage.name] = prepare_rl_data(stage, model, out, scale, echo, seed=draw.rollout_seed or 0)
        result = run_stage(stage, model, out, stage_data(stage, out), scale, echo, draw=draw)
        done[stage.name] = result
        report.stages.append(result)
        report.checks += stage_checks(result, data_dir, scale, report.targets.get(stage.name))
    if score:
        report.scoring = score_and_rank(report.stages, out, echo)
    report.seconds = time.monotonic() - started
    (out / "nano.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
    return report


def summary_table(report: NanoReport) -> str:
    """The checks, one block each: verdict, stage and check on the first line, its rule and its figures
    below, so a reader sees what was required beside what was measured."""
    lines = ["checks (the rule each verdict applies, then the figures it read):"]
    width = max((len(c.stage) + len(c.name) for c in report.checks), default=0) + 2
    for c in report.checks:
        verdict = "pass" if c.passed else "FAIL"
        lines.append(f"{verdict}  {(c.stage + '  ' + c.name).ljust(width)}")
        lines.append(f"        rule:    {c.rule}")
        lines.append(f"        figures: {c.figures}")
    verdict = "every check passed" if report.passed else "SOME CHECKS FAILED"
    lines.append(f"nano ({report.plan}): {verdict} in {report.seconds:.0f} s; figures in {report.out / 'nano.json'}")
    return "\n".join(lines)
