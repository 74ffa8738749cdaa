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
