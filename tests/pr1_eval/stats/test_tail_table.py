"""The expanded-tail table (pr1_eval.stats.tail_table) holds scipy's tails, and expanded_tail reads it
without importing scipy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pr1_eval.stats import tail_table
from pr1_eval.stats.metrics import expanded_tail


def test_every_tabled_tail_is_scipys() -> None:
    """Each entry against scipy.special computed here, vectorised (a second route to the same function);
    within 1e-12 relative, since another machine's libm may round a last bit otherwise."""
    from scipy.special import ndtr, stdtrit

    p = np.arange(tail_table.FIRST_P, tail_table.LAST_P + 1)
    by_scipy = ndtr(-stdtrit(p - 1, 1 - tail_table.TABLED_ALPHA / 2) * np.sqrt(p / (p - 1)))
    tabled = [tail_table.tabled_tail(int(n), 0.05) for n in p]
    assert None not in tabled
    np.testing.assert_allclose(np.array(tabled, dtype=float), by_scipy, rtol=1e-12, atol=0)


@pytest.mark.parametrize(("n", "alpha"), [(1, 0.05), (5001, 0.05), (30, 0.01), (500, 0.2)])
def test_outside_the_table_scipy_answers(n: int, alpha: float) -> None:
    assert tail_table.tabled_tail(n, alpha) is None
    expected = alpha / 2 if n < 2 else tail_table.scipy_tail(n, alpha)
    assert expanded_tail(n, alpha) == expected


def test_a_tabled_tail_needs_no_scipy() -> None:
    """The point of the table: an interval over 500 problems at α = 0.05 does not import scipy."""
    code = ("import sys; from pr1_eval.stats.metrics import bootstrap_ci; bootstrap_ci([0.0, 1.0] * 250); "
            "print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
