"""The verdicts of an adaptive sweep from the verdicts its checkpoints hold: one pure function, :func:`decide`.

Why one function for the sweep and for runs already stored: the sweep (``pr1-eval sweep --adaptive
--decide``) calls it after every round to know which checkpoints sample next, and ``pr1-eval
leaderboard --until-decided`` calls it on runs someone else wrote. Both replay the rule from the
samples alone (no state file to lose): a pair's looks are the sweep's round boundaries up to the
samples both checkpoints hold (a rerun sees exactly the looks the first run saw), or, for runs not
written round by round, the one look at what they hold — a single look is as valid as many.

The statistics are :mod:`pr1_eval.stats.paired_sequential` (each pair's confidence sequence) and
:mod:`pr1_eval.stats.ranking_sequential` (the step-down over pairs, the best, who samples next).
Problems are pooled: the estimand of a pair is the mean over *all* the sweep's problems (every task's,
each problem weighing the same) of p_A,i − p_B,i.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats import paired_sequential as ps
from pr1_eval.stats import ranking_sequential as rs

RULE_NAME = "paired empirical-Bernstein confidence sequences, weighted Holm step-down over pairs"


@dataclass(frozen=True)
class DecideSettings:
    """The question and the rule's parameters, as ``run.json`` and the sweep's record keep them."""

    question: str = "best"
    alpha: float = 0.05
    delta: float = 0.05
    k_max: int = 64
    first: int = 4
    growth: float = 2.0
    planned: int | None = None
    reserve: float = 0.1

    def check(self) -> DecideSettings:
        """The same settings, or a one-line error naming the bad one."""
        if self.question not in rs.QUESTIONS:
            raise Pr1EvalError(f"--decide must be one of {', '.join(rs.QUESTIONS)}, got {self.question!r}")
        if not 0 < self.alpha < 1:
            raise Pr1EvalError(f"--adaptive-alpha must be between 0 and 1, got {self.alpha}")
        if not 0 < self.delta < 1:
            raise Pr1EvalError(f"--delta must be between 0 and 1 (a fraction: 0.05 is 5 points), got {self.delta}")
        if self.k_max < 1 or self.first < 1 or self.growth <= 1:
            raise Pr1EvalError(f"--adaptive --decide needs -k ≥ 1, --first-round ≥ 1 and --round-growth > 1, got "
                               f"-k {self.k_max}, --first-round {self.first}, --round-growth {self.growth}")
        return self

    def bounds(self) -> list[int]:
        """Samples per problem after each round."""
        return rs.round_bounds(min(self.first, self.k_max), self.k_max, self.growth)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": RULE_NAME, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecideSettings:
        known = {k: data[k] for k in asdict(cls()) if k in data}
        return cls(**known)


@dataclass(frozen=True)
class PairVerdict:
    """One comparison: Δ = mean over problems of p_a − p_b, its CS, what it certifies."""

    a: int
    b: int
    pairs: int  # samples per problem both hold
    estimate: float
    low: float
    high: float
    verdict: str  # "a better" | "b better" | "within ±δ" | "undecided"
    resolved: float  # half-width of the CS: the gap this budget resolves (the MDE reached)


@dataclass
class Decision:
    """The sweep's state: per checkpoint its samples, mean and status; per pair its verdict."""

    held: list[int]
    means: list[float]
    pairs: list[PairVerdict]
    open: list[bool]
    eliminated: list[bool]
    best: int | None
    finished: bool
    settings: DecideSettings = field(default_factory=DecideSettings)


def _pair_evidence(x: np.ndarray, y: np.ndarray, looks: Sequence[int], delta: float) -> tuple[rs.Running, ps.Evidence]:
    """Running p-values over the looks ≤ the samples both hold, and the evidence at the last look."""
    m = min(x.shape[1], y.shape[1])
    if m == 0:
        empty = ps.Evidence(np.zeros(1), np.zeros(1), np.zeros((1, 2, len(ps.KAPPAS))))
        return rs.Running.start((1,)), empty
    ev = ps.evidence((x[:, :m].astype(float) - y[:, :m])[None])
    at = sorted({*(n for n in looks if n <= m), m})
    running = rs.Running.start((1,))
    for n in at:
        running = running.update(ev.at(np.array([n - 1])), delta)
    return running, ev.at(np.array([m - 1]))


def decide(verdicts: Sequence[np.ndarray], settings: DecideSettings, looks: Sequence[int] | None = None) -> Decision:
    """The verdicts of checkpoints (arrival order) holding ``verdicts[c]`` (problems × samples, bool,
    the same problems in the same order for all); ``looks``: the round boundaries (default: the
    settings' rounds), or ``[]`` for one look at what is held."""
    count = len(verdicts)
    looks = settings.bounds() if looks is None else looks
    held = [int(v.shape[1]) for v in verdicts]
    means = [float(v.mean()) if v.size else float("nan") for v in verdicts]
    a_idx, b_idx = np.triu_indices(count, 1)
    parts = [_pair_evidence(verdicts[int(a)], verdicts[int(b)], looks, settings.delta)
             for a, b in zip(a_idx, b_idx, strict=True)]
    running = rs.Running(*(np.concatenate([getattr(r, name) for r, _ in parts]) if parts else np.ones(0)
                           for name in ("up", "down", "not_below", "not_above")))
    weights, kept = rs.pair_weights(count, settings.planned, settings.reserve) if count > 1 else (np.zeros(0), 1.0)
    cert = rs.certify(running, weights, kept, settings.alpha, count)
    rows = [_row(int(a), int(b), ev, cert, settings, min(held[a], held[b]))
            for (a, b), (_, ev) in zip(zip(a_idx, b_idx, strict=True), parts, strict=True)]
    chased = np.array([rs.chased(np.array(r.estimate), np.array(r.resolved), np.array(r.pairs), settings.k_max,
                                 settings.delta) for r in rows], dtype=bool)
    open_now = rs.open_checkpoints(settings.question, cert, rs.as_matrix(chased, count) if count > 1 else None)
    open_now &= np.array(held) < settings.k_max
    best = int(rs.declared_best(cert, np.array(means))) if count else -1
    finished = bool(rs.finished(settings.question, cert, np.array(means), open_now))
    return Decision(held, means, rows, [bool(x) for x in open_now], [bool(x) for x in rs.eliminated(cert)],
                    None if best < 0 else best, finished or not open_now.any(), settings)


def _row(a: int, b: int, ev: ps.Evidence, cert: rs.Certified, settings: DecideSettings, pairs: int) -> PairVerdict:
    alpha = settings.alpha / max(len(cert.beats), 1)  # the interval printed: Bonferroni-wide, a display only
    low, high = (float(x[0]) for x in ps.confidence_sequence(ev, alpha))
    estimate = float(ev.total[0] / ev.pairs[0]) if ev.pairs[0] else 0.0
    if cert.beats[a, b]:
        verdict = "a better"
    elif cert.beats[b, a]:
        verdict = "b better"
    elif cert.close[a, b] and cert.close[b, a]:
        verdict = "within ±δ"
    else:
        verdict = "undecided"
    return PairVerdict(a, b, pairs, estimate, low, high, verdict, (high - low) / 2)
