"""The RL golds of a nano stage, chosen on the machine from the stage's own start model.

Why not a fixed answer: the tiny models are trained on each machine, and float arithmetic differs
between CPUs (BLAS builds, vector widths), so a new machine trains other weights from the same seed
— a new draw. A target measured once on one machine (``2`` for the structured model: right on 6.5 %
of its rollouts there) was right on 1 of 32 rollouts on another, where GRPO had nothing to
reinforce and the Unseen reward check failed whatever the commit. So each RL stage's golds are the
answer its start model, sampled as the stage samples it (fork-join for the Unseen stages, plain
sampling for the Seen ones; temperature 1, the stage's response cap), earns the stage's reward with
most often. The problems stay true: every RL problem is one whose real answer is the target
(:func:`repro.nano.data.arithmetic_rows`). What GRPO then learns is to give that answer more often.

The choice is a function of the start model and a seed: the same machine and commit choose the same
target, and the job records it (``nano.json``) beside the share measured here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pr1_eval.decoding.base import SequentialDecoder
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.prompts import load_template
from repro.nano.data import arithmetic_rows

FINAL_NUMBER = re.compile(r"Final Answer:\s*(-?\d+)")
CANDIDATES = 4
"""How many of the most frequent final answers are graded by the reward's own rule (the rest are
rarer in the text, so they cannot be earned more often)."""


@dataclass(frozen=True)
class TargetChoice:
    """The chosen gold and the evidence: each candidate's share of reward-earning rollouts."""

    target: int
    share: float
    rollouts: int
    shares: dict[int, float]

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "share": round(self.share, 4), "rollouts": self.rollouts,
                "candidates": {str(k): round(v, 4) for k, v in self.shares.items()}}


def earns(judgement: Any, mode: str) -> bool:
    """Whether a rollout judged against a candidate gold earns the stage's positive reward:
    ``parallel_accuracy`` also asks for a well-formed block; every other mode pays for a right answer."""
    if mode == "parallel_accuracy":
        return bool(judgement.correct and judgement.has_parallel and judgement.format_ok)
    return bool(judgement.correct)


def enough_problems(answer: int, count: int, seed: int) -> bool:
    """Whether ``count`` distinct one-digit problems have the answer ``answer``."""
    try:
        arithmetic_rows(count, seed, "probe", answer=answer)
    except Pr1EvalError:
        return False
    return True


def pick_target(responses: list[str], grade: Callable[[str, int], bool], *, problems_needed: int,
                seed: int) -> TargetChoice:
    """The candidate answer that the most ``responses`` earn the reward with (ties: the smaller).

    Candidates are the :data:`CANDIDATES` most frequent ``Final Answer:`` numbers that enough
    distinct problems have; each is then graded on every response by ``grade`` (the reward's rule)."""
    counts = Counter(m[-1] for m in (FINAL_NUMBER.findall(r) for r in responses) if m)
    ranked = [int(a) for a, _ in sorted(counts.items(), key=lambda kv: (-kv[1], int(kv[0])))]
    candidates = [a for a in ranked if a >= 0 and enough_problems(a, problems_needed, seed)][:CANDIDATES]
    if not candidates or not responses:
        raise Pr1EvalError(f"none of the start model's {len(responses)} sampled responses ends in a "
                           "'Final Answer:' number that a one-digit problem has; the tiny model did not learn "
                           "the format (rebuild it: pr1-eval tiny-model --force)")
    shares = {a: sum(grade(r, a) for r in responses) / len(responses) for a in candidates}
    best = min(shares, key=lambda a: (-shares[a], a))
    return TargetChoice(best, shares[best], len(responses), shares)


def sample_responses(model_dir: str, rows: list[dict[str, str]], *, structured: bool, response_length: int,
                     max_path_tokens: int, per_problem: int, seed: int) -> list[str]:
    """``per_problem`` responses of the model to each row's problem at temperature 1, decoded with the
    tags kept: the paper's fork-join protocol (the Unseen rollout) when ``structured``, else plain
    sampling, each capped at ``response_length`` tokens like the stage's rollouts (paths at
    ``max_path_tokens``). Batched through pr1-eval's HF engine and decoders: the same step machine the
    stage's agent loop drives, at a fraction of one-request-at-a-time's cost."""
    import torch

    from pr1_eval.engines.hf import HFEngine

    template = load_template("parallel_r1_v3")
    engine = HFEngine(model_dir, device="cpu", dtype="float32")
    tok = engine.tokenizer
    contexts = [list(tok(tok.apply_chat_template([{"role": "user", "content": template.render(row["problem"])}],
                                                 add_generation_prompt=True, tokenize=False),
                         add_special_tokens=False)["input_ids"]) for row in rows]
    decoder = ForkJoinDecoder(max_path_tokens=max_path_tokens) if structured else SequentialDecoder()
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=response_length, seed=seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one float order whatever the core count (repro.testing.threads)
    try:
        samples = decoder.decode(engine, contexts, per_problem, sampling, [row["id"] for row in rows])
    finally:
        torch.set_num_threads(threads)
    eos = tok.eos_token or ""
    return [tok.decode(s.token_ids, skip_special_tokens=False).replace(eos, "") for group in samples for s in group]


def choose_target(model_dir: str, *, structured: bool, mode: str, response_length: int, max_path_tokens: int,
                  problems_needed: int, seed: int = 0, screen_problems: int = 8, confirm_problems: int = 4,
                  per_problem: int = 8) -> TargetChoice:
    """The gold for an RL stage starting from ``model_dir`` whose reward mode is ``mode``, in two rounds.

    Screen: ``screen_problems × per_problem`` responses to problems of any answer give the candidates
    (the most frequent final answers). Confirm: each candidate is graded on responses to problems whose
    true answer it is (``confirm_problems × per_problem`` each), because the model reads the problem a
    little: an answer it writes often elsewhere can be rare where it is right (measured here: 12.5 % on
    mixed problems, 0 of 32 at the stage's first step). The best confirmed share wins."""
    from repro.rewards import judge

    def responses(rows: list[dict[str, str]]) -> list[str]:
        return sample_responses(model_dir, rows, structured=structured, response_length=response_length,
                                max_path_tokens=max_path_tokens, per_problem=per_problem, seed=seed)

    screened = pick_target(responses(arithmetic_rows(screen_problems, seed, "screen", answer=None)),
                           lambda r, a: earns(judge(r, str(a)), mode), problems_needed=problems_needed, seed=seed)
    shares: dict[int, float] = {}
    count = 0
    for answer in screened.shares:
        confirm = responses(arithmetic_rows(confirm_problems, seed + 7, "confirm", answer=answer))
        shares[answer] = sum(earns(judge(r, str(answer)), mode) for r in confirm) / len(confirm)
        count += len(confirm)
    best = min(shares, key=lambda a: (-shares[a], a))
    return TargetChoice(best, shares[best], count, shares)
