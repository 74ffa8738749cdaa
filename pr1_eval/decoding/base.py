"""What a decoding strategy returns, and the interface the runner calls.

A strategy turns prompt contexts into k responses each. Sequential decoding is one engine
request per problem with ``n=k``; fork-join and structured decoding make several engine calls
per sample and report them here so ``report`` can show calls, tokens and critical path.

Wall clock (``docs/efficiency.md``): every decoder times its engine calls. A sample's ``wall_s``
is the seconds from the start of the first engine call that worked on it to the end of the one
that finished it, so it includes the time its batch-mates kept the engine busy: it is the latency
this batch gave it, not what the sample would cost alone. ``waves`` lists the engine calls of the
last ``decode`` (:class:`Wave`: kind, requests, seconds), which the runner adds to run.json's
``generation`` section.
"""

from __future__ import annotations

import hashlib
import time
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
    wall_s: float | None = None


@dataclass(frozen=True)
class Wave:
    """One engine call of a decode: ``kind`` (``sequential``; fork-join's ``main``, ``paths``,
    ``summary``; the structured decoder's ``batch``), how many requests (or rows) it carried, and
    its wall-clock seconds."""

    kind: str
    requests: int
    wall_s: float


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

    def __init__(self) -> None:
        self.waves: list[Wave] = []
        """The one engine call of the last :meth:`decode`."""

    def decode(
        self, engine: Engine, contexts: Sequence[Sequence[int]], k: int, sampling: SamplingConfig, request_ids: Sequence[str]
    ) -> list[list[DecodedSample]]:
        requests = [
            GenerationRequest(request_id=rid, prompt_token_ids=list(ctx), n=k, seed=request_seed(sampling.seed, rid))
            for ctx, rid in zip(contexts, request_ids, strict=True)
        ]
        started = time.perf_counter()
        outputs = engine.generate(requests, sampling)
        wall = time.perf_counter() - started
        self.waves = [Wave(self.name, len(requests), wall)]
        return [
            [
                DecodedSample(
                    token_ids=c.token_ids,
                    text=c.text,
                    finish_reason=c.finish_reason,
                    critical_path_tokens=len(c.token_ids),
                    logprobs=c.logprobs,
                    wall_s=wall,
                )
                for c in completions
            ]
            for completions in outputs
        ]

    def describe(self) -> dict[str, Any]:
        return {"mode": self.name}
