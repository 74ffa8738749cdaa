"""vLLM engine: offline ``vllm.LLM`` behind the :class:`~pr1_eval.engines.base.Engine` interface.

Why it is shaped this way:

* one vLLM request per :class:`GenerationRequest`, with ``SamplingParams(n=request.n)``, so the
  k samples of a problem (and the paths of a fork) share their prompt's KV blocks instead of
  being k copies; prefix caching is on, so fork-join's successive waves reuse the context;
* per-request ``max_tokens``, ``stop_token_ids`` and ``seed`` (fork-join stops paths at
  ``</Path>`` with what is left of the budget; seeds make a sample independent of batching);
* ``skip_special_tokens=False``: the six tags are special tokens and must survive. The returned
  text is decoded by the run's HF tokenizer from the kept ids (vLLM drops a stop token from its
  text), so it is byte-identical to what the HF engine returns for the same ids;
* vllm is imported lazily: the package works without it, and asking for it without it fails
  with the extra to install;
* ``LLM(data_parallel_size>1)`` is refused by vLLM in a single process, so data parallelism runs
  one replica per GPU group in worker processes (:mod:`pr1_eval.engines.vllm_dp`).

Finish reasons map to the engine contract: a requested stop token → ``stop`` (kept in the ids),
vLLM's ``length`` → ``length``, anything else (EOS, a generation-config EOS, abort) → ``eos``
with the EOS id removed.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig
from pr1_eval.errors import Pr1EvalError

VLLM_EXTRA = "pip install 'pr1-eval[vllm]'"


def import_vllm() -> ModuleType:
    """The ``vllm`` module, or a :class:`Pr1EvalError` that names the extra to install."""
    try:
        return importlib.import_module("vllm")
    except ImportError as exc:
        raise Pr1EvalError(
            f"the vLLM engine needs vllm, which is not importable here ({exc}); install it with {VLLM_EXTRA} "
            "(in its own GPU environment), or run with --engine hf"
        ) from None


def vllm_available() -> bool:
    """Whether vllm is installed (found without importing it, which takes seconds)."""
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a broken install, or vllm blocked in sys.modules
        return False


@dataclass
class RawOutput:
    """One vLLM completion reduced to plain data (what crosses a process boundary)."""

    token_ids: list[int]
    finish_reason: str | None
    stop_reason: int | str | None
    logprobs: list[float] | None = None


def _chosen_logprobs(token_ids: Sequence[int], steps: Any) -> list[float] | None:
    """Log-probs of the sampled tokens from vLLM's per-step ``{token: Logprob}`` entries."""
    if steps is None:
        return None
    out = []
    for token, step in zip(token_ids, steps, strict=False):
        entry = step.get(token) if hasattr(step, "get") else None
        out.append(float(getattr(entry, "logprob", entry)) if entry is not None else math.nan)
    return out


def run_llm(llm: Any, vllm: ModuleType, prompts: Sequence[Sequence[int]], params: Sequence[dict[str, Any]]) -> list[list[RawOutput]]:
    """One ``LLM.generate`` call over token prompts; outputs in prompt order, as plain data."""
    make_prompt = getattr(vllm, "TokensPrompt", dict)  # a TypedDict: a plain dict is the same thing
    outputs = llm.generate(
        [make_prompt(prompt_token_ids=list(p)) for p in prompts],
        [vllm.SamplingParams(**kw) for kw in params],
        use_tqdm=False,
    )
    return [
        [
            RawOutput(list(o.token_ids), o.finish_reason, o.stop_reason,
                      _chosen_logprobs(o.token_ids, getattr(o, "logprobs", None)) if kw.get("logprobs") is not None else None)
            for o in out.outputs
        ]
        for out, kw in zip(outputs, params, strict=True)
    ]


def sampling_kwargs(request: GenerationRequest, sampling: SamplingConfig, budget: int, record_logprobs: bool) -> dict[str, Any]:
    """``SamplingParams`` keyword arguments for one request (a dict, so it pickles anywhere)."""
    kwargs: dict[str, Any] = {
        "n": request.n,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k and sampling.top_k > 0 else -1,
        "max_tokens": budget,
        "seed": request.seed,
        "stop_token_ids": list(request.stop_token_ids),
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }
    if record_logprobs:
        kwargs["logprobs"] = 0  # the sampled token's log-prob only
    return kwargs


def eos_token_ids(model_path: str, tokenizer: Any) -> set[int]:
    """The tokenizer's EOS plus the generation config's (vLLM stops on both): the protocol's EOS set."""
    from pr1_eval.protocol.eos import model_eos_token_ids

    return set(model_eos_token_ids(model_path, tokenizer))


