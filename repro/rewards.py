"""The RL reward: pr1-eval's grader and format check, in the modes the paper's stages use.

Use it as VERL's custom reward function::

    reward.custom_reward_function.path=pkg://repro.rewards
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.mode=tiered

VERL merges ``reward_kwargs`` into every call (``verl.trainer.ppo.reward.get_custom_reward_fn``).
The eval scorer *is* the reward: ``correct`` comes from :func:`pr1_eval.grading.grade_response`
(math-verify in killable worker processes, so it is safe on the worker thread VERL calls a
non-async reward from, where SIGALRM timeouts cannot work) and the block checks from
:func:`pr1_eval.protocol.parse.parse_structure` (the strict Algorithm-1 format check).

**The global step.** ``alternating`` and ``mid_training`` depend on the trainer's global step.
VERL 0.9.1's V1 trainer stamps ``global_steps`` on every prompt it dispatches; the agent-loop
worker hands it to the reward worker, and :class:`repro.reward_manager.TagPreservingRewardManager`
copies it into ``extra_info["global_step"]``, which :func:`resolve_step` reads. An explicit
``step=`` argument wins (tests, offline re-scoring).

**The tags.** VERL's naive reward manager decodes with ``skip_special_tokens=True``, which deletes
the six tags; the tag-preserving manager decodes them back and marks ``extra_info`` so that a
mode that needs tags can refuse to run under the wrong manager instead of silently scoring
every parallel response as sequential.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pr1_eval.grading import grade_response
from pr1_eval.protocol.parse import parse_structure

MODES = ("accuracy", "parallel_accuracy", "tiered", "alternating", "mid_training")
TAG_MODES = frozenset(MODES) - {"accuracy"}
TAGS_KEPT_KEY = "repro_tags_kept"
STEP_KEY = "global_step"
DEFAULT_WINDOW = 10
DEFAULT_TIERED_STEPS = 2
DEFAULT_SWITCH_STEP = 200


@dataclass(frozen=True)
class Judgement:
    """What the reward depends on, for one response."""

    correct: bool
    has_parallel: bool
    format_ok: bool
    grade_status: str
    correct_paper: bool = False


def judge(solution_str: str, ground_truth: Any) -> Judgement:
    """Grade and parse one response. ``correct`` is False when grading timed out or failed."""
    text = "" if solution_str is None else str(solution_str)
    grade = grade_response(text, str(ground_truth))
    structure = parse_structure(text)
    return Judgement(
        grade.correct is True, structure.has_parallel, structure.format_ok, grade.grade_status, grade.correct_paper
    )


def accuracy_reward(j: Judgement) -> float:
    """+1 correct, −1 otherwise."""
    return 1.0 if j.correct else -1.0


def parallel_accuracy_reward(j: Judgement) -> float:
    """Seen stage 2: +1 only if correct *and* at least one block *and* the format check passes."""
    return 1.0 if j.correct and j.has_parallel and j.format_ok else -1.0


def tiered_reward(j: Judgement) -> float:
    """+1.2 correct with a well-formed block; +1.0 correct with no ``<Parallel>`` at all; −1 otherwise
    (a correct answer with a malformed block earns nothing: the bonus must not pay for broken tags)."""
    if j.correct and j.has_parallel and j.format_ok:
        return 1.2
    if j.correct and not j.has_parallel:
        return 1.0
    return -1.0


def tiered_active(step: int, window: int = DEFAULT_WINDOW, tiered_steps: int = DEFAULT_TIERED_STEPS) -> bool:
    """S2's schedule: in each window of ``window`` steps (steps count from 1) the last ``tiered_steps``
    use ``tiered``, the rest ``accuracy`` — i.e. ``(step − 1) mod window ≥ window − tiered_steps``."""
    if window <= 0 or not 0 <= tiered_steps <= window:
        raise ValueError(f"need window > 0 and 0 <= tiered_steps <= window, got {window=} {tiered_steps=}")
    return (step - 1) % window >= window - tiered_steps


def effective_mode(mode: str, step: int | None, window: int, tiered_steps: int, switch_step: int) -> str:
    """The plain mode (accuracy | parallel_accuracy | tiered) that ``mode`` means at ``step``."""
    if mode not in MODES:
        raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode in ("accuracy", "parallel_accuracy", "tiered"):
        return mode
    if step is None:
        raise ValueError(
            f"reward mode {mode!r} needs the global step: pass step=, or run under VERL's V1 trainer with "
            "reward.reward_manager set to repro.reward_manager.TagPreservingRewardManager (it copies the "
            f"step into extra_info[{STEP_KEY!r}])"
        )
    if mode == "mid_training" and step > switch_step:
        return "accuracy"
    return "tiered" if tiered_active(step, window, tiered_steps) else "accuracy"


def resolve_step(step: int | None, extra_info: dict[str, Any] | None) -> int | None:
    """Explicit ``step`` first, then ``extra_info["global_step"]`` (stamped by the reward manager)."""
    if step is not None:
        return int(step)
    value = (extra_info or {}).get(STEP_KEY)
    return None if value is None or int(value) < 0 else int(value)


def check_tags_visible(mode: str, extra_info: dict[str, Any] | None) -> None:
    """Refuse tag-dependent modes when VERL's plain manager (which deletes the tags) decoded the text."""
    info = extra_info or {}
    came_from_verl = "rollout_reward_scores" in info or "num_turns" in info
    if mode in TAG_MODES and came_from_verl and not info.get(TAGS_KEPT_KEY):
        raise RuntimeError(
            f"reward mode {mode!r} needs the six tags, but this response was decoded by a reward manager that "
            "strips special tokens; set reward.reward_manager.source=importlib, "
            "reward.reward_manager.module.path=pkg://repro.reward_manager, "
            "reward.reward_manager.name=TagPreservingRewardManager (every repro stage config does)"
        )


_PLAIN = {"accuracy": accuracy_reward, "parallel_accuracy": parallel_accuracy_reward, "tiered": tiered_reward}


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    mode: str = "accuracy",
    step: int | None = None,
    window: int = DEFAULT_WINDOW,
    tiered_steps: int = DEFAULT_TIERED_STEPS,
    switch_step: int = DEFAULT_SWITCH_STEP,
    **kwargs: Any,
) -> dict[str, float]:
    """VERL custom reward: ``{"score": reward, "acc": 0/1, ...}`` (extra keys are logged by VERL).

    ``mode``: accuracy | parallel_accuracy | tiered | alternating | mid_training. ``window`` and
    ``tiered_steps`` shape ``alternating``; ``switch_step`` is where ``mid_training`` drops to
    ``accuracy`` (after step 200 by default). Unknown keyword arguments from VERL are ignored.
    """
    check_tags_visible(mode, extra_info)
    resolved = resolve_step(step, extra_info)
    plain = effective_mode(mode, resolved, window, tiered_steps, switch_step)
    j = judge(solution_str, ground_truth)
    return {
        "score": _PLAIN[plain](j),
        "acc": float(j.correct),
        "acc_paper": float(j.correct_paper),
        "has_parallel": float(j.has_parallel),
        "format_ok": float(j.format_ok),
        "tiered_active": float(plain == "tiered"),
        "grade_ok": float(j.grade_status in ("ok", "no_answer")),
        "step": float(-1 if resolved is None else resolved),
    }
