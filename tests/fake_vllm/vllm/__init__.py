"""A fake ``vllm`` with the real package's offline interface and behaviours, for CPU tests.

Mirrors vLLM 0.32/0.33 where pr1-eval depends on it (sources read: ``vllm/entrypoints/llm.py``,
``vllm/sampling_params.py``, ``vllm/v1/engine/input_processor.py``, ``vllm/v1/engine/parallel_sampling.py``,
``vllm/v1/core/sched/utils.py``, ``vllm/v1/engine/__init__.py``):

* ``LLM(...)`` starts an engine-core subprocess (``multiprocessing``), so building one inside a
  daemonic process fails as it does for real ("daemonic processes are not allowed to have
  children"); ``data_parallel_size > 1`` is refused with vLLM's message;
* ``LLM.model_config.max_model_len``: ``max_model_len`` or the config's ``max_position_embeddings``;
* ``SamplingParams`` validates like the real one: greedy (temperature < 1e-5) with ``n > 1`` raises
  "n must be 1 when using greedy sampling", ``max_tokens < 1`` and ``top_k < -1`` raise; unknown
  keywords are a TypeError (the real one is a msgspec struct);
* ``LLM.generate`` validates every prompt before running any: empty, longer than the model length,
  or exactly the model length (no room for one token) raise ``VLLMValidationError`` — one bad prompt
  fails the whole call;
* the generation config's EOS ids other than the tokenizer's are merged into ``stop_token_ids``
  (``SamplingParams.update_from_generation_config``), so stopping on one reports it as ``stop_reason``;
* stop checks in ``check_stop``'s order: EOS (``stop``, ``stop_reason=None``), a stop token
  (``stop``, ``stop_reason=id``), then the model length or ``max_tokens`` (``length``); the final
  stop/EOS token is in ``token_ids`` and not in ``text``;
* sample ``j`` of a request with seed ``s`` is seeded with ``s + j`` (``ParentRequest``), so it
  equals sample 0 of a request seeded ``s + j`` on the same prompt; unseeded samples are random.

What it "generates" comes from ``LLM.script(prompt_ids, params, index, rng)``, which returns token
ids, or ``(token ids, "abort" | "error")`` to end that sample with vLLM's abort/error finish after
those tokens. The default writes ``5 + index`` words and then the first stop token, or EOS.
``FAKE_VLLM_LOG`` (a file) gets one JSON line per ``LLM`` created and per ``generate`` call;
``FAKE_VLLM_FAIL=1`` makes ``LLM(...)`` raise.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

__version__ = "0.33.0.fake"
_SAMPLING_EPS = 1e-5


class VLLMValidationError(ValueError):
    """vllm.exceptions.VLLMValidationError (a ValueError)."""


def TokensPrompt(**kwargs: Any) -> dict[str, Any]:  # noqa: N802 - a TypedDict in the real package
    return dict(kwargs)


class SamplingParams:
    def __init__(self, n: int = 1, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, max_tokens: int | None = 16,
                 seed: int | None = None, stop_token_ids: list[int] | None = None, skip_special_tokens: bool = True,
                 spaces_between_special_tokens: bool = True, logprobs: int | None = None, detokenize: bool = True) -> None:
        if n < 1:
            raise VLLMValidationError(f"n must be at least 1, got {n}.")
        if max_tokens is not None and max_tokens < 1:
            raise VLLMValidationError(f"max_tokens must be at least 1, got {max_tokens}.")
        if top_k < -1:
            raise VLLMValidationError(f"top_k must be 0 (disable), or at least 1, got {top_k}.")
        self.n, self.temperature, self.top_p, self.top_k = n, temperature, top_p, top_k
        self.max_tokens, self.seed = max_tokens, (None if seed == -1 else seed)
        self.stop_token_ids = list(dict.fromkeys(stop_token_ids or []))
        self.skip_special_tokens, self.spaces_between_special_tokens = skip_special_tokens, spaces_between_special_tokens
        self.logprobs, self.detokenize = logprobs, detokenize
        if temperature < _SAMPLING_EPS:  # greedy
            self.top_p, self.top_k = 1.0, 0
            if n > 1:
                raise VLLMValidationError(f"n must be 1 when using greedy sampling, got {n}.")


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


def _engine_core(conn: Any, parent: int) -> None:
    """The engine-core process: lives until the LLM that started it says stop, or its parent dies
    (forked children inherit each other's pipe ends, so an EOF cannot be relied on)."""
    with contextlib.suppress(EOFError, OSError):
        while os.getppid() == parent and not conn.poll(0.2):
            pass


def _stop_core(process: Any, conn: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        conn.send("stop")
    conn.close()
    process.join(timeout=5)
    if process.is_alive():
        process.kill()


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


class LLM:
    instances: list[LLM] = []
    script = staticmethod(_default_script)
    eos_token_id = 2

    def __init__(self, model: str, *, tensor_parallel_size: int = 1, dtype: str = "auto", seed: int | None = 0,
                 gpu_memory_utilization: float = 0.9, enable_prefix_caching: bool | None = None,
                 max_model_len: int | None = None, **kwargs: Any) -> None:
        dp = int(kwargs.get("data_parallel_size", 1))
        if dp > 1:
            raise ValueError(f"LLM(data_parallel_size={dp}) is not supported for single-process usage and may hang. "
                             "Please use the explicit multi-process data-parallel example at "
                             "'examples/offline_inference/data_parallel.py'.")
        if os.environ.get("FAKE_VLLM_FAIL") == "1":
            raise RuntimeError("CUDA out of memory (fake)")
        config = _read_json(Path(model) / "config.json")
        LLM.eos_token_id = int(config.get("eos_token_id") or LLM.eos_token_id)
        extra = _read_json(Path(model) / "generation_config.json").get("eos_token_id")
        extra_ids = set(extra if isinstance(extra, list) else [extra] if extra is not None else [])
        self.extra_eos_ids = sorted(extra_ids - {LLM.eos_token_id})
        self.model_config = SimpleNamespace(max_model_len=int(max_model_len or config.get("max_position_embeddings", 2048)))
        context = multiprocessing.get_context("fork")
        parent, child = context.Pipe()
        self.engine_core = context.Process(target=_engine_core, args=(child, os.getpid()), name="EngineCore_DP0",
                                           daemon=True)
        self.engine_core.start()  # AssertionError inside a daemonic process, as with the real LLM
        child.close()
        weakref.finalize(self, _stop_core, self.engine_core, parent)
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
        for p in prompts:  # added one by one; one refusal aborts the added ones and fails the call
            self._validate_prompt(len(p["prompt_token_ids"]))
        self.calls.append((prompts, params))
        _log({"event": "generate", "prompts": len(prompts), "tokens": [len(p["prompt_token_ids"]) for p in prompts]})
        return [self._one(i, list(p["prompt_token_ids"]), sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True))]

    def _validate_prompt(self, length: int) -> None:
        limit = self.model_config.max_model_len
        if length == 0:
            raise VLLMValidationError("The decoder prompt cannot be empty")
        if length > limit:
            raise VLLMValidationError(f"The decoder prompt (length {length}) is longer than the maximum model length of "
                                      f"{limit}. Make sure that `max_model_len` is no smaller than the number of text tokens.")
        if length == limit:
            raise VLLMValidationError(f"The decoder prompt (length {length}) plus the number of requested output tokens "
                                      f"(at least 1) is longer than the maximum model length of {limit}. Make sure that "
                                      "`max_model_len` is no smaller than the number of text tokens (prompt + requested "
                                      "output tokens).")

    def _one(self, i: int, prompt: list[int], sp: SamplingParams) -> RequestOutput:
        stop_ids = list(dict.fromkeys([*self.extra_eos_ids, *sp.stop_token_ids]))  # update_from_generation_config
        outputs = []
        for j in range(sp.n):
            rng = random.Random(f"{sp.seed + j}:{prompt}") if sp.seed is not None else random.Random()
            scripted = LLM.script(list(prompt), sp, j, rng)
            tokens, forced = (scripted if isinstance(scripted, tuple) else (scripted, None))
            kept, finish, stop = self._run(prompt, list(tokens), stop_ids, sp.max_tokens)
            if forced is not None and finish is None:
                finish = forced
            finish = finish or "length"
            logprobs = [{t: Logprob(-0.25 - 0.01 * k)} for k, t in enumerate(kept)] if sp.logprobs is not None else None
            text = "".join(f"<{t}>" for t in (kept[:-1] if finish == "stop" else kept))
            outputs.append(CompletionOutput(j, text, kept, None, logprobs, finish, stop))
        return RequestOutput(str(i), None, list(prompt), outputs)

    def _run(self, prompt: list[int], tokens: list[int], stop_ids: list[int], max_tokens: int | None) -> tuple[list[int], str | None, int | None]:
        """check_stop after every token: EOS, stop token, then model length / max_tokens."""
        kept: list[int] = []
        budget = max_tokens if max_tokens is not None else self.model_config.max_model_len - len(prompt)
        for t in tokens:
            kept.append(t)
            if t == LLM.eos_token_id:
                return kept, "stop", None
            if t in stop_ids:
                return kept, "stop", t
            if len(prompt) + len(kept) >= self.model_config.max_model_len or len(kept) >= budget:
                return kept, "length", None
        return kept, None, None
