"""vLLM engine: offline ``vllm.LLM`` behind the :class:`~pr1_eval.engines.base.Engine` interface.

Held against vLLM 0.32/0.33 (``vllm/entrypoints/llm.py``, ``vllm/sampling_params.py``,
``vllm/v1/engine/input_processor.py``, ``parallel_sampling.py``, ``core/sched/utils.py``):

* one vLLM request per :class:`GenerationRequest`, with ``SamplingParams(n=request.n)``, so the k
  samples of a problem (and the paths of a fork) share their prompt's KV blocks instead of being k
  copies; prefix caching is on, so fork-join's successive waves reuse the context;
* per-request ``max_tokens``, ``stop_token_ids`` and ``seed``. vLLM seeds sample ``j`` of a request
  with ``seed + j``, so a sample's random stream depends on its request's seed and its index only,
  not on batching or on which replica ran it. The seed does not pin the model's *numerics*: vLLM
  picks kernels, tile sizes and reduction orders by batch shape, so the same request can get logits
  that differ in the last bits in a batch of 64 problems and in a batch of 8 (or on another GPU
  kind), and a sampled token can flip from there. Samples are reproducible for the same batches on
  the same hardware, and equal in distribution otherwise — not batch-invariant token for token;
* greedy decoding (temperature < 1e-5): vLLM refuses ``n > 1`` ("n must be 1 when using greedy
  sampling"), so one ``n=1`` request is sent and its completion is returned ``n`` times;
* the model's length: vLLM refuses a prompt that leaves no room for one token, and one refusal
  fails the whole ``LLM.generate`` call (it aborts the requests already added and re-raises). Such
  a request is not sent: it gets empty ``length`` completions, exactly like a spent budget. Budgets
  are clamped to ``max_model_len - prompt`` (vLLM stops there too, as ``length``). The length is
  the engine's own (``--max-model-len`` or the model config's), read back from ``LLM``;
* finish reasons map onto the engine contract: a requested stop token → ``stop`` (kept in the
  ids); ``length`` → ``length``; ``abort`` / ``error`` → ``abort`` / ``error`` (a partial response,
  recorded as such, never as an EOS); ``stop`` at an EOS — vLLM merges the generation config's extra
  EOS ids into ``stop_token_ids``, so ``stop_reason`` is then that id — → ``eos``, the EOS removed;
  any other reason (``repetition``, which pr1-eval never enables) → ``error``;
* ``skip_special_tokens=False``: the six tags are special tokens and must survive. The returned text
  is decoded by the run's HF tokenizer from the kept ids, byte-identical to the HF engine's;
* a dead engine core (vLLM raises ``EngineDeadError`` on every call after it, ``v1/engine/
  exceptions.py``, ``core_client.py``) becomes :class:`~pr1_eval.engines.base.EngineDead`: the
  process must be replaced, not the call retried (the Ray pool restarts the replica);
* progress inside a call: one ``LLM.generate`` call decodes a whole chunk, minutes on a real
  model, with nothing to show until it returns. vLLM's ``use_tqdm`` takes a callable that builds
  its bar (``vllm/entrypoints/common/offline.py``: ``_run_engine`` makes it with ``total`` = the
  completions requested, Σ n, and calls ``update(len(output.outputs))`` as each request finishes;
  ``maybe_tqdm`` wraps the prompts' rendering with the same callable). When the run's progress
  display listens (:attr:`VLLMEngine.on_call_progress`), that callable is a tqdm drawn nowhere
  whose updates go to the listener as (done, total); otherwise ``use_tqdm=False``, as before;
* vllm is imported lazily, and needs Python ≥ 3.11 (vLLM 0.32 does); asking for it without it
  fails with the extra to install.

No data parallelism here: ``LLM(data_parallel_size>1)`` is refused in a single process, and
``LLM`` starts its own engine-core subprocess, which a daemonic worker process may not do. Many
GPUs are used through ``--ray --replicas N``: one engine per Ray actor
(:mod:`pr1_eval.scaleout.ray_pool`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from tqdm import tqdm

from pr1_eval.engines.base import (
    Completion,
    EngineDead,
    GenerationRequest,
    SamplingConfig,
    dead_engine_reason,
    is_greedy,
    request_sampling,
)
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol.eos import model_eos_token_ids

VLLM_EXTRA = "pip install 'pr1-eval[vllm]'"
MIN_PYTHON = (3, 11)


def import_vllm() -> ModuleType:
    """The ``vllm`` module, or a :class:`Pr1EvalError` that names what to install."""
    if sys.version_info < MIN_PYTHON:
        raise Pr1EvalError(
            f"the vLLM engine needs Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]} (vLLM 0.32 does), this is "
            f"{platform.python_version()}; make a Python 3.11+ environment for it, or run with --engine hf"
        )
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
    """One vLLM completion reduced to plain data."""

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


#: Told (completions done, completions requested) as an ``LLM.generate`` call advances.
CallProgress = Callable[[int, int], None]


class _Nowhere:
    """A stream that drops what it is given: vLLM's own bar is not drawn, the run's display is."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


