"""Controllers by name: ``NAME@N[:key=value,...]`` on the command line, and the authors' rows.

=================  ==========================================  ==================================
spec               controller                                  authors' row (Solver, Strategy)
=================  ==========================================  ==================================
``sc@64``          majority of 64 whole branches (SC@64)       MajorityVoteSolver, FullRead
``esc@64``         ESC, windows of ``window`` (8)              ESCSolver, FullRead
``asc@64``         ASC, ``threshold`` 0.95                     ASCSolver, FullRead
``sac``            one branch, stop after ``patience`` (14)    GreedySolver, ConvergenceProbe
                   equal probe answers
``sc+sac@64``      majority of 64 such branches ("SC + SAC")   MajorityVoteSolver, ConvergenceProbe
``probe@64``       Parallel-Probe (``stable`` 40, ``patience``  GreedySolver,
                   7, ``warm_up`` 15, ``burst`` 1)             ParallelESTPruningBurstMajority…
``probe-all@64``   Parallel-Probe, every branch votes          GreedySolver, ParallelESTPruning
``cert@64``        whole branches until the majority class is  (none: pr1-eval's,
                   certified at ``alpha`` (0.05), ``batch`` 1  :mod:`pr1_eval.replay.certified`)
=================  ==========================================  ==================================

The defaults are the parameters of the authors' published Qwen3-8B table, so ``pr1-eval replay``
without ``--controller`` prints that table's rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.replay.certified import CertifiedMajority
from pr1_eval.replay.controllers import (
    AdaptiveConsistency,
    ConvergenceProbe,
    EarlyStoppingConsistency,
    MajorityVote,
)
from pr1_eval.replay.evaluate import Controller
from pr1_eval.replay.probe import ParallelProbe, ParallelProbeAllVote

#: The rows of the authors' table, in their order of presentation.
DEFAULT_SPECS = ("sc@64", "esc@64", "asc@64", "sac", "sc+sac@64", "probe@64", "probe-all@64")
#: spec name -> (Solver, Strategy) of the authors' CSV row it reproduces.
AUTHORS_ROW = {
    "sc": ("MajorityVoteSolver", "FullReadStrategy"),
    "esc": ("ESCSolver", "FullReadStrategy"),
    "asc": ("ASCSolver", "FullReadStrategy"),
    "sac": ("GreedySolver", "ConvergenceProbeStrategy"),
    "sc+sac": ("MajorityVoteSolver", "ConvergenceProbeStrategy"),
    "probe": ("GreedySolver", "ParallelESTPruningBurstMajorityOnActiveBranches"),
    "probe-all": ("GreedySolver", "ParallelESTPruning"),
}


def _sac(n: int, **kw: Any) -> Controller:
    return MajorityVote(n, ConvergenceProbe(**kw))


#: name -> (builder taking n and keyword parameters, the parameters it takes, default n).
_BUILDERS: dict[str, tuple[Callable[..., Controller], tuple[str, ...], int]] = {
    "sc": (lambda n: MajorityVote(n), (), 64),
    "esc": (lambda n, **kw: EarlyStoppingConsistency(n, **kw), ("window",), 64),
    "asc": (lambda n, **kw: AdaptiveConsistency(n, **kw), ("threshold",), 64),
    "sac": (_sac, ("patience", "warmup_steps", "burst"), 1),
    "sc+sac": (_sac, ("patience", "warmup_steps", "burst"), 64),
    "probe": (lambda n, **kw: ParallelProbe(n, **kw), ("stable", "patience", "warm_up", "burst", "max_steps"), 64),
    "probe-all": (lambda n, **kw: ParallelProbeAllVote(n, **kw), ("stable", "patience", "warm_up", "max_steps"), 64),
    "cert": (lambda n, **kw: CertifiedMajority(n, **kw), ("alpha", "batch"), 64),
}


@dataclasses.dataclass(frozen=True)
class ControllerSpec:
    """A parsed ``--controller``: its name, branch budget, parameters and the controller itself."""

    text: str
    name: str
    n: int
    params: dict[str, float | int]
    controller: Controller


def _number(text: str, where: str) -> float | int:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise Pr1EvalError(f"{where}: {text!r} is not a number") from None


def parse_spec(text: str) -> ControllerSpec:
    """``NAME@N[:key=value,...]`` as a controller; a clear error names what is wrong."""
    head, _, tail = text.strip().partition(":")
    name, _, budget = head.partition("@")
    where = f"--controller {text!r}"
    if name not in _BUILDERS:
        raise Pr1EvalError(f"{where}: unknown controller {name!r}; choose from {', '.join(_BUILDERS)} "
                           "(e.g. sc@64, esc@64:window=8, probe@64:stable=40)")
    build, allowed, default_n = _BUILDERS[name]
    n = int(_number(budget, where)) if budget else default_n
    if n < 1:
        raise Pr1EvalError(f"{where}: the branch budget must be at least 1")
    params: dict[str, float | int] = {}
    for item in filter(None, (p.strip() for p in tail.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in allowed:
            raise Pr1EvalError(f"{where}: {item!r} is not a parameter of {name}; it takes "
                               f"{', '.join(allowed) or 'none'} as key=value")
        params[key] = _number(value, where)
    if name == "esc" and n % int(params.get("window", 8)) != 0:
        raise Pr1EvalError(f"{where}: the budget {n} must be a multiple of the window "
                           f"{int(params.get('window', 8))} (ESC reads whole windows)")
    try:
        controller = build(n, **params)
    except (TypeError, ValueError) as exc:
        raise Pr1EvalError(f"{where}: {exc}") from None
    return ControllerSpec(text=text.strip(), name=name, n=n, params=params, controller=controller)
