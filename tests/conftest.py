"""Fixtures shared by test modules.

``fake_vllm``: the stand-in ``vllm`` package of ``tests/fake_vllm`` imported in place of any real
one, with its scripted model reset, for one test. It lives here once because its teardown is
subtle: the fake must leave ``sys.modules`` for good. Deleting it through
``monkeypatch.delitem`` would record the fake and put it back on undo, and later tests would then
find a ``vllm`` that is not installed (``vllm_available()`` true on a machine without vLLM).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FAKE_VLLM = Path(__file__).parent / "fake_vllm"


def _vllm_modules() -> list[str]:
    return [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")]


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    for name in _vllm_modules():  # a vllm imported before (real or not) comes back on undo
        monkeypatch.delitem(sys.modules, name)
    import vllm

    vllm.LLM.instances.clear()
    vllm.LLM.script = staticmethod(vllm._default_script)
    yield vllm
    vllm.LLM.script = staticmethod(vllm._default_script)
    vllm.LLM.instances.clear()
    for name in _vllm_modules():  # the fake itself: gone for good (see the module docstring)
        del sys.modules[name]


@pytest.fixture()
def verl_event_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A fresh event loop, the main thread's for one test, closed after it with its executor joined.

    Why: VERL's agent loops, agent-loop workers and reward managers take the main thread's loop
    when they are built (``verl.utils.ray_utils.get_event_loop``, which makes one when there is
    none) and run blocking work on its default executor. A loop nobody closes keeps that
    executor's threads (``asyncio_0``, ``asyncio_1`` …) alive to the end of the session. Build the
    VERL objects inside the test that takes this fixture, and drive them with this loop.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield loop
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        asyncio.set_event_loop(None)


# ----- leaving the session --------------------------------------------------------------------
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


def _close_session_threads() -> None:
    """Close, through each owner's own close, the Python threads the session leaves running.

    They are: the process-wide grading pool's dispatcher (and its worker processes), which the
    pool closes at interpreter exit, a step ``os._exit`` below skips; and tqdm's monitor threads,
    one per progress-bar class used, which tqdm keeps for the life of the process. (The executor
    threads of VERL's event loops are joined per test by :func:`verl_event_loop`, the Ray driver's
    by ``ray.shutdown`` in the Ray tests.)
    """
    shared = sys.modules.get("pr1_eval.grading.shared")
    if shared is not None:
        shared.close_shared_pool()
    monitor = sys.modules.get("tqdm._monitor")
    if monitor is not None:
        for thread in threading.enumerate():
            if isinstance(thread, monitor.TMonitor):
                thread.exit()  # wakes it and joins it


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the session's threads, then end the process with the session's status.

    Why ``os._exit`` still: on a loaded two-core machine the interpreter's own teardown crashed
    once (SIGSEGV after "998 passed"), in the native libraries the suite loads; the tests had
    passed, but the crash turned the run's status into 139. Every Python thread the suite starts
    is now closed first (:func:`_close_session_threads`; any other still alive is named on
    stderr, as a defect to fix where it is started), but those libraries keep thread pools of
    their own that Python can neither see nor join (torch's intra-op pool, the tokenizers' pool,
    pyarrow's CPU and I/O pools, Ray's core-worker threads; one that once ran Python code shows
    in ``threading`` as ``Dummy-N`` and is not named), and their teardown is the part that
    crashed. Every result is
    written by then (the summary, the cache), so skipping it loses nothing.
    ``PR1_TEST_FULL_TEARDOWN=1`` runs the full teardown instead.
    """
    _close_session_threads()
    alive = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    lingering = sorted(t.name for t in alive if not isinstance(t, threading._DummyThread))
    if lingering:
        print(f"conftest: Python threads alive at exit: {', '.join(lingering)}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if _EXIT_STATUS and os.environ.get("PR1_TEST_FULL_TEARDOWN") != "1":
        os._exit(_EXIT_STATUS[-1])
