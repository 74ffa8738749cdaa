"""An lm-eval document with no generation does not vanish: the audit's two-document log whose
second had ``"resps": []`` imported as a complete run of one problem, without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.store.run_store import RunStore
from tests.support.import_input_fixtures import LM_EVAL_DATE, LM_EVAL_RESULTS, lm_eval_line, refused


def _log(tmp_path: Path, second: bytes) -> tuple[Path, list[str]]:
    folder = tmp_path / "lm" / "model"
    folder.mkdir(parents=True)
    samples = folder / f"samples_t_{LM_EVAL_DATE}.jsonl"
    samples.write_bytes(lm_eval_line() + second)
    (folder / f"results_{LM_EVAL_DATE}.json").write_text(json.dumps(LM_EVAL_RESULTS), encoding="utf-8")
    return samples, ["import", str(tmp_path / "lm"), "--format", "lm-eval", "--out", str(tmp_path / "run"),
                     "--grade-workers", "0"]


@pytest.mark.parametrize("resps", ["[]", "[[]]", "[[], []]"])
def test_a_document_without_generations_is_refused_naming_its_line(tmp_path: Path, resps: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    samples, argv = _log(tmp_path, lm_eval_line(doc_id="1", resps=resps))
    line = refused(argv, samples, [f"{samples}:2:", "'resps' holds no generation", "would vanish"], capsys)
    assert "run lm_eval for this task again" in line
    assert not (tmp_path / "run" / "run.json").exists()


def test_an_empty_generation_is_a_response_and_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``""`` is what the model said (nothing): stored and graded, both problems in the run."""
    _, argv = _log(tmp_path, lm_eval_line(doc_id="1", resps='[[""]]'))
    assert main(argv) == 0
    rows = RunStore(tmp_path / "run").read_table(columns=["problem_id", "response"]).to_pylist()
    assert sorted((r["problem_id"], r["response"]) for r in rows) == [("0", "Final Answer: 2"), ("1", "")]
