"""A fake ``vllm`` with the real package's offline interface and behaviours, for CPU tests.

Mirrors vLLM 0.32/0.33 where pr1-eval depends on it (sources read: ``vllm/entrypoints/llm.py``,
``vllm/sampling_params.py``, ``vllm/v1/engine/input_processor.py``, ``vllm/v1/engine/parallel_sampling.py``,
``vllm/v1/core/sched/utils.py``, ``vllm/v1/engine/__init__.py``):

* ``LLM(...)`` starts an engine-core subprocess (``multiprocessing``), so building one inside a
  daemonic process fails as it does for real ("daemonic processes are not allowed to have
  children"); ``data_parallel_size > 1`` is refused with vLLM's message;
* ``LLM.model_config.max_model_len``: ``max_model_len`` or the config's ``max_position_embeddings``;
* ``SamplingParams`` validates like the real one (``_verify_args``, ``__post_init__``): the same
  checks in the same order with the same messages, raised as ``vllm.exceptions.VLLMValidationError``
  (a ``VLLMClientError``, not a ``ValueError``) — n in [1, VLLM_MAX_N_SEQUENCES], the penalties,
  temperature finite and in [0, 2], top_p in (0, 1], top_k ≥ -1 and an int, min_p in [0, 1],
  max_tokens ≥ 1, min_tokens; temperatures in (0, 0.01) are raised to 0.01, seed -1 means none;
  greedy (temperature < 1e-5) with ``n > 1`` raises "n must be 1 when using greedy sampling";
  unknown keywords are a TypeError (the real one is a msgspec struct);
* ``LLM.generate`` validates every prompt before running any: empty, longer than the model length,
  or exactly the model length (no room for one token) raise ``VLLMValidationError`` — one bad prompt
  fails the whole call;
* the EOS is the tokenizer's (``Renderer.get_eos_token_id``); the generation config's EOS ids other
  than it are merged into ``stop_token_ids`` (``SamplingParams.update_from_generation_config``), so
  stopping on one reports it as ``stop_reason``. The generation config is read as
  ``try_get_generation_config`` does: ``generation_config.json``, else one built from ``config.json``;
* the engine core can die (``LLM.kill_engine_core()``, or a SIGKILL of the ``EngineCore_DP0``
  child, as a CUDA error or a tensor-parallel fault kills it): every later ``generate`` raises
  ``vllm.v1.engine.exceptions.EngineDeadError`` while the ``LLM`` object stays (``core_client.py``);
* stop checks in ``check_stop``'s order: EOS (``stop``, ``stop_reason=None``), a stop token
  (``stop``, ``stop_reason=id``), then the model length or ``max_tokens`` (``length``); the final
  stop/EOS token is in ``token_ids`` and not in ``text``;
* sample ``j`` of a request with seed ``s`` is seeded with ``s + j`` (``ParentRequest``), so it
  equals sample 0 of a request seeded ``s + j`` on the same prompt; unseeded samples are random;
* ``use_tqdm`` (``bool | Callable[..., tqdm]``, default True) as ``entrypoints/common/offline.py``
  uses it: ``maybe_tqdm`` wraps the prompts' rendering (``desc="Rendering prompts"``), then
  ``_run_engine`` builds the bar with ``total`` = the unfinished requests, which are the n-fanned
  child requests (``v1/engine/llm_engine.py``: Σ n), and as each request finishes reads
  ``format_dict["elapsed"]`` for its speeds, sets ``postfix``, calls ``update(len(outputs))`` and
  ``refresh()`` at the total, then ``close()``. Requests finish in prompt order here.

What it "generates" comes from ``LLM.script(prompt_ids, params, index, rng)``, which returns token
ids, or ``(token ids, "abort" | "error")`` to end that sample with vLLM's abort/error finish after
those tokens. The default writes ``5 + index`` words and then the first stop token, or EOS.
``FAKE_VLLM_LOG`` (a file) gets one JSON line per ``LLM`` created and per ``generate`` call;
``FAKE_VLLM_FAIL=1`` makes ``LLM(...)`` raise. ``FAKE_VLLM_DELAY_S`` sleeps that long in every
``generate`` call, where the engine steps (its requests added, its bar at 0), so a run lasts long
enough to be interrupted or to show its progress. ``FAKE_VLLM_LOW_MEMORY`` (a
file holding a count N) makes the next N ``LLM(...)`` fail vLLM's start-up memory check
(``v1/worker/utils.py::request_memory``, raised in-process as with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``).
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import random
import signal
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tqdm import tqdm

from vllm.exceptions import VLLMValidationError
from vllm.v1.engine.exceptions import EngineDeadError

__version__ = "0.33.0.fake"
_SAMPLING_EPS = 1e-5
_MAX_TEMP = 1e-2
__all__ = ["LLM", "SamplingParams", "TokensPrompt", "VLLMValidationError", "EngineDeadError"]


def TokensPrompt(**kwargs: Any) -> dict[str, Any]:  # noqa: N802 - a TypedDict in the real package
    return dict(kwargs)


class SamplingParams:
    def __init__(self, n: int = 1, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 repetition_penalty: float = 1.0, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, seed: int | None = None, stop_token_ids: list[int] | None = None,
                 ignore_eos: bool = False, max_tokens: int | None = 16, min_tokens: int = 0,
                 logprobs: int | None = None, detokenize: bool = True, skip_special_tokens: bool = True,
                 spaces_between_special_tokens: bool = True) -> None:
        self.n, self.presence_penalty, self.frequency_penalty = n, presence_penalty, frequency_penalty
        self.repetition_penalty, self.temperature, self.top_p, self.top_k = repetition_penalty, temperature, top_p, top_k
        self.min_p, self.seed, self.ignore_eos, self.max_tokens, self.min_tokens = min_p, seed, ignore_eos, max_tokens, min_tokens
        self.stop_token_ids = stop_token_ids
        self.skip_special_tokens, self.spaces_between_special_tokens = skip_special_tokens, spaces_between_special_tokens
        self.logprobs, self.detokenize = logprobs, detokenize
        self._post_init()

    def _post_init(self) -> None:  # SamplingParams.__post_init__
        if 0 < self.temperature < _MAX_TEMP:
            self.temperature = max(self.temperature, _MAX_TEMP)
        if self.seed == -1:
            self.seed = None
        self.stop_token_ids = [] if self.stop_token_ids is None else list(dict.fromkeys(self.stop_token_ids))
        if self.logprobs is True:
            self.logprobs = 1
        self._verify_args()
        if self.temperature < _SAMPLING_EPS:  # greedy
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0
            if self.n > 1:
                raise VLLMValidationError(f"n must be 1 when using greedy sampling, got {self.n}.")

    def _verify_args(self) -> None:  # SamplingParams._verify_args, the fields above, in its order
        if not isinstance(self.n, int):
            raise VLLMValidationError(f"n must be an int, but is of type {type(self.n)}")
        if self.n < 1:
            raise VLLMValidationError(f"n must be at least 1, got {self.n}.")
        max_n = int(os.environ.get("VLLM_MAX_N_SEQUENCES", "16384"))
        if self.n > max_n:
            raise VLLMValidationError(f"n must be at most {max_n}, got {self.n}. To increase this limit, set the "
                                      "VLLM_MAX_N_SEQUENCES environment variable.")
        if not -2.0 <= self.presence_penalty <= 2.0:
            raise VLLMValidationError(f"presence_penalty must be in [-2, 2], got {self.presence_penalty}.")
        if not -2.0 <= self.frequency_penalty <= 2.0:
            raise VLLMValidationError(f"frequency_penalty must be in [-2, 2], got {self.frequency_penalty}.")
        if not math.isfinite(self.repetition_penalty):
            raise VLLMValidationError(f"repetition_penalty must be a finite number, got {self.repetition_penalty}.")
        if self.repetition_penalty <= 0.0:
            raise VLLMValidationError(f"repetition_penalty must be greater than zero, got {self.repetition_penalty}.")
        t = self.temperature
        if not math.isfinite(t):
            raise VLLMValidationError(f"temperature must be a finite number, got {t}.", parameter="temperature", value=t)
        if t < 0.0:
            raise VLLMValidationError(f"temperature must be non-negative, got {t}.", parameter="temperature", value=t)
        if t > 2.0:
            raise VLLMValidationError(f"temperature must be in [0, 2], got {t}.", parameter="temperature", value=t)
        if not 0.0 < self.top_p <= 1.0:
            raise VLLMValidationError(f"top_p must be in (0, 1], got {self.top_p}.", parameter="top_p", value=self.top_p)
        if self.top_k < -1:
            raise VLLMValidationError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if not isinstance(self.top_k, int):
            raise VLLMValidationError(f"top_k must be an integer, got {type(self.top_k).__name__}")
        if not 0.0 <= self.min_p <= 1.0:
            raise VLLMValidationError(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise VLLMValidationError(f"max_tokens must be at least 1, got {self.max_tokens}.", parameter="max_tokens",
                                      value=self.max_tokens)
        if self.min_tokens < 0:
            raise VLLMValidationError(f"min_tokens must be greater than or equal to 0, got {self.min_tokens}.")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise VLLMValidationError(f"min_tokens must be less than or equal to max_tokens={self.max_tokens}, "
                                      f"got {self.min_tokens}.")
        if self.logprobs is not None and self.logprobs != -1 and self.logprobs < 0:
            raise VLLMValidationError(f"logprobs must be non-negative or -1, got {self.logprobs}.", parameter="logprobs",
                                      value=self.logprobs)
        if not all(isinstance(st_id, int) for st_id in self.stop_token_ids or []):
            raise VLLMValidationError(f"stop_token_ids must contain only integers, got {self.stop_token_ids}.")


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


def _maybe_tqdm(items: list[Any], use_tqdm: bool | Callable[..., Any], **kwargs: Any) -> Any:
    """vllm.utils.tqdm_utils.maybe_tqdm."""
    if not use_tqdm:
        return items
    return (use_tqdm if callable(use_tqdm) else tqdm)(items, **kwargs)


def _start_bar(use_tqdm: bool | Callable[..., Any], num_requests: int) -> Any:
    """_run_engine's bar, made once the requests are added."""
    return (use_tqdm if callable(use_tqdm) else tqdm)(
        total=num_requests, desc="Processed prompts", dynamic_ncols=True,
        postfix=f"est. speed input: {0:.2f} toks/s, output: {0:.2f} toks/s")


