"""The RL reward: pr1-eval's grader and format check, in the modes the paper's stages use.

Use it as VERL's custom reward function::

    reward.custom_reward_function.path=pkg://repro.rewards
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.mode=tiered

VERL merges ``reward_kwargs`` into every call (``verl.trainer.ppo.reward.get_custom_reward_fn``).
The eval scorer *is* the reward: ``correct`` comes from :func:`pr1_eval.grading.grade_response`
(math-verify in killable worker processes, so it is safe on the worker thread VERL calls a
non-async reward from, where SIGALRM timeouts cannot work); ``has_parallel`` from
:func:`pr1_eval.protocol.parse.parse_structure` (equal to the official ``count("<Parallel>") ≥ 1``).

**The paper's readings by default.** The official rewards (:mod:`repro.official`) check the blocks
with the lenient ``check_parallel_thinking_format`` and, in the GSM8K stage, read the first
``Final Answer:`` number of the whole text; those are the defaults here (``format_check=official``,
``gsm8k_answer=official``, a GSM8K miss scoring ``miss_score=0.0`` as the official reward's does).
pr1-eval's stricter readings are options: ``format_check=strict`` (the Algorithm-1 parse),
``gsm8k_answer=grader`` (the eval grader's answer), ``miss_score=-1.0``. The correctness of the
``accuracy``/``tiered`` modes is pr1-eval's grader (math-verify) by default (``checker=math_verify``;
the scorer of the checkpoints is the reward) and the paper's string checker with ``checker=paper``
(``math_dapo``: the last ``Final Answer:`` line of the last 300 characters); the difference is
deviation 4 of ``repro/README.md``, with its measured size.

**The global step.** ``alternating`` and ``mid_training`` depend on the trainer's global step.
VERL 0.9.1's V1 trainer stamps ``global_steps`` on every prompt it dispatches; the agent-loop
worker hands it to the reward worker, and :class:`repro.reward_manager.TagPreservingRewardManager`
copies it into ``extra_info["global_step"]``, which :func:`training_step` reads. An explicit
``step=`` argument wins (tests, offline re-scoring).

**The tags.** VERL's naive reward manager decodes with ``skip_special_tokens=True``, which deletes
the six tags; the tag-preserving manager decodes them back and marks ``extra_info`` so that a
mode that needs tags can refuse to run under the wrong manager instead of silently scoring
every parallel response as sequential.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pr1_eval.grading import grade_response
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.records.sample import SCORED_STATUSES
from repro.official import official_format_ok, official_gsm8k_correct

MODES = ("accuracy", "parallel_accuracy", "tiered", "alternating", "mid_training")
TAG_MODES = frozenset(MODES) - {"accuracy"}
TAGS_KEPT_KEY = "repro_tags_kept"
STEP_KEY = "global_step"
DEFAULT_WINDOW = 10
DEFAULT_TIERED_STEPS = 2
DEFAULT_SWITCH_STEP = 200
FORMAT_CHECKS = ("official", "strict")
GSM8K_ANSWERS = ("official", "grader")
CHECKERS = ("math_verify", "paper")
#: What the official GSM8K-stage reward gives a response that is not (right and parallel and well-formed).
OFFICIAL_MISS_SCORE = 0.0


@dataclass(frozen=True)
class Reading:
    """Which rules decide ``correct`` and ``format_ok``: the official ones by default."""

    format_check: str = "official"
    gsm8k_answer: str = "official"
    checker: str = "math_verify"

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("format_check", self.format_check, FORMAT_CHECKS),
            ("gsm8k_answer", self.gsm8k_answer, GSM8K_ANSWERS),
            ("checker", self.checker, CHECKERS),
        ):
            if value not in allowed:
                raise ValueError(f"reward_kwargs.{name}={value!r} is not one of {', '.join(allowed)}")


@dataclass(frozen=True)
class Judgement:
    """What the reward depends on, for one response."""

    correct: bool
    has_parallel: bool
    format_ok: bool
    grade_status: str
    correct_paper: bool = False
    format_official: bool = False
    correct_gsm8k_official: bool = False

    def under(self, reading: Reading, mode: str) -> Judgement:
        """This judgement with ``correct`` and ``format_ok`` taken from ``reading``'s rules
        (the GSM8K answer rule applies to ``parallel_accuracy``, the GSM8K stage's mode)."""
        if mode == "parallel_accuracy" and reading.gsm8k_answer == "official":
            correct = self.correct_gsm8k_official
        else:
            correct = self.correct_paper if reading.checker == "paper" else self.correct
        format_ok = self.format_official if reading.format_check == "official" else self.format_ok
        return replace(self, correct=correct, format_ok=format_ok)


def judge(solution_str: str, ground_truth: Any) -> Judgement:
    """Grade and parse one response under every reading. ``correct`` (math-verify) is False when
    grading timed out or failed; ``format_ok`` is the strict parse's verdict."""
    text = "" if solution_str is None else str(solution_str)
    grade = grade_response(text, str(ground_truth))
    structure = parse_structure(text)
    return Judgement(
        grade.correct is True,
        structure.has_parallel,
        structure.format_ok,
        grade.grade_status,
        grade.correct_paper is True,
        official_format_ok(text),
        official_gsm8k_correct(text, ground_truth),
    )


def accuracy_reward(j: Judgement) -> float:
    """+1 correct, −1 otherwise."""
    return 1.0 if j.correct else -1.0


def parallel_accuracy_reward(j: Judgement, miss_score: float = OFFICIAL_MISS_SCORE) -> float:
    """Seen stage 2 (GSM8K): +1 only if correct *and* at least one block *and* the format check
    passes, else ``miss_score`` (0 as in the official reward; GRPO's advantages are the same for
    any miss score below 1, since they are invariant to an affine map of the group's rewards)."""
    return 1.0 if j.correct and j.has_parallel and j.format_ok else miss_score


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


def training_step(step: int | None, extra_info: dict[str, Any] | None) -> int | None:
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


def plain_reward(plain: str, j: Judgement, miss_score: float) -> float:
    """The score of plain mode ``plain`` (accuracy | parallel_accuracy | tiered) for ``j``."""
    if plain == "parallel_accuracy":
        return parallel_accuracy_reward(j, miss_score)
    return tiered_reward(j) if plain == "tiered" else accuracy_reward(j)


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
    format_check: str = "official",
    gsm8k_answer: str = "official",
    checker: str = "math_verify",
    miss_score: float = OFFICIAL_MISS_SCORE,
    **kwargs: Any,
) -> dict[str, float]:
    """VERL custom reward: ``{"score": reward, "acc": 0/1, ...}`` (extra keys are logged by VERL).

    ``mode``: accuracy | parallel_accuracy | tiered | alternating | mid_training. ``window`` and
    ``tiered_steps`` shape ``alternating``; ``switch_step`` is where ``mid_training`` drops to
    ``accuracy`` (after step 200 by default). ``format_check`` (official | strict), ``gsm8k_answer``
    (official | grader), ``checker`` (math_verify | paper) and ``miss_score`` choose the reading (the
    module docstring). Unknown keyword arguments from VERL are ignored.
    """
    reading = Reading(format_check, gsm8k_answer, checker)
    check_tags_visible(mode, extra_info)
    resolved = training_step(step, extra_info)
    plain = effective_mode(mode, resolved, window, tiered_steps, switch_step)
    full = judge(solution_str, ground_truth)
    j = full.under(reading, plain)
    return {
        "score": plain_reward(plain, j, float(miss_score)),
        "acc": float(full.correct),
        "acc_paper": float(full.correct_paper),
        "acc_reward": float(j.correct),
        "has_parallel": float(j.has_parallel),
        "format_ok": float(j.format_ok),
        "format_strict": float(full.format_ok),
        "format_official": float(full.format_official),
        "tiered_active": float(plain == "tiered"),
        "grade_ok": float(j.grade_status in SCORED_STATUSES),
        "step": float(-1 if resolved is None else resolved),
    }
