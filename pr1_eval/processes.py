"""How many worker processes a pool starts: one rule for the whole project.

Two pools run CPU-bound Python in processes: the grader's (:mod:`pr1_eval.grading.pool`, math-verify
checks) and the analysis's (:mod:`analysis.engine.workers`: parsing, conclusions, BLEU, CSV). Both
size themselves the same way: an environment variable of their own when it is set (a positive
integer; anything else is an error that names the variable, never silently ignored), else the CPUs
this process may run on (its affinity mask, which a batch scheduler or ``taskset`` narrows, not the
machine's count), capped where more processes stop paying.
"""

from __future__ import annotations

import os

from pr1_eval.errors import Pr1EvalError


def usable_cpus() -> int:
    """The CPUs this process may run on (``sched_getaffinity``; the machine's count elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def configured_workers(env: str, purpose: str) -> int | None:
    """The positive integer ``$env`` holds, ``None`` when it is unset or blank; a
    :class:`~pr1_eval.errors.Pr1EvalError` naming ``env`` when it holds anything else.
    ``purpose``: what the processes do, for the message."""
    value = os.environ.get(env, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise Pr1EvalError(f"{env}={value!r} is not a positive integer; set it to the number of {purpose} "
                           "processes (1 runs everything in one process) or unset it")
    return int(value)


def default_workers(env: str, cap: int, purpose: str) -> int:
    """``$env`` (:func:`configured_workers`), else :func:`usable_cpus` capped at ``cap``."""
    configured = configured_workers(env, purpose)
    return configured if configured is not None else max(1, min(cap, usable_cpus()))
