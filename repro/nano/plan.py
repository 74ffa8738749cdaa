"""The nano curriculum: every stage of the paper's recipe, on a tiny model, on CPU, as VERL runs it.

Each stage is ``pr1-repro run STAGE`` with the stage config a GPU user runs (``repro/configs``),
plus two lists of overrides, kept apart so a reader sees what CPU *forces* and what is only *size*:

- :data:`CPU_SFT` / :data:`CPU_PPO`: what VERL needs to run on this machine at all, each with its
  reason. These are the GPU code paths CI does not run (``repro/README.md`` lists them).
- :func:`scale_overrides`: batch sizes, lengths, step counts and learning rates of a job that
  finishes in minutes on two cores. A GPU job takes the stage config's values.

Why a *trained* tiny model starts the curriculum: a random model cannot learn arithmetic in a few
CPU minutes, so GRPO would have nothing to reinforce. pr1-eval's ``trained`` tiny model (and the
``trained-structured`` one for Unseen, :mod:`pr1_eval.testing.tiny_model`) already writes the
tags and a ``Final Answer:`` line and is right on one-digit arithmetic some of the time: it stands
in for the base model, SFT continues it on the real Parallel-GSM8K text, and the RL stages train
on one-digit arithmetic problems with their true answers (:mod:`repro.nano.data`), golds it can
learn. Nothing here measures model quality.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Override:
    """One Hydra override and why the nano job needs it."""

    text: str
    why: str


_CPU_COMMON = (
    Override("trainer.device=cpu", "the trainer's tensors live on the CPU"),
)
CPU_SFT: tuple[Override, ...] = (
    *_CPU_COMMON,
    Override("engine.dtype=float32", "CPU has no fast bf16 matmul, and bf16 rounds the tiny model's loss to three "
             "digits, too coarse to see it fall"),
    Override("data.num_workers=0", "eight data-loader processes on a two-core machine only add start-up time"),
)
CPU_PPO: tuple[Override, ...] = (
    *_CPU_COMMON,
    Override("actor_rollout_ref.actor.fsdp_config.dtype=float32", "as for SFT: no fast bf16 on CPU"),
    Override("actor_rollout_ref.rollout.name=pr1_cpu", "VERL 0.9.1 has no CPU rollout engine; repro.testing."
             "cpu_rollout serves pr1-eval's HF engine and takes the trainer's weights at every sync"),
    Override("+ray_kwargs.ray_init.num_gpus=1", "VERL schedules its workers on Ray GPU resources only: one "
             "logical GPU per worker (the platform maps it to the CPU)"),
    Override("ray_kwargs.ray_init.num_cpus=16", "logical CPUs, so every VERL actor can be scheduled (two physical "
             "cores would deadlock the actor start-up)"),
    Override("transfer_queue.backend.SimpleStorage.num_data_storage_units=1", "each storage unit is a 400 MB "
             "process; eight would take 3 GB for a few kilobytes of data"),
    Override("data.dataloader_num_workers=0", "as for SFT: no data-loader processes"),
    Override("actor_rollout_ref.rollout.agent.num_workers=1", "one agent-loop worker per core pair"),
    Override("reward.num_workers=1", "one reward worker per core pair"),
)
DETERMINISM: tuple[Override, ...] = (
    Override("actor_rollout_ref.rollout.full_determinism=true", "CI's verdict must be a function of the commit: "
             "VERL passes request ids through unchanged, and the CPU rollout seeds each request from rollout.seed, "
             "the step and that id, never from arrival order"),
    Override("trainer.v1.sampler.custom_sampler.path=pkg://repro.testing.determinism", "VERL's sync replay buffer "
             "lists a batch in the order trajectories finished; repro.testing.determinism.OrderedReplayBuffer "
             "sorts it by (data index, sample), so the loss sums in one order"),
    Override("trainer.v1.sampler.custom_sampler.name=OrderedReplayBuffer", "(the class of the line above)"),
    Override("data.seed=0", "the order of the prompts, stated (VERL's null seed is torch.Generator's fixed default, "
             "deterministic too, but invisible)"),
)
DETERMINISM_SEEN: tuple[Override, ...] = (
    Override("actor_rollout_ref.rollout.agent.default_agent_loop=pr1_seeded_single_turn", "VERL's single-turn loop "
             "names every request det-<priority> and the V1 trainer never sets priority: all samples of a step "
             "would share one id and one seed. repro.testing.determinism's subclass names each by data index and "
             "sample (the Unseen fork-join loop does so itself)"),
)
CPU_SEEN: tuple[Override, ...] = (
    Override("+{model}.override_config.attn_implementation=sdpa", "flash-attention is CUDA-only; the Unseen "
             "stages already use sdpa"),
    Override("{model}.use_remove_padding=false", "sequence packing needs flash-attention's varlen kernels"),
)


@dataclass(frozen=True)
class NanoStage:
    """One training stage of the nano job."""

    name: str  # the nano step's own name (also the checkpoint folder)
    stage: str  # the repro stage (`pr1-repro stages`)
    start: str  # "tiny:<kind>" or the name of an earlier NanoStage (its last merged checkpoint)
    steps: int
    extra: tuple[str, ...] = field(default=())  # stage-specific nano overrides (e.g. the reward switch)
    expect_rise: bool = True  # RL: the reward must rise (the Seen stages); else its trend is only reported


SEEN = (
    NanoStage("seen-sft", "sft", "tiny:trained", 8),
    NanoStage("seen-gsm8k", "rl_gsm8k", "seen-sft", 10),
    # starts where seen-gsm8k left the same target (about 60 % right): its trend is reported, not required
    NanoStage("seen-dapo", "rl_dapo", "seen-gsm8k", 6, expect_rise=False),
)
UNSEEN = (
    NanoStage("unseen-sft", "sft_unseen", "tiny:trained-structured", 8),
    NanoStage("unseen-s1", "unseen_s1", "unseen-sft", 4, expect_rise=False),
    NanoStage("unseen-s2", "unseen_s2", "unseen-sft", 6,
              ("reward.custom_reward_function.reward_kwargs.window=3",
               "reward.custom_reward_function.reward_kwargs.tiered_steps=1"), expect_rise=False),
    NanoStage("unseen-s2-tis", "unseen_s2", "unseen-sft", 6,
              ("reward.custom_reward_function.reward_kwargs.window=3",
               "reward.custom_reward_function.reward_kwargs.tiered_steps=1",
               "algorithm.rollout_correction.rollout_is=token"), expect_rise=False),
    NanoStage("unseen-mid", "mid_training", "unseen-sft", 4,
              ("reward.custom_reward_function.reward_kwargs.window=2",
               "reward.custom_reward_function.reward_kwargs.tiered_steps=1",
               "reward.custom_reward_function.reward_kwargs.switch_step=2"), expect_rise=False),
)
CI_SLICE = (
    NanoStage("seen-sft", "sft", "tiny:trained", 4),
    NanoStage("seen-gsm8k", "rl_gsm8k", "seen-sft", 8),
    NanoStage("unseen-s2", "unseen_s2", "tiny:trained-structured", 8,
              ("reward.custom_reward_function.reward_kwargs.window=3",
               "reward.custom_reward_function.reward_kwargs.tiered_steps=1")),
)
PLANS: dict[str, tuple[NanoStage, ...]] = {"full": SEEN + UNSEEN, "ci": CI_SLICE}


@dataclass(frozen=True)
class Draw:
    """What a new machine changes, made on purpose: the tiny models' training seed (another CPU trains
    other weights from the same seed) and the rollout seed; and a trainer broken on purpose
    (:mod:`repro.testing.broken`), for measuring that the checks catch it. The default is CI's job."""

    tiny_seed: int = 0
    rollout_seed: int | None = None
    """None: the stage config's ``actor_rollout_ref.rollout.seed``."""
    variant: str = "ok"


