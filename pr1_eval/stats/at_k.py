"""pass@K, best@K and maj@K at any K ≤ n from one run of n samples per problem (``report --at``).

pass@K (unbiased, 1 − C(n−c, K)/C(n, K)) and best@K (1 − (1 − c/n)^K) have closed forms at any K.
maj@K does not, under the report's tie rule (:data:`pr1_eval.stats.metrics.MAJ_TIE_RULE`).

**Definition of maj@K for K < n** (:func:`maj_at_k`): the mean, over *every* K-subset of a
problem's n samples, of the majority verdict of that subset (ties by the tie rule, missing answers
never win) — the same construction as the unbiased pass@K, which is the mean over all K-subsets of
"some sample is correct". It is the unbiased estimate of the chance that a fresh K-sample vote is
correct, and at K = n it is the ordinary maj@n (one subset). Why exact rather than random subsets:
the count of winning subsets has a closed form by vote counts, so no seed and no Monte Carlo error
enter a reported number. A subset wins when, for some m ≥ 1, a correct answer class holds m of its
samples, every class holds at most m and no wrong class holds m; so

    winning = Σ_{m ≥ 1} [ N(correct ≤ m, wrong ≤ m−1) − N(correct ≤ m−1, wrong ≤ m−1) ]

where N(caps) counts K-subsets whose per-class counts respect the caps (samples without an answer
are free): the coefficient of x^K in Π_classes Σ_{j ≤ cap} C(size, j) x^j · (1 + x)^{free}.
Classes no larger than their cap are free too, so the product runs only over the few large classes.
Integers throughout: the value is exact up to the final division.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import comb

import numpy as np

from pr1_eval.stats.metrics import best_at_k, pass_at_k


def _subsets_within_caps(big: Sequence[tuple[int, int]], free: int, k: int) -> int:
    """K-subsets whose count in each (size, cap) class of ``big`` is ≤ cap, ``free`` samples unrestricted."""
    poly = [1]
    for size, cap in big:
        top = min(cap, k)
        term = [comb(size, j) for j in range(top + 1)]
        out = [0] * min(len(poly) + top, k + 1)
        for i, a in enumerate(poly):
            if a:
                for j, b in enumerate(term[:len(out) - i]):
                    out[i + j] += a * b
        poly = out
    return sum(a * comb(free, k - i) for i, a in enumerate(poly) if k - i <= free)


def _count(correct: tuple[int, ...], wrong: tuple[int, ...], none: int, k: int, cap_right: int, cap_wrong: int) -> int:
    big = [(s, cap_right) for s in correct if s > cap_right] + [(s, cap_wrong) for s in wrong if s > cap_wrong]
    free = none + sum(s for s in correct if s <= cap_right) + sum(s for s in wrong if s <= cap_wrong)
    return _subsets_within_caps(big, free, k)


@lru_cache(maxsize=65536)
def _maj_at_k(correct: tuple[int, ...], wrong: tuple[int, ...], none: int, k: int) -> float:
    n = sum(correct) + sum(wrong) + none
    winning = sum(_count(correct, wrong, none, k, m, m - 1) - _count(correct, wrong, none, k, m - 1, m - 1)
                  for m in range(1, min(k, max(correct, default=0)) + 1))
    return winning / comb(n, k)


def maj_at_k(correct_sizes: Sequence[int], wrong_sizes: Sequence[int], n_none: int, k: int) -> float:
    """maj@K of one problem (module docstring): sizes of its correct and wrong answer classes and its
    samples without an answer. A class is correct when any of its samples is (as in the report)."""
    sizes = [*correct_sizes, *wrong_sizes]
    if any(s < 1 for s in sizes) or n_none < 0:
        raise ValueError("answer classes hold at least one sample, and n_none >= 0")
    n = sum(sizes) + n_none
    if not 1 <= k <= n:
        raise ValueError(f"maj@{k} needs 1 <= K <= n = {n} samples")
    return _maj_at_k(tuple(sorted(correct_sizes)), tuple(sorted(wrong_sizes)), n_none, k)


def problem_classes(classes: np.ndarray, answered: np.ndarray, correct: np.ndarray) -> tuple[list[int], list[int], int]:
    """One problem's samples as (correct class sizes, wrong class sizes, samples without an answer)."""
    held = classes[answered]
    if not held.size:
        return [], [], int(len(classes))
    names, inverse, sizes = np.unique(held, return_inverse=True, return_counts=True)
    right = np.bincount(inverse, weights=correct[answered].astype(float), minlength=names.size) > 0
    return sizes[right].tolist(), sizes[~right].tolist(), int((~answered).sum())


def at_k_values(n: int, c: int, classes: tuple[list[int], list[int], int], k: int) -> dict[str, float]:
    """What one problem of ``n`` samples (``c`` correct, answer ``classes``) contributes to pass@K,
    best@K and maj@K at ``k``. A problem holding fewer than ``k`` samples (an adaptive run stopped it
    early) contributes the plug-in 1 − (1 − c/n)^k and the vote of its n samples, as the report's own
    pass@k does for such problems (:func:`pr1_eval.stats.metrics.problem_values`)."""
    if n < k:
        return {"pass_at_k": best_at_k(n, c, k), "best_at_k": best_at_k(n, c, k),
                "maj_at_k": maj_at_k(classes[0], classes[1], classes[2], n)}
    return {"pass_at_k": pass_at_k(n, c, k), "best_at_k": best_at_k(n, c, k),
            "maj_at_k": maj_at_k(classes[0], classes[1], classes[2], k)}
