"""Numeric command-line values checked where they are parsed: one clear line, before any work.

Why: a value argparse reads as ``type=int`` is any integer. ``--batch-size 0`` then failed with
``range() arg 3 must not be zero`` after the model had loaded, and ``--problems-per-chunk 0``,
``--seed -1`` or ``--seed 2**70`` were taken without a word. Each numeric option states its range
here (:func:`int_in`, :func:`float_in`) and argparse refuses a value outside it as a usage error
(exit 2, one line naming the option, the value and the range), like any other bad option.

Decisions:

* ``--seed`` is in [0, 2**63 - 1]: -1 means "unseeded" to vLLM and torch users, which a pr1-eval
  run never is (its request seeds are derived from the run seed), and a value past int64 cannot be
  held by the readers of runs (pandas, parquet) that carry ``seed`` as a column.
* Worker counts (``--grade-workers``) are checked by their own cap (:mod:`pr1_eval.grading`),
  not here.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: The largest seed a run accepts (see the module docstring).
MAX_SEED = MAX_INT64 = 2**63 - 1


def int_in(low: int, high: int | None = None, what: str = "") -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]`` (no upper bound when ``high`` is None)."""
    span = f"at least {low}" if high is None else f"from {low} to {high}"

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number {span}{what}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {span}{what}, got {value}")
        return value
    parse.__name__ = "integer"  # what argparse names in "invalid integer value"
    return parse


def float_in(low: float, high: float | None = None, *, low_open: bool = False,
             high_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number above ``low`` (``low_open``) or at least it, and below
    ``high`` (``high_open``) or at most it."""
    span = (f"above {low:g}" if low_open else f"at least {low:g}") + (
        "" if high is None else f" and {'below' if high_open else 'at most'} {high:g}")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number {span}, got {text!r}") from None
        if (not math.isfinite(value) or value < low or (low_open and value == low)
                or (high is not None and (value > high or (high_open and value == high)))):
            raise argparse.ArgumentTypeError(f"must be a number {span}, got {text}")
        return value
    parse.__name__ = "number"
    return parse


positive_int = int_in(1)
seed_int = int_in(0, MAX_SEED)
#: A training step: what a run's record and every reader of it can hold (int64).
step_int = int_in(0, MAX_INT64)
