"""Build an engine from its CLI name: ``--engine auto|hf|vllm``.

``auto`` picks vLLM when CUDA and vllm are both present (the fast path on GPU nodes) and the HF
engine otherwise (a laptop, CI, a CPU node), so one command works everywhere. Options meant for
the engine that was not picked (``tensor_parallel_size`` on a CPU node, say) are dropped under
``auto`` — the CLI passes every option — and refused when the engine was named explicitly, since
then they were asked for on purpose and would silently do nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from pr1_eval.engines.base import Engine
from pr1_eval.errors import Pr1EvalError

ENGINES: tuple[str, ...] = ("auto", "hf", "vllm")
HF_OPTIONS = frozenset({"device", "dtype", "max_batch_size", "record_logprobs"})
VLLM_OPTIONS = frozenset({
    "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "seed",
    "record_logprobs", "max_batch_size", "enforce_eager", "trust_remote_code", "revision", "max_num_seqs",
})
_VLLM_DEFAULTS: dict[str, Any] = {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9, "max_model_len": None}

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

    return "vllm" if cuda_available() and vllm_available() else "hf"


def make_engine(name: str, model_path: str, **opts: Any) -> Engine:
    """The engine ``name`` (``auto`` | ``hf`` | ``vllm``) for ``model_path``, configured by ``opts``.

    HF options: device, dtype, max_batch_size, record_logprobs. vLLM options: tensor_parallel_size,
    gpu_memory_utilization, max_model_len, dtype, seed, record_logprobs, enforce_eager,
    trust_remote_code, revision, max_num_seqs (max_batch_size is accepted, unused). Data
    parallelism is not an engine option: ``--ray --replicas N`` runs N engines.
    """
    chosen = resolve_engine_name(name)
    allowed = HF_OPTIONS if chosen == "hf" else VLLM_OPTIONS
    unknown = sorted(set(opts) - HF_OPTIONS - VLLM_OPTIONS)
    if unknown:
        raise Pr1EvalError(f"unknown engine option(s) {', '.join(unknown)}")
    foreign = {k: v for k, v in opts.items() if k not in allowed}
    if name != "auto":
        meant = {k: v for k, v in foreign.items() if _VLLM_DEFAULTS.get(k, object()) != v}
        if meant:
            raise Pr1EvalError(f"option(s) {', '.join(sorted(meant))} do not apply to --engine {chosen}")
    elif foreign:
        log.info("--engine auto picked %s; ignoring %s", chosen, ", ".join(sorted(foreign)))
    kept = {k: v for k, v in opts.items() if k in allowed}
    if chosen == "hf":
        from pr1_eval.engines.hf import HFEngine

        return HFEngine(model_path, **kept)
    from pr1_eval.engines.vllm_engine import VLLMEngine

    return VLLMEngine(model_path, **kept)
