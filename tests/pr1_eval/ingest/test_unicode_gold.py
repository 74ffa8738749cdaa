"""A gold written in full-width digits (audit round six, M17): ``float`` reads ``"２０４"`` as 204, so it
agreed with the packaged gold and the import said nothing, while the grader scored ``204`` against
it as wrong (mean@4 0.875 → 0.375). The check now compares numbers written in ASCII only, so the
import warns that the gold differs from the packaged one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.ingest.benchmark_check import same_gold
from pr1_eval.inputs.tasks import load_task


def test_unicode_digits_are_not_the_same_gold() -> None:
    assert same_gold("204", "204.0") and same_gold("1,000", "1000") and same_gold(" 204 ", "204")
    assert not same_gold("２０４", "204")
    assert not same_gold("٢٠٤", "204")


def test_an_import_with_a_full_width_gold_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = load_task("aime24", source="packaged").problems[0]
    wide = "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in problem.gold)
    assert wide != problem.gold
    lines = [{"task": "aime24", "problem_id": problem.problem_id, "sample_idx": i, "gold": wide,
              "response": f"Final Answer: {problem.gold}", "problem": problem.problem} for i in range(2)]
    (tmp_path / "g.jsonl").write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    main(["import", str(tmp_path / "g.jsonl"), "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert f"1 gold answer(s) differ from the packaged aime24 ({problem.problem_id}: '{wide}' here" in captured.err
