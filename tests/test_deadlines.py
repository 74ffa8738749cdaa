"""The tests' wall-clock limits grow with the load (tests/support/deadlines.py), never below the idle figure."""

from __future__ import annotations

import math

import pytest

from tests.support import deadlines


@pytest.mark.parametrize(("load", "cores", "factor"), [(0.3, 2, 1.0), (19.0, 2, 9.5), (500.0, 2, deadlines.CAP)])
def test_limits_scale_with_the_load_per_core(monkeypatch: pytest.MonkeyPatch, load: float, cores: int,
                                             factor: float) -> None:
    monkeypatch.setattr(deadlines.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(deadlines.os, "cpu_count", lambda: cores)
    assert deadlines.load_factor() == pytest.approx(factor)
    assert deadlines.scaled(300) == math.ceil(300 * factor) and isinstance(deadlines.scaled(30.5), int)
