"""The Unseen recipe's rollout/actor gap, measured by token region: what its position ids cost.

A serving engine (vLLM in a GPU job, the CPU rollout here) prefills every request plainly, so the
tokens after ``</Parallel>`` sit at ``base + L1 + L2 + …`` (every path token counted); the
structured actor that trains on the same tokens places them at ``base + max(Li) + 1``
(:mod:`repro.spans`). So an Unseen job samples from one policy and trains another with no
importance correction — in the official code as well (deviation 7 of ``repro/README.md``).

:func:`position_gap` measures it on real fork-join rollouts of a checkpoint: it samples them with
the fork-join machine the agent loop drives (:class:`repro.forkjoin.ForkJoinRollout`, the CPU
sampler of :mod:`repro.testing.fake_server`), then recomputes every response token's log-prob
twice with the structured mask: once with the training positions (spans), once with the serving
positions (:func:`serving_positions`: each path at its own request's positions, every other token at
its index). The difference is the cost of the positions alone; the difference
between the training forward and the sampler's own log-probs is what VERL's ``rollout_corr/kl``
sees (it adds that path 2 saw path 1 inside the summary request, deviation 6). Each is reported
per region: ``before`` (response tokens before the first ``<Path>``), ``path`` (inside a path
span), ``after`` (every other token after the first path: summaries, later main line).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from pr1_eval.protocol.eos import eos_token_ids
from pr1_eval.protocol.tags import resolve_tag_ids
from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput

REGIONS = ("before", "path", "after")


def token_regions(length: int, spans: Sequence[tuple[int, int, int]]) -> list[str]:
    """The region of each of ``length`` response tokens, from the rollout's path spans."""
    regions = ["before"] * length
    if not spans:
        return regions
    first = min(start for _, start, _ in spans)
    for i in range(first, length):
        regions[i] = "after"
    for _, start, end in spans:
        for i in range(start, min(end, length)):
            regions[i] = "path"
    return regions


def serving_positions(length: int, spans: Sequence[tuple[int, int, int]], response_start: int = 0) -> list[int]:
    """The positions a serving engine gave each token: its index, except inside a path, which was its
    own request on the block's prefix (path ``j`` of a block starts where the block's first path does)."""
    positions = list(range(length))
    firsts: dict[int, int] = {}
    for block, start, _ in sorted(spans):
        firsts.setdefault(block, start)
    for block, start, end in spans:
        base = response_start + firsts[block]
        for offset in range(min(end, length - response_start) - start):
            positions[response_start + start + offset] = base + offset
    return positions


def summarise(gaps: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Mean and max absolute gap per region (NaN mean where a region has no token)."""
    out = {}
    for region in REGIONS:
        values = [abs(v) for v in gaps.get(region, [])]
        out[region] = {"tokens": len(values), "mean_abs": sum(values) / len(values) if values else math.nan,
                       "max_abs": max(values) if values else math.nan}
    return out


def _forward_logprobs(model: Any, ids: list[int], prompt_len: int, mask: Any, positions: Any) -> list[float]:
    """Log-probs of the response tokens under ``mask`` (bool [L, L]) and ``positions`` ([L])."""
    import torch

    from pr1_eval.protocol.mask import additive_mask

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), attention_mask=additive_mask(mask[None, None], torch.float32),
                       position_ids=positions[None]).logits[0].float().log_softmax(-1)
    return [float(logits[i - 1, ids[i]]) for i in range(prompt_len, len(ids))]


def position_gap(model_dir: str, prompts: Sequence[str], *, samples: int = 4, response_length: int = 96,
                 max_path_tokens: int = 24, seed: int = 0) -> dict[str, Any]:
    """Sample fork-join rollouts of ``model_dir`` and measure the gaps per region (module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.spans import mask_and_positions_from_spans
    from repro.testing.fake_server import HFServerManager

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    server = HFServerManager(model, tokenizer, seed=seed, global_steps=None)

    async def generate(prompt: list[int], stops: list[int], max_tokens: int, temperature: float | None) -> RawOutput:
        params = {"stop_token_ids": stops, "max_tokens": max_tokens, "temperature": temperature or 1.0, "logprobs": 1}
        out = await server.generate("r", prompt_ids=prompt, sampling_params=params)
        return RawOutput(list(out.token_ids), list(out.log_probs or []))

    config = ForkJoinConfig(response_length=response_length, max_path_response_length=max_path_tokens)
    newline = list(tokenizer.encode("\n", add_special_tokens=False))
    fork = ForkJoinRollout(resolve_tag_ids(tokenizer), eos_token_ids(tokenizer, model.generation_config), newline,
                           config, generate)
    vs_rollout: dict[str, list[float]] = {r: [] for r in REGIONS}
    vs_positions: dict[str, list[float]] = {r: [] for r in REGIONS}
    blocks = 0
    for text in prompts:
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                 tokenize=False)
        prompt = list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
        for _ in range(samples):
            traj = asyncio.run(fork.run(prompt))
            blocks += traj.blocks
            ids = prompt + traj.ids
            mask, structured = mask_and_positions_from_spans(len(ids), traj.path_spans, response_start=len(prompt))
            trained = _forward_logprobs(model, ids, len(prompt), mask, structured)
            serving = _forward_logprobs(model, ids, len(prompt), mask,
                                        torch.tensor(serving_positions(len(ids), traj.path_spans, len(prompt))))
            regions = token_regions(len(traj.ids), traj.path_spans)
            for i, region in enumerate(regions):
                if not traj.generated_mask[i]:
                    continue  # inserted tags carry no sampled log-prob
                vs_rollout[region].append(trained[i] - traj.log_probs[i])
                vs_positions[region].append(trained[i] - serving[i])
    return {"model": model_dir, "rollouts": len(prompts) * samples, "blocks": blocks,
            "actor_vs_rollout": summarise(vs_rollout), "training_vs_serving_positions": summarise(vs_positions)}
