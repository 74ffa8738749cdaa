"""Which answer is the mode of a model's answers, read one branch at a time: the certified
stopping rule of the test-time controllers (:mod:`pr1_eval.replay.certified`), as pure statistics.

**The confidence sequence** (a betting construction, Waudby-Smith & Ramdas 2024). Let L_s be the
leading class after the first s − 1 answers (most votes, earliest first on ties: known before
answer s is read) and, for every class j, the wealth

    K_t(j) = mean over λ ∈ Λ of Π_{s ≤ t, L_s ≠ j} (1 + λ·(1{X_s = L_s} − 1{X_s = j}))

(Λ: :data:`LAMBDAS`, a fixed grid in (0, 1)). If j is a mode, p_j ≥ p_{L_s}, so each factor has
conditional mean 1 + λ(p_{L_s} − p_j) ≤ 1: K(j) is a nonnegative supermartingale starting at 1, and
by Ville's inequality it ever reaches 1/alpha with probability ≤ alpha. So C_t = {j : K_t(j) <
1/alpha} contains every mode at every t with probability ≥ 1 − alpha, and stopping once C_t holds
only the leader certifies a mode with that probability. K(j) depends on two counts only (answers
that were the leader's while j did not lead, and j's own answers while it did not lead), and every
class never seen shares one K, so the set of possible answers never has to be listed.

Why this and not a pairwise test of the leader against the runner-up: the leader is chosen by the
data, so a fixed-pair test would need a union over every class that could lead (unbounded when the
answer set is unknown); here the error event needs the *true mode's* K to cross, one process. Why a
grid mixture over λ rather than one λ: no tuning; it pays about log |Λ| in evidence for adapting to
the gap between the top two classes, from a clear winner (large λ) to near-ties (small λ).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

#: The bets mixed in every K(j): 20 evenly spaced λ in (0, 1).
LAMBDAS = np.arange(1, 21) / 21.0
_LOG_UP, _LOG_DOWN = np.log1p(LAMBDAS), np.log1p(-LAMBDAS)


@lru_cache(maxsize=65536)
def log_wealth(wins: int, losses: int) -> float:
    """log K(j) from its two counts: log mean_λ (1 + λ)^wins (1 − λ)^losses (kept: a replay asks for
    the same few thousand pairs millions of times)."""
    terms = wins * _LOG_UP + losses * _LOG_DOWN
    top = float(terms.max())
    return top + math.log(float(np.mean(np.exp(terms - top))))


@dataclass
class ModeSequence:
    """The running confidence sequence for the mode over a stream of answer classes (None: no answer)."""

    alpha: float = 0.05
    counts: Counter[str] = field(default_factory=Counter)
    order: dict[str, int] = field(default_factory=dict)  # first appearance, for ties
    leader_hits: int = 0  # answers equal to the leader of their time: the unseen classes' wins
    wins: Counter[str] = field(default_factory=Counter)  # leader hits counted while j itself led (subtracted)
    losses: Counter[str] = field(default_factory=Counter)  # j's answers while j did not lead

    def leader(self) -> str | None:
        if not self.counts:
            return None
        return max(self.counts, key=lambda c: (self.counts[c], -self.order[c]))

    def add(self, answer_class: str | None) -> None:
        """One more answer: bet on it against every class, with the leader fixed before reading it."""
        if answer_class is None:
            return
        lead = self.leader()
        if lead is not None:
            if answer_class == lead:
                self.leader_hits += 1
                self.wins[lead] += 1  # K(lead) places no bet while it leads: undo its win below
            else:
                self.losses[answer_class] += 1
        self.order.setdefault(answer_class, len(self.order))
        self.counts[answer_class] += 1

    def log_k(self, answer_class: str) -> float:
        """log K(j) for any class j (one never seen included)."""
        return log_wealth(self.leader_hits - self.wins[answer_class], self.losses[answer_class])

    def plausible(self) -> list[str]:
        """The seen classes still in the confidence set (an unseen class is in it while K(unseen) < 1/alpha)."""
        level = math.log(1 / self.alpha)
        return [c for c in self.counts if self.log_k(c) < level]

    def certified(self) -> str | None:
        """The leader, once every other class (seen or not) is out of the confidence set; else None."""
        lead = self.leader()
        if lead is None:
            return None
        level = math.log(1 / self.alpha)
        if log_wealth(self.leader_hits, 0) < level:  # a class never seen could still be the mode
            return None
        return lead if all(self.log_k(c) >= level for c in self.counts if c != lead) else None
