"""The verdicts of an adaptive sweep from the verdicts its checkpoints hold: one pure function, :func:`decide`.

Why one function for the sweep and for runs already stored: the sweep (``pr1-eval sweep --adaptive
--decide``) calls it after every round to know which checkpoints sample next, and ``pr1-eval
leaderboard --until-decided`` calls it on runs someone else wrote. Both replay the rule from the
samples alone (no state file to lose): a pair's looks are the sweep's round boundaries up to the
samples both checkpoints hold (a rerun sees exactly the looks the first run saw), or, for runs not
written round by round, the one look at what they hold — a single look is as valid as many.

Each pair's one-sided p-values come from one of two tests (``DecideSettings.test``):
:mod:`pr1_eval.stats.group_sequential` (the default: the fixed-k z-test with α spent over the looks up
to k_max, O'Brien–Fleming or Pocock; a sweep with a stated k_max decides as much as fixed k = k_max and
stops early where it can) or :mod:`pr1_eval.stats.paired_sequential` (``cs``: confidence sequences,
valid with no k_max at all, for a sweep that may run on; they pay about 1.3× the interval width at
any one look). :mod:`pr1_eval.stats.ranking_sequential` makes the step-down over pairs, the best and
who samples next from either. Records written before the choice existed hold no ``test`` and replay
with ``cs``, the rule they were decided with.
Problems are pooled: the estimand of a pair is the mean over *all* the sweep's problems (every task's,
each problem weighing the same) of p_A,i − p_B,i.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats import group_sequential as gs
from pr1_eval.stats import paired_sequential as ps
from pr1_eval.stats import ranking_sequential as rs

RULE_NAMES = {
    "obrien-fleming": "paired z-tests with O'Brien-Fleming alpha spending to k_max, weighted Holm step-down over pairs",
    "pocock": "paired z-tests with Pocock alpha spending to k_max, weighted Holm step-down over pairs",
    "cs": "paired empirical-Bernstein confidence sequences, weighted Holm step-down over pairs",
}
TESTS = tuple(RULE_NAMES)


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
    test: str = "obrien-fleming"

    def check(self) -> DecideSettings:
        """The same settings, or a one-line error naming the bad one."""
        if self.question not in rs.QUESTIONS:
            raise Pr1EvalError(f"--decide must be one of {', '.join(rs.QUESTIONS)}, got {self.question!r}")
        if not 0 < self.alpha < 1:
            raise Pr1EvalError(f"--adaptive-alpha must be between 0 and 1, got {self.alpha}")
        if not 0 < self.delta < 1:
            raise Pr1EvalError(f"--delta must be between 0 and 1 (a fraction: 0.05 is 5 points), got {self.delta}")
        if self.test not in RULE_NAMES:
            raise Pr1EvalError(f"--decide-test must be one of {', '.join(RULE_NAMES)}, got {self.test!r}")
        if self.k_max < 1 or self.first < 1 or self.growth <= 1:
            raise Pr1EvalError(f"--adaptive --decide needs -k ≥ 1, --first-round ≥ 1 and --round-growth > 1, got "
                               f"-k {self.k_max}, --first-round {self.first}, --round-growth {self.growth}")
        return self

    def bounds(self) -> list[int]:
        """Samples per problem after each round."""
        return rs.round_bounds(min(self.first, self.k_max), self.k_max, self.growth)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": RULE_NAMES[self.test], **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecideSettings:
        """Settings from a record; one written before ``test`` existed was decided with confidence sequences."""
        known = {k: data[k] for k in asdict(cls()) if k in data}
        return cls(**{"test": "cs", **known})


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


@dataclass(frozen=True)
class _PairLooks:
    """A pair's running p-values over its looks and what its last look shows (estimate, interval, half-width)."""

    running: rs.Running
    estimate: float
    low: float
    high: float


