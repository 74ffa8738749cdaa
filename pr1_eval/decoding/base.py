"""What a decoding strategy returns, and the interface the runner calls.

A strategy turns prompt contexts into k responses each. Sequential decoding is one engine
request per problem with ``n=k``; fork-join and structured decoding make several engine calls
per sample and report them here so ``report`` can show calls, tokens and critical path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pr1_eval.engines.base import Engine, GenerationRequest, SamplingConfig


@dataclass
class DecodedSample:
    """One finished response. ``token_ids`` is the response only (no prompt, no pad/eos).

    ``generated_mask`` (fork-join) is False on tokens the protocol inserted rather than sampled;
    ``None`` means every token was sampled. ``logprobs`` hold 0.0 on inserted tokens.
    """

    token_ids: list[int]
    text: str
    finish_reason: str
    engine_calls: int = 1
    critical_path_tokens: int | None = None
    engine_inserted_tokens: int = 0
    logprobs: list[float] | None = None
    generated_mask: list[bool] | None = None


class Decoder(Protocol):
    name: str

    def decode(
        self, engine: Engine, contexts: Sequence[Sequence[int]], k: int, sampling: SamplingConfig, request_ids: Sequence[str]
    ) -> list[list[DecodedSample]]:
        """``k`` samples for each context, in order."""
        ...

    def describe(self) -> dict[str, Any]:
        """Mode and parameters for ``run.json``."""
        ...


def request_seed(run_seed: int | None, request_id: str) -> int | None:
    """A per-request seed derived from the run seed and a stable id, so a sample's randomness
    does not depend on how requests were batched or on which chunk a resumed run starts with."""
    if run_seed is None:
        return None
    digest = hashlib.sha256(f"{run_seed}:{request_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


class SequentialDecoder:
    """Plain sampling: one request per context with ``n=k`` (vLLM shares the prefix)."""

    name = "sequential"

    def decode(
        self, engine: Engine, contexts: Sequence[Sequence[int]], k: int, sampling: SamplingConfig, request_ids: Sequence[str]
    ) -> list[list[DecodedSample]]:
        requests = [
            GenerationRequest(request_id=rid, prompt_token_ids=list(ctx), n=k, seed=request_seed(sampling.seed, rid))
            for ctx, rid in zip(contexts, request_ids, strict=True)
        ]
        outputs = engine.generate(requests, sampling)
        return [
            [
                DecodedSample(
                    token_ids=c.token_ids,
                    text=c.text,
                    finish_reason=c.finish_reason,
                    critical_path_tokens=len(c.token_ids),
                    logprobs=c.logprobs,
                )
                for c in completions
            ]
            for completions in outputs
        ]

    def describe(self) -> dict[str, Any]:
        return {"mode": self.name}
