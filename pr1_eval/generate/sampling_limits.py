"""Sampling limits as vLLM enforces them, checked before any model loads.

Why: vLLM validates ``SamplingParams`` only when the first request is built, that is after the
model has loaded (minutes on a large checkpoint, on every replica of a ``--ray`` run), and then
fails the call with ``VLLMValidationError``. The checks here are vLLM 0.32/0.33's own
(``vllm/sampling_params.py``: ``SamplingParams._verify_args``, ``_verify_num_sequences``,
``__post_init__``), with the same bounds, so a value vLLM would refuse is refused here in a second.

Decision: the limits apply to every engine, not only ``--engine vllm``. A run's settings should
mean the same thing on each engine (the HF engine's warpers refuse some of these values too, with
other messages, and accept others silently: a ``--top-k -5`` means nothing anywhere).

What is checked, per pr1-eval option (the other ``SamplingParams`` fields are never set by pr1-eval):

* ``--temperature``: finite, in [0, 2] (below 1e-5 is greedy; vLLM raises (0, 0.01) to 0.01);
* ``--top-p``: in (0, 1] — also when greedy, as vLLM checks it before greedy resets it;
* ``--top-k``: an integer ≥ -1 (0 and -1 disable it);
* ``--max-new-tokens``: at least 1 (``max_tokens``);
* ``-k`` and ``--paths``: each is some request's ``n``, so at least 1 and at most
  ``VLLM_MAX_N_SEQUENCES`` (16384 unless that variable is set);
* ``--seed``: vLLM checks nothing (``-1`` means unseeded) and pr1-eval never sends the run seed
  itself, only 32-bit request seeds derived from it with sha256, so every integer is valid;
* ``min_p`` (not a pr1-eval option; for callers that pass one): in [0, 1].

Nothing here imports vllm, torch or transformers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from pr1_eval.errors import Pr1EvalError

MAX_TEMPERATURE = 2.0
DEFAULT_MAX_N_SEQUENCES = 16384
"""vLLM's ``VLLM_MAX_N_SEQUENCES`` default (``vllm/envs.py``)."""


def max_n_sequences(environ: Mapping[str, str] = os.environ) -> int:
    """The largest ``n`` vLLM accepts here (``VLLM_MAX_N_SEQUENCES``, read as vLLM reads it)."""
    return int(environ.get("VLLM_MAX_N_SEQUENCES", str(DEFAULT_MAX_N_SEQUENCES)))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def sampling_limit_problem(*, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, max_new_tokens: int | None = 16,
                           min_p: float = 0.0, n: Mapping[str, int] | None = None,
                           environ: Mapping[str, str] = os.environ) -> str | None:
    """The first value vLLM would refuse, as one line naming the option and the fix; None when all pass.

    ``n`` maps an option name (``-k``, ``--paths``) to the ``n`` its requests carry.
    """
    limit = max_n_sequences(environ)
    for option, value in (n or {}).items():
        if not _is_int(value) or not 1 <= value <= limit:
            return (f"{option} {value}: vLLM takes between 1 and {limit} samples per request (VLLM_MAX_N_SEQUENCES); "
                    f"pass {option} in that range")
    if not math.isfinite(temperature) or not 0.0 <= temperature <= MAX_TEMPERATURE:
        return (f"--temperature {temperature}: vLLM accepts a finite temperature in [0, {MAX_TEMPERATURE:g}] "
                "(below 1e-5 is greedy); pass one in that range")
    if not 0.0 < top_p <= 1.0:
        return f"--top-p {top_p}: vLLM accepts top_p in (0, 1] (1 keeps every token); pass one in that range"
    if not _is_int(top_k) or top_k < -1:
        return f"--top-k {top_k}: vLLM accepts an integer top_k of at least 1, or 0 (or -1) to disable it"
    if not 0.0 <= min_p <= 1.0:
        return f"min_p {min_p}: vLLM accepts min_p in [0, 1]"
    if max_new_tokens is not None and (not _is_int(max_new_tokens) or max_new_tokens < 1):
        return f"--max-new-tokens {max_new_tokens}: vLLM needs at least 1 new token per request (max_tokens); pass 1 or more"
    return None


def check_sampling_limits(config: Any) -> None:
    """Refuse a run whose sampling options vLLM would refuse (see the module docstring).

    ``config`` is a :class:`~pr1_eval.generate.runner.RunConfig` (its ``sampling()``, ``k`` and,
    for fork-join, ``paths``)."""
    sampling = config.sampling()
    n = {"-k": config.k}
    if getattr(config, "decoding", "sequential") == "forkjoin":
        n["--paths"] = config.paths
    problem = sampling_limit_problem(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                                     max_new_tokens=sampling.max_new_tokens, n=n)
    if problem:
        raise Pr1EvalError(problem)
