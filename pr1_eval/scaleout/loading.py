"""Loading a replica's engine when the GPU is not free yet: retry vLLM's memory check for a while.

Why: vLLM refuses to start when the GPU's free memory is below ``gpu_memory_utilization`` × its
total (``vllm/v1/worker/utils.py::request_memory``: "Free memory on device … on startup is less than
desired GPU memory utilization …"). A replica that Ray restarts on the same GPU — after a crash, or
after the pool killed it because its engine died — can start before the old incarnation's engine
process has released its memory, and Ray runs a raising constructor only once, even on a restart,
so ``max_restarts`` buys nothing there. The replica therefore retries that one failure itself, for
a bounded time, and then gives up with vLLM's message.

With vLLM's default multiprocess engine core, the memory check fails in the engine-core process and
``LLM(...)`` raises ``RuntimeError: Engine core initialization failed. See root cause above. …``
(``vllm/v1/engine/utils.py``), the message itself printed only in the log; that error is retried
when the GPU is short of memory by the same rule right now (``torch.cuda.mem_get_info``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pr1_eval.errors import Pr1EvalError

T = TypeVar("T")

LOAD_RETRY_S = 300.0
"""How long a replica retries a load that failed the memory check (well inside the pool's start timeout)."""
LOAD_RETRY_INTERVAL_S = 10.0
MEMORY_CHECK_TEXT = "Free memory on device"
CORE_INIT_FAILED_TEXT = "Engine core initialization failed"


def _messages(exc: BaseException) -> str:
    seen: set[int] = set()
    parts = []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        current = current.__cause__ or current.__context__
    return " | ".join(parts)


def gpu_short_of_memory(utilization: float) -> bool:
    """vLLM's start-up rule on this process's first GPU: free memory below ``utilization`` × total."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        free, total = torch.cuda.mem_get_info()
    except Exception:  # no usable CUDA here: nothing to wait for
        return False
    return free < utilization * total


def is_memory_check_failure(exc: BaseException, utilization: float | None,
                            short_of_memory: Callable[[float], bool] = gpu_short_of_memory) -> bool:
    """Whether a failed load is vLLM's free-memory refusal (see the module docstring)."""
    if utilization is None:
        return False
    text = _messages(exc)
    if MEMORY_CHECK_TEXT in text:
        return True
    return CORE_INIT_FAILED_TEXT in text and short_of_memory(utilization)


def load_with_retry(make: Callable[[], T], retry_s: float, utilization: float | None, *,
                    interval_s: float = LOAD_RETRY_INTERVAL_S, sleep: Callable[[float], Any] = time.sleep,
                    clock: Callable[[], float] = time.monotonic,
                    short_of_memory: Callable[[float], bool] = gpu_short_of_memory) -> T:
    """``make()``, retried every ``interval_s`` while it fails vLLM's memory check, for at most
    ``retry_s``; any other failure, and the last memory failure, is raised. ``utilization`` is the
    engine's ``gpu_memory_utilization`` (None for an engine without the check: no retries)."""
    start = clock()
    attempts = 0
    while True:
        attempts += 1
        try:
            return make()
        except Exception as exc:
            if not is_memory_check_failure(exc, utilization, short_of_memory):
                raise
            waited = clock() - start
            if waited + interval_s > retry_s:
                raise Pr1EvalError(f"the engine could not start: the GPU stayed short of free memory for {waited:.0f} s "
                                   f"({attempts} attempt(s); {str(exc).splitlines()[0][:300]}); free the GPU or lower "
                                   "--gpu-memory-utilization") from exc
            print(f"engine load failed vLLM's memory check (attempt {attempts}); retrying in {interval_s:.0f} s",
                  file=sys.stderr)
            sleep(interval_s)
