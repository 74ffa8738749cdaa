"""bench/smoke.sh (run by .ci/run) names every script of bench/: a CPU bench with its small size,
or a GPU-only one with the reason it is skipped; nothing in bench/ is left out silently."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "bench" / "smoke.sh"


def _entries(array: str) -> list[tuple[str, str]]:
    body = re.search(rf"^{array}=\((.*?)^\)", SMOKE.read_text(), flags=re.DOTALL | re.MULTILINE)
    assert body, f"{array} not found in bench/smoke.sh"
    return [tuple(e.split("|", 1)) for e in re.findall(r'^\s*"([^"]+)"', body.group(1), flags=re.MULTILINE)]  # type: ignore[misc]


def test_every_bench_script_is_listed() -> None:
    cpu, gpu = _entries("CPU_BENCHES"), _entries("GPU_ONLY")
    assert len(cpu) >= 9 and all(reason.strip() for _, reason in gpu)
    for name, _ in cpu:
        assert (ROOT / "bench" / name).is_file(), name
    patterns = [name for name, _ in cpu + gpu]
    for script in sorted(p.name for p in (ROOT / "bench").iterdir() if p.is_file()):
        assert any(fnmatch.fnmatchcase(script, pattern) for pattern in patterns), f"bench/{script} not in smoke.sh"
    assert "bench_vllm.py" in [name for name, _ in gpu] and "bench_vllm.py" not in [name for name, _ in cpu]


def test_ci_runs_the_smoke_step_and_the_script_parses() -> None:
    assert re.search(r"^bench/smoke\.sh$", (ROOT / ".ci" / "run").read_text(), flags=re.MULTILINE)
    assert subprocess.run(["bash", "-n", str(SMOKE)], check=False).returncode == 0
