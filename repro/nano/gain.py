"""Did an RL stage learn? Its trained policy against the frozen start model, on the stage's own problems.

**The verdict of an RL stage's learning.** After the stage, the start model (frozen: the control) and
the merged trained model each answer the stage's training problems (:data:`PROBLEMS` problems whose
true answer is the stage's gold, :data:`PER_PROBLEM` samples each, sampled exactly as the stage's
rollouts are: temperature 1, the same cap, fork-join for a structured stage). A sample counts when it
earns the reward the stage's gold was chosen for (:func:`repro.nano.targets.earns`). The statistic is
the **Mantel–Haenszel z** over problems (Mantel and Haenszel 1959, J. Natl Cancer Inst.): each problem
is a 2 × 2 table (model × earned), and under "the trained model is the start model" the trained
model's count in a problem, given both models' total there, is hypergeometric, so

    z = Σ_i (c_final,i − T_i/2) / √(Σ_i n² T_i (2n − T_i) / ((2n)² (2n − 1)))

with n samples per model and T_i = c_start,i + c_final,i. It is exact in its moments under the null
whatever each problem's chance (a learning-rate-0 stage gives two independent samplings of the same
weights: z ≈ N(0, 1), tested by simulation with chances near 0, where an unpooled paired SE is too
narrow), and it needs no variance estimate per problem.

**Why this and not the trend of the rewards over the steps** (:func:`repro.nano.checks.trend_z`, still
printed): the trend sees 32 prompt groups, each met once or twice, so a learning stage reaches z of
4-5 over a bar of 2.5 (a good commit fails about one draw in 55, and a frozen stage passes with the
0.6 % chance a normal z has of exceeding 2.5); the
trained model against its own start, with 256 samples each on the same problems, reached z of 7.6-17.6
on the held-out working draws measured (``docs/performance.md``), so a bar of :data:`Z_GAIN` = 5 sits 1.5 or more from both
a learning stage and the null (a frozen stage reaches 3.5 once in ~4,300 draws). The samples are drawn
with other seeds than the stage's rollouts (:data:`START_SEED`, :data:`FINAL_SEED`): the two samplings of
a frozen model must be independent.

**The parallel ratio against the same control** (:func:`parallel_holds_check`). The Seen GSM8K reward pays
for a block every step, but its start model already branches in ~97 % of samples, so the ratio can only
hold or fall; the trend of the rollouts' ratio over the steps (32 prompt groups) sat 1.0-1.3 above its bar
of −2.5 on the working draws. The same 256 + 256 samples that judge the reward also say whether each
sample opened a block (``has_parallel`` of :func:`pr1_eval.protocol.parse.parse_structure`, the flag the
stored rollouts' parallel ratio is the mean of), so the trained model's block share is judged against the
frozen start model's by the same Mantel–Haenszel z, at no extra sampling. It fails when z ≤ −:data:`Z_HOLD`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from repro.nano.checks import SATURATED, Check
from repro.nano.data import arithmetic_rows
from repro.nano.targets import earns, sample_responses

Z_GAIN = 5.0
Z_HOLD = 4.5
"""The parallel ratio's bar (:func:`parallel_holds_check`): it fails at z ≤ −4.5."""
PROBLEMS = 16
PER_PROBLEM = 16
START_SEED, FINAL_SEED = 7_001, 7_002
RULE = (f"the trained model earns the reward on the stage's problems more often than the frozen start model, by a "
        f"Mantel–Haenszel z ≥ {Z_GAIN:g} ({PROBLEMS} problems × {PER_PROBLEM} samples each)")
HOLD_RULE = (f"the reward pays for blocks every step and the start model already branches in ≥ {SATURATED:.0%} of its samples: "
             f"the trained model's share of samples with a block must not fall below the frozen start model's by a "
             f"Mantel–Haenszel z ≤ −{Z_HOLD:g} (the same {PROBLEMS} problems × {PER_PROBLEM} samples as 'beats its start')")


def mantel_haenszel_z(start: Any, final: Any) -> float:
    """The Mantel–Haenszel z of ``final`` above ``start`` (problems × samples arrays of 0/1, the same shape);
    0 when no problem has both outcomes (nothing to compare)."""
    s, f = np.asarray(start, dtype=float), np.asarray(final, dtype=float)
    if s.shape != f.shape or s.ndim != 2 or s.shape[1] < 1:
        raise ValueError(f"need two (problems × samples) arrays of one shape, got {s.shape} and {f.shape}")
    n = s.shape[1]
    total = s.sum(axis=1) + f.sum(axis=1)
    variance = float((n * n * total * (2 * n - total) / ((2 * n) ** 2 * (2 * n - 1))).sum()) if n > 1 else 0.0
    excess = float((f.sum(axis=1) - total / 2).sum())
    if variance <= 0:
        return 0.0 if excess == 0 else math.copysign(math.inf, excess)
    return excess / math.sqrt(variance)


