"""Python's cyclic garbage collector, off while a command builds its big tables.

Why: an ``analyze`` of a sweep creates millions of small containers (a list of path texts per
block, a tuple per row, the object columns' cells) that live until the command ends. CPython
(3.11) runs a collection every 700 net container allocations and a full one each time the
long-lived objects have grown by a quarter; each walks the containers of its generations, so on a
12-checkpoint sweep the collector took about a tenth of the command's CPU time (``gc_collect_main``,
``visit_decref`` and ``visit_reachable`` in a profile) and found next to nothing: the tables hold
no reference cycles. Its walks also write to every object's header, so in forked workers they
copied pages the workers only read.

Measured on the 12 x 500 x 16 sweep of ``bench/bench_analyze.py``, cold, back to back: the
command took 34.5 s of user time with the collector off against 38.1 s with it on, and raising
its thresholds a hundredfold instead (collections still made, rarely) kept 40% of the cost. Peak
memory was the same either way (1.74 GB), as nothing it would free was there. So it is off, for
the command only: reference counting still frees everything that is not in a cycle, and the
previous state is restored on exit, so a notebook or test that calls a command keeps its own.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_off() -> Iterator[None]:
    """Within the block, no automatic cyclic collection (see the module docstring), in this
    process and in the workers forked in it; afterwards the collector as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
