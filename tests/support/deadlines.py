"""Wall-clock limits for the tests that scale with the machine's load.

Why: a limit sized on an idle two-core machine (a subprocess given 300 s) fails a healthy test on a
busy one: at a load of 19 the same work takes ten times as long, and the verdict would follow the
machine instead of the code. A limit here still catches a hang (it is finite), but it grows with the
load average per core at the moment it is set, never shrinks below the idle figure, and is capped so
a real hang still ends.
"""

from __future__ import annotations

import math
import os

CAP = 20.0
"""The largest factor: a limit never grows past 20 times its idle figure."""


def load_factor() -> float:
    """The one-minute load average per core, at least 1 (at most :data:`CAP`)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not every platform reports a load average
        return 1.0
    return min(CAP, max(1.0, load / (os.cpu_count() or 1)))


def scaled(seconds: float) -> int:
    """``seconds`` (the limit on an idle machine) times :func:`load_factor`, rounded up to whole seconds
    (some callers take only integers: nbclient's cell timeout is a traitlets ``Integer``)."""
    return math.ceil(seconds * load_factor())
