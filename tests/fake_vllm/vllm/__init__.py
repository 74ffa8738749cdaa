"""A fake ``vllm`` with the real package's offline interface, for CPU tests of the vLLM engine.

Mirrors what pr1-eval touches: ``LLM(model, tensor_parallel_size=…, gpu_memory_utilization=…,
max_model_len=…, enable_prefix_caching=…, dtype=…, seed=…)`` (refusing ``data_parallel_size>1``
with vLLM's own message), ``LLM.generate(prompts, sampling_params, use_tqdm=…)`` over
``TokensPrompt`` dicts, ``SamplingParams`` (unknown keywords are a TypeError, as with the real
msgspec struct), and ``RequestOutput``/``CompletionOutput`` whose ``token_ids`` include the final
stop or EOS token while ``text`` does not, with ``stop_reason`` = the stop token id (or None at EOS).

What it "generates" comes from ``LLM.script(prompt_ids, params, index, rng) -> token ids`` (a test
may replace it); the default writes ``5 + index`` words and then the first stop token, or EOS.
``FAKE_VLLM_LOG`` (a file) gets one JSON line per ``LLM`` created and per ``generate`` call;
``FAKE_VLLM_FAIL=1`` makes ``LLM(...)`` raise.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__version__ = "0.0.fake"


def TokensPrompt(**kwargs: Any) -> dict[str, Any]:  # noqa: N802 - a TypedDict in the real package
    return dict(kwargs)


class SamplingParams:
    def __init__(self, n: int = 1, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, max_tokens: int | None = 16,
                 seed: int | None = None, stop_token_ids: list[int] | None = None, skip_special_tokens: bool = True,
                 spaces_between_special_tokens: bool = True, logprobs: int | None = None, detokenize: bool = True) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}.")
        if top_k < -1:
            raise ValueError("top_k must be -1 (disable), or at least 1")
        self.n, self.temperature, self.top_p, self.top_k = n, temperature, top_p, top_k
        self.max_tokens, self.seed, self.stop_token_ids = max_tokens, seed, list(stop_token_ids or [])
        self.skip_special_tokens, self.spaces_between_special_tokens = skip_special_tokens, spaces_between_special_tokens
        self.logprobs, self.detokenize = logprobs, detokenize


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


def _log(event: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_VLLM_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({**event, "pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}) + "\n")


def _default_script(prompt: list[int], params: SamplingParams, index: int, rng: random.Random) -> list[int]:
    words = [20 + rng.randrange(30) for _ in range(5 + index)]
    return words + ([params.stop_token_ids[0]] if params.stop_token_ids else [LLM.eos_token_id])


class LLM:
    instances: list[LLM] = []
    script = staticmethod(_default_script)
    eos_token_id = 2

    def __init__(self, model: str, *, tensor_parallel_size: int = 1, dtype: str = "auto", seed: int | None = 0,
                 gpu_memory_utilization: float = 0.9, enable_prefix_caching: bool | None = None,
                 max_model_len: int | None = None, **kwargs: Any) -> None:
        dp = int(kwargs.get("data_parallel_size", 1))
        if dp > 1:
            raise ValueError(f"LLM(data_parallel_size={dp}) is not supported for single-process usage and may hang.")
        if os.environ.get("FAKE_VLLM_FAIL") == "1":
            raise RuntimeError("CUDA out of memory (fake)")
        config = Path(model) / "config.json"
        if config.is_file():
            LLM.eos_token_id = int(json.loads(config.read_text()).get("eos_token_id") or LLM.eos_token_id)
        self.kwargs = {"model": model, "tensor_parallel_size": tensor_parallel_size, "dtype": dtype, "seed": seed,
                       "gpu_memory_utilization": gpu_memory_utilization, "enable_prefix_caching": enable_prefix_caching,
                       "max_model_len": max_model_len, **kwargs}
        self.calls: list[tuple[list[dict[str, Any]], list[SamplingParams]]] = []
        LLM.instances.append(self)
        _log({"event": "init", "kwargs": {k: v for k, v in self.kwargs.items() if k != "model"}})

    def generate(self, prompts: Any, sampling_params: Any = None, *, use_tqdm: bool = True, **_: Any) -> list[RequestOutput]:
        prompts = prompts if isinstance(prompts, list) else [prompts]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        self.calls.append((prompts, params))
        _log({"event": "generate", "prompts": len(prompts), "tokens": [len(p["prompt_token_ids"]) for p in prompts]})
        return [self._one(i, p["prompt_token_ids"], sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True))]

    def _one(self, i: int, prompt: list[int], sp: SamplingParams) -> RequestOutput:
        outputs = []
        for j in range(sp.n):
            rng = random.Random(f"{sp.seed}:{j}:{len(prompt)}")
            tokens = list(LLM.script(list(prompt), sp, j, rng))
            finish, stop, kept = "length", None, []
            for t in tokens[: sp.max_tokens]:
                kept.append(t)
                if t in sp.stop_token_ids:
                    finish, stop = "stop", t
                    break
                if t == LLM.eos_token_id:
                    finish = "stop"
                    break
            logprobs = [{t: Logprob(-0.25 - 0.01 * k)} for k, t in enumerate(kept)] if sp.logprobs is not None else None
            text = "".join(f"<{t}>" for t in (kept[:-1] if finish == "stop" else kept))
            outputs.append(CompletionOutput(j, text, kept, None, logprobs, finish, stop))
        return RequestOutput(str(i), None, list(prompt), outputs)
