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
import math
import re
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


#: The largest branch budget (``NAME@N``) and whole-number parameter a spec may carry: far above
#: any recorded file (128 branches, a few hundred probes each), low enough that no value can make
#: a replay loop for hours (``sc@99999999`` did: one read per budget unit, per question and seed).
MOST = 1_000_000

#: parameter -> (least, most) for whole numbers; ``threshold`` is a fraction strictly inside (0, 1).
#: Why these floors: ``window``, ``burst``, ``patience``, ``stable`` and ``max_steps`` below 1
#: describe no rule (a window of 0 divides by zero, ``stable=0`` stops at the first probe,
#: ``burst=0`` never advances a branch); ``warm_up``/``warmup_steps`` 0 means "from the start".
_WHOLE: dict[str, tuple[int, int]] = {
    "window": (1, MOST), "burst": (1, MOST), "patience": (1, MOST), "stable": (1, MOST), "max_steps": (1, MOST),
    "warm_up": (0, MOST), "warmup_steps": (0, MOST), "batch": (1, MOST),
}
_FRACTIONS = ("threshold", "alpha")
"""Parameters that are a fraction strictly between 0 and 1 (a probability, a level)."""


def _short(text: str, most: int = 24) -> str:
    """``text`` cut for an error line (a 5,000-digit budget is quoted by its start)."""
    return text if len(text) <= most else f"{text[:most]}…"


def _whole(text: str, what: str, least: int, where: str) -> int:
    """A whole number written in ASCII digits within [least, MOST]; else one line saying the range.
    Why so strict: ``int`` reads ``"٣"`` and ``"1_0"``, and a float (``8.5``, ``1e12``, ``nan``)
    taken as a count was a traceback or a silently cut value."""
    value = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", value, flags=re.ASCII):
        raise Pr1EvalError(f"{where}: {what} {_short(text)!r} is not a whole number; write it in digits, "
                           f"from {least} to {MOST:,}")
    number = int(value) if len(value) <= 13 else (MOST + 1 if value[0] != "-" else least - 1)
    if not least <= number <= MOST:
        raise Pr1EvalError(f"{where}: {what} {_short(value)} is outside {least}..{MOST:,}; pass a whole number in that range")
    return number


def _fraction(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Pr1EvalError(f"{where}: {what} {_short(text)!r} is not a number; pass a fraction between 0 and 1, "
                           "e.g. 0.95") from None
    if not (math.isfinite(value) and 0 < value < 1):
        raise Pr1EvalError(f"{where}: {what} {_short(text.strip())} is outside (0, 1); pass a fraction between 0 and 1, "
                           "e.g. 0.95")
    return value


def parse_spec(text: str) -> ControllerSpec:
    """``NAME@N[:key=value,...]`` as a controller; a clear error names what is wrong. Every value is
    checked against its parameter's range here, so no controller is built from a value it cannot
    use (the controllers themselves assume sane values)."""
    head, _, tail = text.strip().partition(":")
    name, at, budget = head.partition("@")
    where = f"--controller {_short(text.strip(), 60)!r}"
    if name not in _BUILDERS:
        raise Pr1EvalError(f"{where}: unknown controller {name!r}; choose from {', '.join(_BUILDERS)} "
                           "(e.g. sc@64, esc@64:window=8, probe@64:stable=40)")
    build, allowed, default_n = _BUILDERS[name]
    n = _whole(budget, "the branch budget", 1, where) if at else default_n
    params: dict[str, float | int] = {}
    for item in filter(None, (p.strip() for p in tail.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in allowed:
            raise Pr1EvalError(f"{where}: {item!r} is not a parameter of {name}; it takes "
                               f"{', '.join(allowed) or 'none'} as key=value")
        if key in params:
            raise Pr1EvalError(f"{where}: {key} is given twice; keep one")
        params[key] = (_fraction(value, key, where) if key in _FRACTIONS
                       else _whole(value, key, _WHOLE[key][0], where))
    window = int(params.get("window", 8))
    if name == "esc" and n % window != 0:
        raise Pr1EvalError(f"{where}: the budget {n} must be a multiple of the window {window} "
                           "(ESC reads whole windows)")
    controller = build(n, **params)
    return ControllerSpec(text=text.strip(), name=name, n=n, params=params, controller=controller)


def fit_to_branches(specs: list[ControllerSpec], held: int, source: str, *, chosen: bool
                    ) -> tuple[list[ControllerSpec], list[str]]:
    """``specs`` for a source whose questions hold ``held`` branches each, and the notes to print.

    A budget above ``held`` cannot be replayed as asked (``sc@200`` on 128 branches read 128 and
    was labelled sc@200; ``probe@200`` was a traceback). A budget the user chose (``chosen``) is
    refused, naming the most the source allows; a default row (the authors' budget 64) on a smaller
    source is replayed at ``held`` and relabelled, with a note, so ``pr1-eval replay SMALL.json``
    still prints the table; an ESC row whose window no longer fits is left out, with a note."""
    fitted: list[ControllerSpec] = []
    notes: list[str] = []
    for spec in specs:
        if spec.n <= held:
            fitted.append(spec)
            continue
        if chosen:
            raise Pr1EvalError(f"--controller {spec.text!r}: asks for {spec.n} branches per question, but {source} "
                               f"holds {held}; pass a budget of at most {held} (e.g. {spec.name}@{held})")
        budget = held - held % int(spec.params.get("window", 8)) if spec.name == "esc" else held
        if budget < 1:
            notes.append(f"note: {source} holds {held} branches per question, fewer than {spec.text}'s window; "
                         "its row is left out")
            continue
        head, _, tail = spec.text.partition(":")
        smaller = parse_spec(f"{spec.name}@{budget}" + (f":{tail}" if tail else ""))
        fitted.append(smaller)
        notes.append(f"note: {source} holds {held} branches per question, so the default row {spec.text} is "
                     f"replayed as {smaller.text}")
    return fitted, notes
