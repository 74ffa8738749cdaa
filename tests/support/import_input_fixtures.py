"""Hand-written import inputs (an import line, a VERL fork-format dump row, an lm-eval samples
line and results object) and the check that a command refused one: exit 2, one ``error:`` line
naming the file and the words expected, no traceback. For the tests of inputs that would change
a number (a repeated JSON key, a document without generations, a reward that is no number)."""

from __future__ import annotations

import json

import pytest

from pr1_eval.cli.main import main

GOOD_ROW = {"task": "t", "problem_id": "p", "sample_idx": 0, "response": "Final Answer: 1", "gold": "1"}
FORK_ROW = {"input": "<|im_start|>user\nProblem: What is 1+1?<|im_end|>\n<|im_start|>assistant\n",
            "output": "Final Answer: 2<|im_end|>", "score": 1.0, "step": 5, "acc": 1}
LM_EVAL_DATE = "2026-11-29T10-17-07.547336"
LM_EVAL_SAMPLE = {"doc_id": 0, "doc": {"question": "1+1?"}, "target": "2", "resps": [["Final Answer: 2"]]}
LM_EVAL_RESULTS = {"configs": {"t": {"output_type": "generate_until", "repeats": 1}}, "versions": {"t": 1},
                   "config": {"model": "hf", "model_args": "pretrained=m"}}


def _object(base: dict[str, object], raw: dict[str, str]) -> bytes:
    """``base`` as one JSON line, fields replaced by raw JSON text (which may repeat a key)."""
    fields = {k: json.dumps(v) for k, v in base.items()} | raw
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}\n").encode()


def import_line(**raw: str) -> bytes:
    return _object(GOOD_ROW, raw)


def dump_line(**raw: str) -> bytes:
    return _object(FORK_ROW, raw)


def lm_eval_line(**raw: str) -> bytes:
    return _object(LM_EVAL_SAMPLE, raw)


def refused(argv: list[str], named: object, words: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI in-process: status 2, one ``error:`` line naming ``named`` and every word, no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert str(named) in errors[0] and all(w in errors[0] for w in words), errors[0]
    return errors[0]