def _pair_looks(x: np.ndarray, y: np.ndarray, looks: Sequence[int], settings: DecideSettings,
                display_alpha: float) -> _PairLooks:
    """Running p-values over the looks ≤ the samples both hold, and the last look's interval at ``display_alpha``."""
    m = min(x.shape[1], y.shape[1])
    if m == 0:
        return _PairLooks(rs.Running.start((1,)), 0.0, -1.0, 1.0)
    diffs = (x[:, :m].astype(float) - y[:, :m])[None]
    at = sorted({*(n for n in looks if n <= m), m})
    running = rs.Running.start((1,))
    if settings.test == "cs":
        ev = ps.evidence(diffs)
        for n in at:
            running = running.update(ev.at(np.array([n - 1])), settings.delta)
        last = ev.at(np.array([m - 1]))
        low, high = (float(v[0]) for v in ps.confidence_sequence(last, display_alpha))
        return _PairLooks(running, float(last.total[0] / last.pairs[0]), low, high)
    zev = gs.z_evidence(diffs)
    # the table of every planned look (one per sweep, cached): looks this pair skipped only cost it their α.
    # Runs not written round by round get one look, their last: it spends all of α, whatever k_max says.
    schedule = sorted({*looks, m})
    table = gs.boundary_table(gs.fractions_of(schedule, settings.k_max if looks else m), settings.test)
    for n in at:
        look = np.array([schedule.index(n)])
        running = running.fold(gs.look_p_values(zev.at(np.array([n - 1])), settings.delta, look, table))
    final = zev.at(np.array([m - 1]))
    low, high = (float(v[0]) for v in gs.interval(final, np.array([schedule.index(m)]), table, display_alpha / 2))
    return _PairLooks(running, float(final.estimate[0]), max(low, -1.0), min(high, 1.0))


def decide(verdicts: Sequence[np.ndarray], settings: DecideSettings, looks: Sequence[int] | None = None) -> Decision:
    """The verdicts of checkpoints (arrival order) holding ``verdicts[c]`` (problems × samples, bool,
    the same problems in the same order for all); ``looks``: the round boundaries (default: the
    settings' rounds), or ``[]`` for one look at what is held."""
    count = len(verdicts)
    looks = settings.bounds() if looks is None else looks
    held = [int(v.shape[1]) for v in verdicts]
    means = [float(v.mean()) if v.size else float("nan") for v in verdicts]
    a_idx, b_idx = np.triu_indices(count, 1)
    display_alpha = settings.alpha / max(len(a_idx), 1)  # the interval printed: Bonferroni-wide, a display only
    parts = [_pair_looks(verdicts[int(a)], verdicts[int(b)], looks, settings, display_alpha)
             for a, b in zip(a_idx, b_idx, strict=True)]
    running = rs.Running(*(np.concatenate([getattr(part.running, name) for part in parts]) if parts else np.ones(0)
                           for name in ("up", "down", "not_below", "not_above")))
    weights, kept = rs.pair_weights(count, settings.planned, settings.reserve) if count > 1 else (np.zeros(0), 1.0)
    cert = rs.certify(running, weights, kept, settings.alpha, count, settings.question)
    rows = [_row(int(a), int(b), part, cert, min(held[a], held[b]))
            for a, b, part in zip(a_idx, b_idx, parts, strict=True)]
    chased = np.array([rs.chased(np.array(r.estimate), np.array(r.resolved), np.array(r.pairs), settings.k_max,
                                 settings.delta) for r in rows], dtype=bool)
    open_now = rs.open_checkpoints(settings.question, cert, rs.as_matrix(chased, count) if count > 1 else None)
    open_now &= np.array(held) < settings.k_max
    best = int(rs.declared_best(cert, np.array(means))) if count else -1
    finished = bool(rs.finished(settings.question, cert, np.array(means), open_now))
    return Decision(held, means, rows, [bool(x) for x in open_now], [bool(x) for x in rs.eliminated(cert)],
                    None if best < 0 else best, finished or not open_now.any(), settings)


def _row(a: int, b: int, part: _PairLooks, cert: rs.Certified, pairs: int) -> PairVerdict:
    if cert.beats[a, b]:
        verdict = "a better"
    elif cert.beats[b, a]:
        verdict = "b better"
    elif cert.close[a, b] and cert.close[b, a]:
        verdict = "within ±δ"
    else:
        verdict = "undecided"
    return PairVerdict(a, b, pairs, part.estimate, part.low, part.high, verdict, (part.high - part.low) / 2)