class ForwardingBar(tqdm):  # type: ignore[type-arg]
    """What ``use_tqdm`` builds when the run listens (see the module docstring): a real tqdm, so
    every attribute vLLM reads (``n``, ``format_dict['elapsed']``, ``postfix``) behaves as vLLM
    expects, drawn nowhere; the bar vLLM counts requests with (made without an iterable) tells
    ``listener`` each update, the one wrapping the prompts' rendering tells nothing."""

    def __init__(self, *args: Any, listener: CallProgress, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "file": _Nowhere()})
        self._listener: CallProgress | None = listener if self.iterable is None else None
        if self._listener is not None:
            self._listener(0, int(self.total or 0))

    def update(self, n: float | None = 1) -> bool | None:
        shown = super().update(n)
        if self._listener is not None:
            self._listener(int(self.n), int(self.total or 0))
        return shown


def run_llm(llm: Any, vllm: ModuleType, prompts: Sequence[Sequence[int]], params: Sequence[dict[str, Any]],
            on_progress: CallProgress | None = None) -> list[list[RawOutput]]:
    """One ``LLM.generate`` call over token prompts; outputs in prompt order, as plain data.
    ``on_progress`` is told (done, total) completions while the call runs (no bar of vLLM's own)."""
    make_prompt = getattr(vllm, "TokensPrompt", dict)  # a TypedDict: a plain dict is the same thing
    outputs = llm.generate(
        [make_prompt(prompt_token_ids=list(p)) for p in prompts],
        [vllm.SamplingParams(**kw) for kw in params],
        use_tqdm=False if on_progress is None else functools.partial(ForwardingBar, listener=on_progress),
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
    """``SamplingParams`` keyword arguments for one request (greedy: ``n=1``, see the module docstring)."""
    sampling = request_sampling(request, sampling)  # a request's own temperature (fork-join paths)
    kwargs: dict[str, Any] = {
        "n": 1 if is_greedy(sampling.temperature) else request.n,
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


class VLLMEngine:
    """Offline vLLM, one engine per process (see the module docstring)."""

    name = "vllm"
    #: Told (completions done, completions requested) as each ``generate`` call advances (set by the
    #: run's progress display; None: nobody listens, and vLLM draws no bar).
    on_call_progress: CallProgress | None = None

    def __init__(
        self,
        model_path: str,
        *,
        tensor_parallel_size: int = 1,
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

        if tensor_parallel_size < 1:
            raise Pr1EvalError(f"--tensor-parallel-size must be at least 1, got {tensor_parallel_size}")
        self.model_path = model_path
        self._tokenizer = load_tokenizer(model_path)
        # The tokenizer's EOS plus the generation config's, config.json fallback included (vLLM stops on
        # all of them): the protocol's one EOS set.
        self.eos_token_ids = set(model_eos_token_ids(model_path, self._tokenizer))
        self.tensor_parallel_size = tensor_parallel_size
        self.gpu_memory_utilization = gpu_memory_utilization
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
        self._llm: Any = vllm.LLM(**self.llm_kwargs)
        self.max_model_len = int(max_model_len or self._llm.model_config.max_model_len)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "vllm", "vllm_version": self.vllm_version, "dtype": self.dtype,
            "tensor_parallel_size": self.tensor_parallel_size, "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_model_len": self.max_model_len, "enable_prefix_caching": True,
        }

    def _budget(self, request: GenerationRequest, sampling: SamplingConfig) -> int:
        """The request's budget, clamped to what the model length leaves (≤ 0: not sent)."""
        budget = request.max_new_tokens if request.max_new_tokens is not None else sampling.max_new_tokens
        return min(budget, self.max_model_len - len(request.prompt_token_ids))

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        results: list[list[Completion]] = [[Completion([], "", "length") for _ in range(r.n)] for r in requests]
        todo = [(i, r, self._budget(r, sampling)) for i, r in enumerate(requests)]
        todo = [(i, r, b) for i, r, b in todo if b > 0 and r.n > 0]  # vLLM refuses max_tokens < 1 and full prompts
        if not todo:
            return results
        prompts = [list(r.prompt_token_ids) for _, r, _ in todo]
        params = [sampling_kwargs(r, sampling, b, self.record_logprobs) for _, r, b in todo]
        try:
            raw = run_llm(self._llm, self._vllm, prompts, params, self.on_call_progress)
        except Exception as exc:
            reason = dead_engine_reason(exc)
            if reason is None:
                raise
            raise EngineDead(f"the vLLM engine of {self.model_path} is dead ({reason}); this process cannot "
                             "generate again") from exc
        completions = [[self._to_completion(o, r) for o in outs] for (_, r, _), outs in zip(todo, raw, strict=True)]
        texts = iter(self._tokenizer.batch_decode([c.token_ids for cs in completions for c in cs], skip_special_tokens=False))
        for (i, request, _), cs in zip(todo, completions, strict=True):
            for c in cs:
                c.text = next(texts)
            if len(cs) == 1 and request.n > 1:  # greedy: one request sent, its completion n times
                first = cs[0]
                cs = [first] + [replace(first, token_ids=list(first.token_ids),
                                        logprobs=None if first.logprobs is None else list(first.logprobs))
                                for _ in range(request.n - 1)]
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
        elif out.finish_reason in ("length", "abort", "error"):
            finish = str(out.finish_reason)
        elif out.finish_reason == "stop":
            finish = "eos"
            if ids and (ids[-1] in self.eos_token_ids or ids[-1] == out.stop_reason):
                ids.pop()
        else:
            finish = "error"
        if logprobs is not None:
            logprobs = list(logprobs[: len(ids)])
        return Completion(ids, "", finish, stop, logprobs)

    def close(self) -> None:
        """Drop the ``LLM`` (vLLM stops its engine-core process when the engine is collected)."""
        self._llm = None

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
