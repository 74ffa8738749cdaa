"""How a metric is named: one function from its kind, its k and its checker to the key every
report, leaderboard, dashboard, notebook and lm-eval task prints.

Why one function: a name such as ``best@16_paper`` carries three facts (the estimator, the
samples per problem it is over, the verdicts it reads), and when each consumer wrote it by hand
the same number ended up with two names and a change of k had to be made in a dozen places.

* ``kind`` is the estimator (:data:`KINDS`): ``mean`` (Mean@k, c/n per problem), ``pass`` (the
  unbiased Pass@k), ``best`` (VERL's bootstrap best@k, the paper's "Pass@16") or ``maj`` (Maj@k).
* ``k`` is the samples per problem, or a label standing for it: ``"K"`` where a table shares
  columns over runs of different k, ``"k"`` for an average over tasks of different k.
* ``checker`` is None for math-verify's verdicts, ``"paper"`` for the paper's string checker.

No function reads a name back: a reader that needs a metric's kind, k or checker takes them from
the report's fields (:meth:`pr1_eval.report.schema.TaskMetrics.metric_key` names each field), so a
table's column is named forward from what it shows, never parsed out of another column's name.
"""

from __future__ import annotations

#: The estimators a metric name can start with.
KINDS = ("mean", "pass", "best", "maj")
#: The checkers a name can end with (None: math-verify, no suffix).
CHECKERS = (None, "paper")
#: Labels that stand for k in generic column names.
K_LABELS = ("K", "k")


def metric_name(kind: str, k: int | str, checker: str | None = None) -> str:
    """``metric_name("best", 16, checker="paper") == "best@16_paper"``; ``metric_name("mean", "K") == "mean@K"``."""
    if kind not in KINDS:
        raise ValueError(f"unknown metric kind {kind!r}; one of {', '.join(KINDS)}")
    if checker not in CHECKERS:
        raise ValueError(f"unknown checker {checker!r}; None (math-verify) or 'paper'")
    if isinstance(k, bool) or not (isinstance(k, int) and k >= 1 or k in K_LABELS):
        raise ValueError(f"k must be a positive number or one of {', '.join(K_LABELS)}, got {k!r}")
    return f"{kind}@{k}" + ("" if checker is None else f"_{checker}")
