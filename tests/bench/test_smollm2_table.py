"""The SmolLM2 bench's table (docs/guides/smollm2.md, section 3) from report and analyze JSON: each cell checked
against the figures it is built from, including a one-problem slice whose report has no interval."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]


def _run(folder: Path, walls: list[float], tokens: list[int]) -> None:
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"wall_s": walls, "n_response_tokens": tokens}), folder / "samples.parquet")


def _report(step: int, interval: list[float] | None, speedup: tuple[float, list[float] | None]) -> dict[str, Any]:
    return {"k": 2, "model": {"step": step}, "tasks": {"gsm8k": {
        "format_ok_ratio": 0.0625, "mean@2": 0.25, "pass@2": 0.5, "ci95": {"mean@2": interval},
        "tokens_per_sample": 241.84, "truncated_ratio": 0.75, "critical_path_tokens_per_sample": 221.19,
        "speedup": speedup[0], "speedup_ci95": speedup[1]}}}


def test_the_guide_table_cells_come_from_the_reports_and_the_analysis(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_smollm2 import GUIDE_COLUMNS, guide_table

    # two chunks of one run: each chunk's batch time counted once (its samples all carry it)
    _run(tmp_path / "fam-step40-forkjoin", [10.0, 10.0, 5.0, 5.0], [100, 100, 50, 50])
    _run(tmp_path / "fam-step0-sequential", [2.0], [8])
    rows = [{"run": "fam-step40-forkjoin", "report": _report(40, [0.0, 0.5], (1.0666, [1.0247, 1.1207]))},
            {"run": "fam-step0-sequential", "report": _report(0, None, (1.0, None))}]
    analysis = {"runs": [
        {"run": "fam-step40-forkjoin", "task": "gsm8k", "parallel_ratio": 0.5, "blocks_per_response": 0.53125,
         "first_block_rel_pos": 0.3493, "bleu_mean": 0.0562, "cosine_mean": 0.571,
         "roles": {"exploration": 0.5294, "verification": 0.0, "undetermined": 0.4706}},
        {"run": "fam-step0-sequential", "task": "gsm8k", "parallel_ratio": 0.0, "blocks_per_response": 0.0,
         "first_block_rel_pos": None, "bleu_mean": None, "cosine_mean": None,
         "roles": {"exploration": None, "verification": None, "undetermined": None}}]}
    header, rule, base, step40 = guide_table(rows, analysis, tmp_path)
    assert header.count("|") == len(GUIDE_COLUMNS) + 1 and rule.count("---") == len(GUIDE_COLUMNS)
    cells = [c.strip() for c in step40.strip("|").split("|")]
    assert cells == ["40", "fork-join", "0.062", "0.250 [0.000, 0.500]", "0.500", "0.500", "0.53", "0.35",
                     "0.06 / 0.57", "0.53 / 0.00 / 0.47", "242", "0.75", "221", "1.07x [1.02, 1.12]",
                     f"{1000 * 15 / 300:,.0f}"]  # (10 + 5) s over 300 tokens: 50 ms
    cells = [c.strip() for c in base.strip("|").split("|")]  # sorted by step: the base first
    assert cells[:5] == ["0", "sequential", "0.062", "0.250", "0.500"]  # one problem: no interval to show
    assert cells[6:10] == ["0.00", "–", "– / –", "–"] and cells[13:] == ["1.00x", "250"]
