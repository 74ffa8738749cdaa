"""The short CI version of ``bench/bench_kill_resume.py``: SIGKILL a run twice, cut one stored
part short on disk, let it finish: nothing lost, nothing duplicated, equal to an uninterrupted run.

Uses the random tiny model (fast to load; its samples are as deterministic as a trained one's).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pr1_eval.testing.tiny_model import cached_tiny_model

pytestmark = pytest.mark.slow


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "bench" / "bench_kill_resume.py"
    spec = importlib.util.spec_from_file_location("bench_kill_resume", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_two_sigkills_and_a_part_cut_short_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    bench = _bench()
    figures = bench.run_short(cached_tiny_model("random"), tmp_path, kills=2, cut_parts=1, seed=1,
                              tasks="aime24", limit=5, k=2, max_new_tokens=12)
    events = figures.events
    assert figures.kills >= 1, events  # at least one kill landed before the run could finish by itself
    assert figures.final_samples == figures.expected_samples == 10
    assert (figures.lost, figures.duplicated, figures.missing_at_end) == (0, 0, 0), events
    assert figures.differing_from_baseline == 0 and figures.orphans == 0
    if figures.cut_parts:  # the part cut short was detected on resume and set aside, never read
        assert figures.parts_set_aside == figures.cut_parts
    assert figures.ok