def gain_check(stage: str, start: Any, final: Any, required: bool = True) -> Check:
    """The verdict (module docstring); not ``required``: reported, passing whatever it shows."""
    z = mantel_haenszel_z(start, final)
    s, f = np.asarray(start, dtype=float), np.asarray(final, dtype=float)
    figures = (f"earned the reward: start model {s.mean():.3f}, trained {f.mean():.3f} of {s.size} samples each; "
               f"z = {z:.1f} over {s.shape[0]} problems")
    if not required:
        return Check(stage, "beats its start (reported)", True, figures, "reported only: not a learnable task")
    return Check(stage, "beats its start", z >= Z_GAIN, figures, RULE)


def parallel_holds_check(stage: str, start: Any, final: Any) -> Check:
    """The parallel ratio of the trained model against the frozen start model's, on the samples "beats its
    start" draws (``start``, ``final``: problems × samples 0/1, whether each sample opened a block).

    Statistic: :func:`mantel_haenszel_z` of the trained model's block indicator above the start model's.
    Rule: pass unless z ≤ −:data:`Z_HOLD` (4.5). Why 4.5, for 16 problems × 16 samples a model:

    - a frozen policy (learning rate 0: two samplings of one model) gives z ≈ N(0, 1) at the tiny models'
      ~0.9-0.99 block shares (simulated in ``tests/repro/test_nano_gain.py``): it falls within 1.5 of the
      bar (z ≤ −3.0) with the chance 0.13 % (1 in 740) and below it with 3.4e-6;
    - a collapse of the ratio from 0.97 to 0.80 has z = −5.9 at its expected counts (a simulated mean −6.0,
      SD 0.8: 1.5 below the bar) and fails in ~97 % of draws; 0.97 → 0.70 (z ≈ −8.2) always; a smaller fall,
      0.97 → 0.85 (z ≈ −4.7), in ~60 %. The bar sits halfway between the null's margin and that collapse.

    A rise passes (the reward pays for blocks); the share's trend over the steps is still printed
    ("parallel ratio trend (reported)", :func:`repro.nano.checks.parallel_ratio`)."""
    z = mantel_haenszel_z(start, final)
    s, f = np.asarray(start, dtype=float), np.asarray(final, dtype=float)
    figures = (f"has a block: start model {s.mean():.3f}, trained {f.mean():.3f} of {s.size} samples each; "
               f"z = {z:.1f} over {s.shape[0]} problems")
    return Check(stage, "parallel ratio holds (against its start)", not z <= -Z_HOLD, figures, HOLD_RULE)


@dataclass(frozen=True)
class Outcomes:
    """One model's samples on the stage's problems, each a (problems × samples) 0/1 array: ``earned`` the
    reward the stage's gold was chosen for, ``parallel`` opened a block (the rollouts' ``has_parallel``)."""

    earned: np.ndarray
    parallel: np.ndarray


def outcomes(model: str, target: int, *, structured: bool, mode: str, response_length: int, max_path_tokens: int,
             seed: int, problems: int = PROBLEMS, per_problem: int = PER_PROBLEM) -> Outcomes:
    """Whether each sample of ``model`` on the stage's problems earns the reward and whether it opened a
    block, from one sampling (the job's sizes by default; ``bench/bench_gain_null.py --small`` asks for fewer)."""
    from repro.rewards import judge

    rows = arithmetic_rows(problems, 0, "nano-arith", answer=target)  # the stage's GSM8K-style problems
    texts = sample_responses(model, rows, structured=structured, response_length=response_length,
                             max_path_tokens=max_path_tokens, per_problem=per_problem, seed=seed)
    judgements = [judge(t, str(target)) for t in texts]
    return Outcomes(np.array([earns(j, mode) for j in judgements], dtype=float).reshape(problems, per_problem),
                    np.array([j.has_parallel for j in judgements], dtype=float).reshape(problems, per_problem))


def earned(model: str, target: int, *, structured: bool, mode: str, response_length: int, max_path_tokens: int,
           seed: int, problems: int = PROBLEMS, per_problem: int = PER_PROBLEM) -> np.ndarray:
    """(problems × samples) 0/1: whether each sample earns the reward (:func:`outcomes`' ``earned``)."""
    return outcomes(model, target, structured=structured, mode=mode, response_length=response_length,
                    max_path_tokens=max_path_tokens, seed=seed, problems=problems, per_problem=per_problem).earned


def frozen_control(start_model: str, trained_model: str, target: int, *, structured: bool, mode: str,
                   response_length: int, max_path_tokens: int, problems: int = PROBLEMS,
                   per_problem: int = PER_PROBLEM) -> tuple[Outcomes, Outcomes]:
    """The start model's and the trained model's outcomes (earned, opened a block), each sampled with its own seed
    (the job's sizes by default; the draw benches' smoke asks for fewer)."""
    common: dict[str, Any] = {"structured": structured, "mode": mode, "response_length": response_length,
                              "max_path_tokens": max_path_tokens, "problems": problems, "per_problem": per_problem}
    return (outcomes(start_model, target, seed=START_SEED, **common),
            outcomes(trained_model, target, seed=FINAL_SEED, **common))