def _advance_bar(pbar: Any, outputs: list[RequestOutput], num_requests: int) -> None:
    """_run_engine's updates as each request finishes, then ``close``."""
    total_in_toks = total_out_toks = 0
    for output in outputs:
        n = len(output.outputs)
        total_in_toks += len(output.prompt_token_ids) * n
        in_spd = total_in_toks / pbar.format_dict["elapsed"]
        total_out_toks += sum(len(stp.token_ids) for stp in output.outputs)
        out_spd = total_out_toks / pbar.format_dict["elapsed"]
        pbar.postfix = f"est. speed input: {in_spd:.2f} toks/s, output: {out_spd:.2f} toks/s"
        pbar.update(n)
        if pbar.n == num_requests:
            pbar.refresh()
    pbar.close()


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


def _tokenizer_eos(model: str) -> int | None:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model).eos_token_id


def _generation_config_fields(model: str) -> dict[str, Any]:
    """ModelConfig.try_get_generation_config: the non-default fields of try_get_generation_config's config."""
    from transformers import AutoConfig, GenerationConfig

    try:
        config = GenerationConfig.from_pretrained(model)
    except OSError:  # Not found
        try:
            config = GenerationConfig.from_model_config(AutoConfig.from_pretrained(model))
        except OSError:
            return {}
    return config.to_diff_dict()


