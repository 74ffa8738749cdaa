"""``analyze`` starts math-verify's grading process as it begins, before its stack is imported,
when the runs are large enough to need it and worker processes will run beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.pipeline import early_grading


def _runs(tmp_path: Path, sizes: list[int]) -> Path:
    root = tmp_path / "sweep"
    for i, size in enumerate(sizes):
        part = root / f"step{i}" / "samples.parquet"
        part.mkdir(parents=True)
        (part / "part-00000.parquet").write_bytes(b"x" * size)
        (root / f"step{i}" / "run.json").write_text("{}")
    return root


def test_stored_bytes_counts_every_file_below_the_runs_until_enough(tmp_path: Path) -> None:
    root = _runs(tmp_path, [1000, 2000, 3000])
    assert early_grading.stored_bytes([str(root)], enough=10**9) == 6000 + 3 * 2
    assert early_grading.stored_bytes([str(root / "step1"), str(root / "step2")], enough=10**9) == 5000 + 2 * 2
    assert 1000 <= early_grading.stored_bytes([str(root)], enough=1000) < 6000  # stops once it has enough
    assert early_grading.stored_bytes([str(root / "step0" / "run.json")]) == 2
    assert early_grading.stored_bytes([str(tmp_path / "missing")]) == 0


@pytest.mark.parametrize(("sizes", "with_workers", "started"), [
    ([early_grading.EARLY_GRADING_BYTES], True, True),  # a run of some 600 responses and up
    ([early_grading.EARLY_GRADING_BYTES // 4] * 4, True, True),  # the sweep's, summed
    ([early_grading.EARLY_GRADING_BYTES // 2], True, False),  # a demo, a test: when a check comes
    ([early_grading.EARLY_GRADING_BYTES], False, False),  # no workers: nothing would run beside it
])
def test_the_grader_starts_with_the_command_when_the_runs_are_large(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: list[int], with_workers: bool, started: bool) -> None:
    calls: list[int] = []
    monkeypatch.setattr(early_grading, "start_worker_early", lambda: calls.append(1))
    assert early_grading.start_grading_now([str(_runs(tmp_path, sizes))], with_workers) is started
    assert calls == ([1] if started else [])


def test_deciding_imports_no_analysis_stack() -> None:
    """Decided before pandas, pyarrow and numba load: that import is what it overlaps."""
    code = ("import sys, analysis.command, analysis.pipeline.early_grading; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'numba', 'math_verify', 'sympy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.stdout.strip() == "[]"
