"""The engine interface every backend implements (HF transformers, vLLM, test fakes).

Decoding strategies (sequential, fork-join) only talk to this interface: they hand over token-id
contexts and get token-id continuations back, so fork-join works on any engine. Requests carry
``n`` (samples per context, so vLLM sees one request with ``SamplingParams(n=k)`` rather than k
copies) and their own stop tokens and budget (fork-join stops paths at ``</Path>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from pr1_eval.protocol.paper_settings import PAPER_MAX_NEW_TOKENS, PAPER_TEMPERATURE, PAPER_TOP_P

GREEDY_BELOW = 1e-5
"""Temperatures below this are greedy decoding (vLLM's ``_SAMPLING_EPS``; the HF engine follows it)."""


def is_greedy(temperature: float) -> bool:
    """Whether ``temperature`` means greedy decoding, on every engine alike."""
    return temperature < GREEDY_BELOW


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling parameters shared by every request of a run. Paper defaults."""

    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    top_k: int = 0
    max_new_tokens: int = PAPER_MAX_NEW_TOKENS
    seed: int | None = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class GenerationRequest:
    """Continue ``prompt_token_ids`` ``n`` times, independently.

    ``max_new_tokens`` overrides the run's budget (fork-join passes what is left of the
    response budget); generation stops at EOS or at any of ``stop_token_ids``, which are kept
    in the output (so a ``</Path>`` stop is visible to the caller).
    ``seed`` makes this request's samples reproducible independently of batching.
    ``temperature`` overrides the run's for this request (fork-join samples paths at 1.0, as the
    official rollout does); ``None`` keeps the run's.
    """

    request_id: str
    prompt_token_ids: Sequence[int]
    n: int = 1
    max_new_tokens: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    temperature: float | None = None


def request_sampling(request: GenerationRequest, sampling: SamplingConfig) -> SamplingConfig:
    """The run's sampling with the request's own temperature, when it has one."""
    if request.temperature is None or request.temperature == sampling.temperature:
        return sampling
    return replace(sampling, temperature=float(request.temperature))


@dataclass
class Completion:
    """One continuation. ``token_ids`` exclude pad/eos; ``text`` keeps special tokens.

    ``finish_reason``: ``"eos"`` (end of sequence), ``"stop"`` (a stop token, in
    ``stop_token_id``), ``"length"`` (budget or model length exhausted), or ``"abort"`` /
    ``"error"`` (the engine gave up on the request, e.g. vLLM's ``abort`` and ``error`` finishes:
    the tokens are a partial response, not an answer the model chose to end). ``logprobs`` holds
    the sampled tokens' log-probabilities when the engine records them (same length as ``token_ids``).
    """

    token_ids: list[int]
    text: str
    finish_reason: str
    stop_token_id: int | None = None
    logprobs: list[float] | None = field(default=None)


@runtime_checkable
class Engine(Protocol):
    """A text generator over token ids. ``tokenizer`` is a HF tokenizer for the same model."""

    name: str

    @property
    def tokenizer(self) -> Any: ...

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        """One list of ``request.n`` completions per request, in request order."""
        ...

    def describe(self) -> dict[str, Any]:
        """Engine settings for ``run.json`` (backend, dtype, device, parallelism…)."""
        ...


class EngineDead(RuntimeError):  # noqa: N818 - a state, like vLLM's EngineDeadError, not a failed call
    """The engine can serve no more requests: every later call would fail the same way.

    Why a type of its own: vLLM raises ``EngineDeadError`` on every call after its engine core
    died (a CUDA error, an out-of-memory inside a step, a tensor-parallel fault) while the ``LLM``
    object and the process holding it stay alive, and a CUDA error poisons a torch process's CUDA
    context the same way. Retrying the chunk there fails at once, so a caller that sees this must
    replace the process (the Ray pool kills the replica and Ray restarts it), not retry the call.
    """


def dead_engine_reason(exc: BaseException) -> str | None:
    """``"ExcType: message"`` when ``exc`` (or what it was raised from) says the engine is dead:
    vLLM's ``EngineDeadError`` (``vllm/v1/engine/exceptions.py``, matched by name so vllm need not
    be imported) or a CUDA error (``torch.AcceleratorError``, "CUDA error: ..." — not a CUDA
    out-of-memory, which a smaller batch survives); None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        if "EngineDeadError" in names or isinstance(current, EngineDead):
            return f"{type(current).__name__}: {current}"
        if "AcceleratorError" in names or (isinstance(current, RuntimeError) and str(current).startswith("CUDA error")):
            return f"{type(current).__name__}: {str(current).splitlines()[0][:300]}"
        current = current.__cause__ or current.__context__
    return None
