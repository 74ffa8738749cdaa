"""A CPU stand-in for VERL's LLM server manager, backed by ``transformers`` generation.

It implements the one method agent loops call — ``generate(request_id, *, prompt_ids,
sampling_params, ...) -> TokenOutput`` — with vLLM's conventions: ``max_tokens``,
``stop_token_ids`` (a hit stop token is the last returned id), EOS from the generation config,
``temperature``/``top_p``/``top_k``, ``logprobs`` (raw log-probs of the sampled ids). Tests run the
fork-join agent loop through it on the tiny model; ``stop_bias`` raises the logits of the stop
tokens of each request so even an untrained model branches, closes paths and ends summaries.

Like VERL's ``LLMServerClient.generate``, every output carries ``extra_fields`` with
``global_steps`` (the weight version of the server: ``global_steps``, advanced by one every
``update_every`` calls to mimic a weight sync landing mid-trajectory) and ``min_global_steps`` /
``max_global_steps`` set from it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import torch

from pr1_eval.protocol.eos import eos_token_ids


def version_fields(global_steps: int | None) -> dict[str, Any]:
    """The weight-version fields VERL's ``LLMServerClient.generate`` puts on every output."""
    return {"global_steps": global_steps, "min_global_steps": global_steps, "max_global_steps": global_steps}


class HFServerManager:
    """Serve ``generate`` calls from an HF causal LM, one request at a time (thread-safe enough for asyncio)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        stop_bias: float = 0.0,
        seed: int = 0,
        global_steps: int | None = 1,
        update_every: int | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.stop_bias = stop_bias
        self.generator = torch.Generator().manual_seed(seed)
        self.eos = set(eos_token_ids(tokenizer, model.generation_config))  # what vLLM stops on
        self.requests: list[dict[str, Any]] = []
        self.global_steps = global_steps
        self.update_every = update_every
        self._lock = asyncio.Lock()

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        """One request, like ``LLMServerClient.generate``; records ``(request_id, prompt, params)``."""
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append(
            {"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params)}
        )
        async with self._lock:
            ids, logprobs = self._sample(list(prompt_ids), dict(sampling_params))
            version = self.global_steps
            if self.update_every and len(self.requests) % self.update_every == 0 and self.global_steps is not None:
                self.global_steps += 1  # a weight sync lands before the next call
        return TokenOutput(
            token_ids=ids, log_probs=logprobs if sampling_params.get("logprobs") else None, stop_reason="completed",
            extra_fields=version_fields(version),
        )

    @torch.no_grad()
    def _sample(self, prompt: list[int], params: dict[str, Any]) -> tuple[list[int], list[float]]:
        """Token-by-token sampling with a KV cache; stops on EOS, a stop id or ``max_tokens``."""
        stops = {int(i) for i in params.get("stop_token_ids") or []}
        max_tokens = int(params.get("max_tokens", 64))
        temperature = float(params.get("temperature", 1.0))
        ids, logprobs, past = [], [], None
        inputs = torch.tensor([prompt])
        for _ in range(max_tokens):
            out = self.model(input_ids=inputs, past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[0, -1].float()
            raw = torch.log_softmax(logits, dim=-1)
            if self.stop_bias and stops:
                logits[list(stops)] += self.stop_bias
            token = self._pick(logits, temperature, params)
            ids.append(token)
            logprobs.append(float(raw[token]))
            if token in stops or token in self.eos:
                break
            inputs = torch.tensor([[token]])
        return ids, logprobs

    def _pick(self, logits: torch.Tensor, temperature: float, params: dict[str, Any]) -> int:
        if temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / temperature, dim=-1)
        top_k = int(params.get("top_k", -1) or -1)
        if top_k > 0:
            cutoff = torch.topk(probs, min(top_k, probs.numel())).values[-1]
            probs = torch.where(probs >= cutoff, probs, torch.zeros_like(probs))
        top_p = float(params.get("top_p", 1.0))
        if top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, 0) - sorted_probs < top_p
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
        return int(torch.multinomial(probs / probs.sum(), 1, generator=self.generator))