@dataclass(frozen=True)
class Scale:
    """The sizes of a nano job (a GPU job keeps the stage config's)."""

    sft_batch: int = 4
    sft_lr: float = 1e-4
    rl_prompts: int = 4
    rl_n: int = 8
    rl_mini_batch_prompts: int = 1
    """One optimiser step per prompt group (4 a training step): with one step per batch the Seen reward
    rose by z = 2.2–3.6 over 8 steps and the Unseen S2 reward by 1.3; with four, 6.6 and 4.0 on the same
    start (docs/performance.md). The generation, which is the time, is the same."""
    rl_lr: float = 1e-3
    response_length: int = 96
    max_path_tokens: int = 24


def optimiser_steps(stage: NanoStage, scale: Scale) -> int:
    """AdamW steps an RL stage takes: one per mini-batch of prompt groups, one PPO epoch (VERL's default),
    every training step (what weight decay is applied for, :func:`repro.nano.merged_start.decayed_state`)."""
    return stage.steps * (scale.rl_prompts // scale.rl_mini_batch_prompts)


def scale_overrides(stage: NanoStage, kind: str, scale: Scale) -> list[str]:
    """Sizes for a run of a few CPU minutes: steps, batches, lengths, learning rate, no validation."""
    common = [f"trainer.total_training_steps={stage.steps}", "trainer.test_freq=-1"]
    if kind == "sft":
        return [*common, f"data.train_batch_size={scale.sft_batch}", f"optim.lr={scale.sft_lr}",
                "optim.lr_warmup_steps_ratio=0", "optim.lr_scheduler_type=constant",
                f"trainer.save_freq={stage.steps}", "data.max_length=2048"]
    batch, n = scale.rl_prompts, scale.rl_n
    return [*common, f"data.train_batch_size={batch}", f"actor_rollout_ref.rollout.n={n}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={scale.rl_mini_batch_prompts}",
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={scale.rl_mini_batch_prompts * n}",
            f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={batch * n}",
            f"data.max_response_length={scale.response_length}",
            f"repro.forkjoin.max_path_response_length={scale.max_path_tokens}",
            f"actor_rollout_ref.actor.optim.lr={scale.rl_lr}", f"trainer.save_freq={stage.steps}",
            "data.max_prompt_length=1024"]


def cpu_overrides(kind: str, structured: bool) -> list[Override]:
    """What CPU forces on a stage of ``kind`` (``sft`` | ``ppo``), and what makes a GRPO stage's figures
    repeat (:data:`DETERMINISM`); Seen stages also leave flash-attention."""
    base = list(CPU_SFT if kind == "sft" else CPU_PPO + DETERMINISM)
    if not structured:
        model = "model" if kind == "sft" else "actor_rollout_ref.model"
        base += [Override(o.text.format(model=model), o.why) for o in CPU_SEEN]
        if kind == "ppo":
            base += list(DETERMINISM_SEEN)
    return base