class VLLMEngine:
    """Offline vLLM (see the module docstring). ``close()`` stops data-parallel workers."""

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        record_logprobs: bool = False,
        max_batch_size: int | None = None,
        **llm_kwargs: Any,
    ) -> None:
        """``max_batch_size`` is accepted for CLI symmetry and ignored: vLLM schedules its own
        batches. Extra keyword arguments go to ``vllm.LLM`` unchanged."""
        vllm = import_vllm()
        from pr1_eval.engines.hf import load_tokenizer

        if tensor_parallel_size < 1 or data_parallel_size < 1:
            raise Pr1EvalError("--tensor-parallel-size and --data-parallel-size must be at least 1")
        self.model_path = model_path
        self._tokenizer = load_tokenizer(model_path)
        self.eos_token_ids = eos_token_ids(model_path, self._tokenizer)
        self.tensor_parallel_size = tensor_parallel_size
        self.data_parallel_size = data_parallel_size
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self.dtype = dtype
        self.record_logprobs = record_logprobs
        self.vllm_version = str(getattr(vllm, "__version__", "unknown"))
        self.llm_kwargs: dict[str, Any] = {
            "model": model_path, "tensor_parallel_size": tensor_parallel_size, "gpu_memory_utilization": gpu_memory_utilization,
            "enable_prefix_caching": True, "dtype": dtype, "seed": seed, **llm_kwargs,
        }
        if max_model_len is not None:
            self.llm_kwargs["max_model_len"] = max_model_len
        self._vllm = vllm
        self._llm: Any = None
        self._pool: Any = None
        if data_parallel_size == 1:
            self._llm = vllm.LLM(**self.llm_kwargs)
        else:
            from pr1_eval.engines.vllm_dp import ReplicaPool

            self._pool = ReplicaPool.start(data_parallel_size, tensor_parallel_size, self.llm_kwargs)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "vllm", "vllm_version": self.vllm_version, "dtype": self.dtype,
            "tensor_parallel_size": self.tensor_parallel_size, "data_parallel_size": self.data_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization, "max_model_len": self.max_model_len,
            "enable_prefix_caching": True,
        }

    def _budget(self, request: GenerationRequest, sampling: SamplingConfig) -> int:
        budget = request.max_new_tokens if request.max_new_tokens is not None else sampling.max_new_tokens
        if self.max_model_len is not None:
            budget = min(budget, self.max_model_len - len(request.prompt_token_ids))
        return max(0, budget)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        results: list[list[Completion]] = [[Completion([], "", "length") for _ in range(r.n)] for r in requests]
        todo = [(i, r, self._budget(r, sampling)) for i, r in enumerate(requests)]
        todo = [(i, r, b) for i, r, b in todo if b > 0 and r.n > 0]  # vLLM rejects max_tokens=0
        if not todo:
            return results
        prompts = [list(r.prompt_token_ids) for _, r, _ in todo]
        params = [sampling_kwargs(r, sampling, b, self.record_logprobs) for _, r, b in todo]
        if self._pool is not None:
            raw = self._pool.generate([r.request_id for _, r, _ in todo], prompts, params)
        else:
            raw = run_llm(self._llm, self._vllm, prompts, params)
        completions = [[self._to_completion(o, r) for o in outs] for (_, r, _), outs in zip(todo, raw, strict=True)]
        texts = iter(self._tokenizer.batch_decode([c.token_ids for cs in completions for c in cs], skip_special_tokens=False))
        for (i, _, _), cs in zip(todo, completions, strict=True):
            for c in cs:
                c.text = next(texts)
            results[i] = cs
        return results

    def _to_completion(self, out: RawOutput, request: GenerationRequest) -> Completion:
        ids, logprobs = list(out.token_ids), out.logprobs
        stop = out.stop_reason if isinstance(out.stop_reason, int) and out.stop_reason in request.stop_token_ids else None
        if stop is not None:
            finish = "stop"
            if not ids or ids[-1] != stop:  # keep the stop token, as the engine contract says
                ids.append(stop)
                logprobs = [*logprobs, math.nan] if logprobs is not None else None
        elif out.finish_reason == "length":
            finish = "length"
        else:
            finish = "eos"
            if ids and (ids[-1] in self.eos_token_ids or ids[-1] == out.stop_reason):
                ids.pop()
        if logprobs is not None:
            logprobs = list(logprobs[: len(ids)])
        return Completion(ids, "", finish, stop, logprobs)

    def close(self) -> None:
        """Stop data-parallel workers (the in-process ``LLM`` is freed with the engine)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
