"""Starting a local Ray node on a loaded machine: Ray's own start-up wait is a fixed 30 s.

Ray 2.x waits a fixed 30 s for the raylet it started to register with its GCS
(``ray/_private/node.py``: ``raylet_start_wait_time_s = 30``, not configurable), then raises
``Exception("The current node timed out during startup. …")``. On a busy machine that wall-clock
limit trips on a node that was starting fine: at load 16 on two cores a bench's ``ray.init`` raised
it, and so did a nano training stage's (VERL calls ``ray.init`` itself). A start that failed that
way is therefore tried again (:data:`START_ATTEMPTS` in all), each retry said on stderr; any other
error is raised at once. ``tests/pr1_eval/scaleout/test_ray_startup.py`` reads Ray's source, so an upgrade that makes
the wait configurable or rewords it is named.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

#: What Ray's exception says when its fixed start-up wait ran out.
RAY_START_TIMEOUT = "The current node timed out during startup"
#: Ray's fixed wait, seconds (``ray/_private/node.py``).
RAY_START_WAIT_S = 30
#: Starts tried before the timeout is reported.
START_ATTEMPTS = 3

T = TypeVar("T")


def is_start_timeout(error: BaseException) -> bool:
    """Whether ``error`` is Ray's fixed start-up wait running out (not a real failure to start)."""
    return RAY_START_TIMEOUT in str(error)


def start_with_retries(start: Callable[[], T], clean_up: Callable[[], None], what: str) -> T:
    """``start()``, tried again after :func:`is_start_timeout` errors (``clean_up()`` between tries, e.g.
    ``ray.shutdown``), up to :data:`START_ATTEMPTS` starts; the last error is raised as it was."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return start()
        except Exception as error:
            if attempt == START_ATTEMPTS or not is_start_timeout(error):
                raise
            clean_up()
            print(f"[pr1-eval] {what}: {retry_note(attempt)}", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def retry_note(attempt: int) -> str:
    """What a retry after start ``attempt`` timed out says (here and for a nano stage restarted whole)."""
    return (f"Ray's node did not come up within its fixed {RAY_START_WAIT_S} s (a loaded machine); starting it "
            f"again ({attempt + 1} of {START_ATTEMPTS})")
