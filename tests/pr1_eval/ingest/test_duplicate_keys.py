"""A key that appears twice in one JSON object is an error naming file, line and key, in every
reader of user files: import lines, VERL dumps, lm-eval samples and results, ``run.json``. The
audit's case: ``"gold": "1", "gold": "2"`` stored gold "2" (the last wins), graded the sample
wrong and moved mean@2 from 1.000 to 0.750 without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.ingest.importer import import_jsonl
from tests.support.import_input_fixtures import (
    LM_EVAL_DATE,
    LM_EVAL_RESULTS,
    dump_line,
    import_line,
    lm_eval_line,
    refused,
)


def _good() -> bytes:
    """A good import line of another problem, first in each file, so the fault is at line 2."""
    return import_line(sample_idx="1", problem_id='"q"')


@pytest.mark.parametrize(("raw", "key"), [
    ({"gold": '"1", "gold": "2"'}, "gold"),
    ({"sample_idx": '0, "sample_idx": 5'}, "sample_idx"),
    ({"response": '"Final Answer: 1", "extra": {"a": 1, "a": 2}'}, "a"),  # inside a nested object too
])
def test_an_import_line_with_a_repeated_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      raw: dict[str, str], key: str) -> None:
    source = tmp_path / "d.jsonl"
    source.write_bytes(_good() + import_line(**raw))
    line = refused(["import", str(source), "--out", str(tmp_path / "run"), "--grade-workers", "0"], source,
                   [f"{source}:2:", f"key {key!r} appears twice"], capsys)
    assert "remove the one that is wrong" in line
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_verl_row_with_a_repeated_score_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "rollout-log"
    dump.mkdir()
    (dump / "5.jsonl").write_bytes(dump_line() + dump_line(score='1.0, "score": 0.0'))
    refused(["import-verl", str(dump), "--out", str(tmp_path / "runs"), "--final", "--no-benchmarks", "--no-grade"],
            dump / "5.jsonl", [":2:", "key 'score' appears twice"], capsys)
    assert not list((tmp_path / "runs").rglob("run.json"))


def test_lm_eval_samples_and_results_with_a_repeated_key_are_refused(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "lm" / "model"
    folder.mkdir(parents=True)
    samples, results = folder / f"samples_t_{LM_EVAL_DATE}.jsonl", folder / f"results_{LM_EVAL_DATE}.json"
    samples.write_bytes(lm_eval_line() + lm_eval_line(doc_id="1", target='"2", "target": "3"'))
    results.write_text(json.dumps(LM_EVAL_RESULTS), encoding="utf-8")
    argv = ["import", str(tmp_path / "lm"), "--format", "lm-eval", "--out", str(tmp_path / "run"), "--grade-workers", "0"]
    refused(argv, samples, [":2:", "key 'target' appears twice"], capsys)
    samples.write_bytes(lm_eval_line())
    text = json.dumps(LM_EVAL_RESULTS, indent=2).splitlines()
    at = next(i for i, line in enumerate(text) if '"repeats"' in line)
    text.insert(at, '      "repeats": 16,')  # the same object; the second "repeats" is at + 2 (1-based)
    results.write_text("\n".join(text), encoding="utf-8")
    refused(argv, results, [f"{results}:{at + 2}:", "key 'repeats' appears twice"], capsys)
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_run_json_with_a_repeated_status_is_refused_naming_its_line(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "d.jsonl"
    source.write_bytes(_good())
    run = import_jsonl(source, tmp_path / "run", workers=0)
    lines = (run / "run.json").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith('"status"') and line.startswith("  \""))
    lines.insert(at + 1, '  "status": "weird",')
    (run / "run.json").write_text("\n".join(lines), encoding="utf-8")
    refused(["report", str(run)], run / "run.json", [f"run.json:{at + 2}:", "key 'status' appears twice"], capsys)
