"""Pure metric functions over per-problem counts.

Definitions (DESIGN.md): Mean@k = mean over problems of c/n. Unbiased Pass@k (n ≥ k samples,
c correct) = 1 − C(n−c, k)/C(n, k). Maj@k = share of problems whose most frequent
(math-equivalent) answer is correct.

The paper's "Pass@16" is not Pass@k: it is VERL's bootstrap ``best@k`` (VERL logs it as
``best@16/mean``), the chance that k draws *with replacement* from the n samples hold a correct
one, whose expectation is 1 − (1 − c/n)^k: :func:`best_at_k`. It is named for the estimator it
is, not for the paper, because it can be applied to any verdicts: the report gives it on
math-verify verdicts (``best@K``) and on the paper's own checker (``best@K_paper``); only the
latter, with ``mean@K_paper``, is fully paper-compatible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from math import comb

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of the probability that at least one of k samples is correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def best_at_k(n: int, c: int, k: int) -> float:
    """Expectation of VERL's bootstrap best@k: 1 − (1 − c/n)^k (the paper's "Pass@k")."""
    if n <= 0:
        raise ValueError("need at least one sample")
    return 1.0 - (1.0 - c / n) ** k


def majority_correct(answer_classes: Sequence[int | None], correct: Sequence[bool | None]) -> bool:
    """Whether the most frequent answer class is correct (ties: the class seen first).

    ``answer_classes[i]`` groups math-equivalent answers; None = no answer (never a majority).
    """
    counts = Counter(c for c in answer_classes if c is not None)
    if not counts:
        return False
    best = max(counts.values())
    winner = next(c for c in answer_classes if c is not None and counts[c] == best)
    return any(bool(ok) for cls, ok in zip(answer_classes, correct, strict=True) if cls == winner)


def bootstrap_ci(
    per_problem: Sequence[float], statistic: Callable[[np.ndarray], float] = np.mean, *,
    n_boot: int = 2000, alpha: float = 0.05, seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval over problems (None with < 2 problems)."""
    values = np.asarray(per_problem, dtype=float)
    if values.size < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(n_boot, values.size))
    stats = values[idx].mean(axis=1) if statistic is np.mean else np.apply_along_axis(statistic, 1, values[idx])
    low, high = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
