"""Build an engine from its CLI name: ``--engine auto|hf|vllm|openai``.

``auto`` picks vLLM when CUDA and vllm are both present (the fast path on GPU nodes) and the HF
engine otherwise (a laptop, CI, a CPU node), so one command works everywhere. The options a
caller passes are the ones its user set (the CLI passes only those given). Under ``auto`` an
option meant for the engine that was not picked (``tensor_parallel_size`` on a CPU node, say) is
dropped, since it was asked for in case that engine ran; with an engine named explicitly it is
refused, since it would silently do nothing. ``openai`` (a server's OpenAI-compatible endpoint,
:mod:`pr1_eval.engines.openai_engine`) is never picked by ``auto``: it needs ``--base-url``, and a
``--base-url`` given to any other engine is refused rather than dropped, since the user plainly
meant the server to generate.
"""

from __future__ import annotations

import logging
from typing import Any

from pr1_eval.engines.base import Engine
from pr1_eval.errors import Pr1EvalError

ENGINES: tuple[str, ...] = ("auto", "hf", "vllm", "openai")
"""``--engine``: auto picks vllm when installed with a GPU, else hf (transformers); openai: a server."""
HF_OPTIONS = frozenset({"device", "dtype", "max_batch_size", "record_logprobs"})
VLLM_OPTIONS = frozenset({
    "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "seed",
    "record_logprobs", "max_batch_size", "enforce_eager", "trust_remote_code", "revision", "max_num_seqs",
})
OPENAI_OPTIONS = frozenset({
    "base_url", "api_key", "served_model", "tokenizer", "max_concurrency", "request_timeout", "record_logprobs",
    "exact_model",
})
ALLOWED = {"hf": HF_OPTIONS, "vllm": VLLM_OPTIONS, "openai": OPENAI_OPTIONS}

log = logging.getLogger(__name__)


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def resolve_engine_name(name: str) -> str:
    """``auto`` → ``vllm`` when CUDA and vllm are present, else ``hf``; others unchanged."""
    if name not in ENGINES:
        raise Pr1EvalError(f"unknown --engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name != "auto":
        return name
    from pr1_eval.engines.vllm_engine import vllm_available

    # vllm first: found without importing it, so where it is not installed torch (seconds of CPU)
    # is not imported just to choose, and an error in a later check still answers in a second
    return "vllm" if vllm_available() and cuda_available() else "hf"


def make_engine(name: str, model_path: str, **opts: Any) -> Engine:
    """The engine ``name`` (``auto`` | ``hf`` | ``vllm``) for ``model_path``, configured by ``opts``.

    HF options: device, dtype, max_batch_size, record_logprobs. OpenAI options: base_url (required),
    api_key, served_model, tokenizer, max_concurrency, request_timeout, record_logprobs. vLLM options: tensor_parallel_size,
    gpu_memory_utilization, max_model_len, dtype, seed, record_logprobs, enforce_eager,
    trust_remote_code, revision, max_num_seqs (max_batch_size is accepted, unused). Data
    parallelism is not an engine option: ``--ray --replicas N`` runs N engines.
    """
    chosen = resolve_engine_name(name)
    allowed = ALLOWED[chosen]
    unknown = sorted(set(opts) - HF_OPTIONS - VLLM_OPTIONS - OPENAI_OPTIONS)
    if unknown:
        raise Pr1EvalError(f"unknown engine option(s) {', '.join(unknown)}")
    if chosen == "openai" and not opts.get("base_url"):
        raise Pr1EvalError("--engine openai needs --base-url (the server's OpenAI-compatible API, e.g. "
                           "http://127.0.0.1:8000/v1)")
    if chosen != "openai" and "base_url" in opts:
        raise Pr1EvalError(f"--base-url is for --engine openai (generation on a server), but --engine {name} was "
                           f"{'picked' if name == 'auto' else 'given'}; pass --engine openai")
    foreign = sorted(set(opts) - allowed)
    if foreign and name != "auto":
        raise Pr1EvalError(f"option(s) {', '.join(foreign)} do not apply to --engine {chosen}; drop them, or pass "
                           "--engine auto to use them only when that engine is picked")
    if foreign:
        log.info("--engine auto picked %s; ignoring %s", chosen, ", ".join(foreign))
    kept = {k: v for k, v in opts.items() if k in allowed}
    if chosen == "hf":
        from pr1_eval.engines.hf import HFEngine

        return HFEngine(model_path, **kept)
    if chosen == "openai":
        from pr1_eval.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(model_path, **kept)
    from pr1_eval.engines.vllm_engine import VLLMEngine

    return VLLMEngine(model_path, **kept)
