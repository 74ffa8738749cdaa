"""How many worker processes a pool starts: one rule for the whole project.

Two pools run CPU-bound Python in processes: the grader's (:mod:`pr1_eval.grading.pool`, math-verify
checks) and the analysis's (:mod:`analysis.engine.workers`: parsing, conclusions, BLEU, CSV). Both
size themselves the same way: an environment variable of their own when it is set (a positive
integer; anything else is an error that names the variable, never silently ignored), else the CPUs
this process may run on (its affinity mask, which a batch scheduler or ``taskset`` narrows, not the
machine's count), capped where more processes stop paying.

A count that is asked for (the variable, or ``--grade-workers``) is capped too, at
:func:`worker_limit`: four per CPU of the machine (``os.cpu_count()``, not the affinity mask, so a
``taskset`` narrower than the machine does not refuse a count that fits it), and never below
:data:`MIN_WORKER_LIMIT`. Why a cap at all: each worker holds 75–100 MB, and an unbounded value
(99999) once forked 5,450 processes and exhausted 24 GB. Why four per CPU: past one per CPU more
processes buy no speed, so four leaves room for oversubscribing on purpose while a typo (an extra
digit or two) is refused; the floor lets a test or a small machine still ask for a few.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pr1_eval.errors import Pr1EvalError


def usable_cpus() -> int:
    """The CPUs this process may run on (``sched_getaffinity``; the machine's count elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: The smallest :func:`worker_limit`, whatever the machine.
MIN_WORKER_LIMIT = 16
#: Worker processes allowed per CPU of the machine (see the module docstring).
WORKERS_PER_CPU_LIMIT = 4


def worker_limit() -> int:
    """The most worker processes one pool may be asked for (see the module docstring)."""
    return max(MIN_WORKER_LIMIT, WORKERS_PER_CPU_LIMIT * (os.cpu_count() or 1))


def check_worker_count(count: int, where: str, purpose: str, *, zero: str | None = None) -> int:
    """``count`` when it is a worker count one may ask for, else a one-line
    :class:`~pr1_eval.errors.Pr1EvalError` naming ``where`` (the variable or option that set it;
    blank where the caller names it, as argparse does).
    ``zero``: what 0 means where it is allowed (``None``: refused, as for every negative)."""
    low = 0 if zero is not None else 1
    if count < low or count > worker_limit():
        means = f"; 0 {zero}" if zero is not None else ""
        said = f"{where} is {count}" if where else f"got {count}"
        raise Pr1EvalError(f"{said}: ask for {low} to {worker_limit()} {purpose} processes "
                           f"(the limit is {WORKERS_PER_CPU_LIMIT} per CPU of this machine, at least {MIN_WORKER_LIMIT}{means})")
    return count


@dataclass(frozen=True)
class Pool:
    """What sizes one pool of worker processes: the environment variable that names its size, the
    most processes it starts by default (``cap``), and what they do (``purpose``, for messages).

    Why a value and not a function per pool: the rule is one (:func:`default_workers`); each pool
    only holds its three settings, so no pool can size itself differently by accident."""

    env: str
    cap: int
    purpose: str


def configured_workers(pool: Pool) -> int | None:
    """The positive integer ``$env`` holds, ``None`` when it is unset or blank; a
    :class:`~pr1_eval.errors.Pr1EvalError` naming the variable when it holds anything else or more
    than :func:`worker_limit`."""
    value = os.environ.get(pool.env, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise Pr1EvalError(f"{pool.env}={value!r} is not a positive integer; set it to the number of {pool.purpose} "
                           "processes (1 runs everything in one process) or unset it")
    return check_worker_count(int(value), f"${pool.env}", pool.purpose)


def default_workers(pool: Pool) -> int:
    """How many workers ``pool`` starts: ``$env`` (:func:`configured_workers`), else
    :func:`usable_cpus` capped at ``cap``. The one definition; both pools call it."""
    configured = configured_workers(pool)
    return configured if configured is not None else max(1, min(pool.cap, usable_cpus()))