def _memory_check(utilization: float) -> None:
    """request_memory's refusal while ``FAKE_VLLM_LOW_MEMORY``'s count is above 0 (decremented)."""
    path = os.environ.get("FAKE_VLLM_LOW_MEMORY")
    if not path or not Path(path).is_file():
        return
    left = int(Path(path).read_text() or 0)
    if left <= 0:
        return
    Path(path).write_text(str(left - 1))
    total, free = 80.0, 20.0
    raise ValueError(f"Free memory on device cuda:0 ({free:.2f}/{total:.2f} GiB) on startup is less than desired GPU "
                     f"memory utilization ({utilization}, {utilization * total:.2f} GiB). Decrease GPU memory "
                     "utilization or reduce GPU memory used by other processes.")


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
        _memory_check(gpu_memory_utilization)
        config = _read_json(Path(model) / "config.json")
        eos = _tokenizer_eos(model)  # Renderer.get_eos_token_id: the tokenizer's
        LLM.eos_token_id = int(eos if eos is not None else LLM.eos_token_id)
        extra = _generation_config_fields(model).get("eos_token_id")
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

    def kill_engine_core(self) -> None:
        """Kill the engine-core process, as a CUDA error or an out-of-memory inside a step does."""
        if self.engine_core.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.engine_core.pid, signal.SIGKILL)
        self.engine_core.join(timeout=5)

    def generate(self, prompts: Any, sampling_params: Any = None, *, use_tqdm: bool | Callable[..., Any] = True,
                 **_: Any) -> list[RequestOutput]:
        if not self.engine_core.is_alive():  # the client's monitor marked the engine dead: every call raises
            raise EngineDeadError()
        prompts = prompts if isinstance(prompts, list) else [prompts]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        for p in _maybe_tqdm(prompts, use_tqdm, desc="Rendering prompts"):  # one refusal fails the call
            self._validate_prompt(len(p["prompt_token_ids"]))
        self.calls.append((prompts, params))
        _log({"event": "generate", "prompts": len(prompts), "tokens": [len(p["prompt_token_ids"]) for p in prompts]})
        num_requests = sum(sp.n for sp in params)  # the n-fanned child requests
        pbar = _start_bar(use_tqdm, num_requests) if use_tqdm else None  # before the first engine step
        delay = float(os.environ.get("FAKE_VLLM_DELAY_S") or 0)
        if delay:  # the engine steps
            time.sleep(delay)
            if not self.engine_core.is_alive():  # died during the step
                raise EngineDeadError()
        outputs = [self._one(i, list(p["prompt_token_ids"]), sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True))]
        if pbar is not None:
            _advance_bar(pbar, outputs, num_requests)
        return outputs

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
