"""Fixtures shared by test modules.

``fake_vllm``: the stand-in ``vllm`` package of ``tests/fake_vllm`` imported in place of any real
one, with its scripted model reset, for one test. It lives here once because its teardown is
subtle: the fake must leave ``sys.modules`` for good. Deleting it through
``monkeypatch.delitem`` would record the fake and put it back on undo, and later tests would then
find a ``vllm`` that is not installed (``vllm_available()`` true on a machine without vLLM).
"""

from __future__ import annotations

import sys
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


# ----- leaving the session --------------------------------------------------------------------
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the process with the session's status once pytest has reported everything.

    Why: on a loaded two-core machine the interpreter's own teardown crashed once (SIGSEGV after
    "998 passed"), in the native libraries the suite loads (torch, pyarrow, tokenizers, Ray clients)
    whose threads outlive the tests; the tests had passed, but the crash turned the run's status
    into 139. Every result is written by then (the summary, the cache), so skipping the teardown
    loses nothing; the threads still alive are named on stderr, for whoever looks into it.
    """
    import os
    import threading

    lingering = [t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    if lingering:
        print(f"conftest: threads alive at exit: {', '.join(sorted(lingering))}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    if _EXIT_STATUS and os.environ.get("PR1_TEST_FULL_TEARDOWN") != "1":
        os._exit(_EXIT_STATUS[-1])
