"""An import's critical paths: in tokens with ``--tokenizer`` (counted here by encoding each tagged
path alone: the tags are special tokens, so the text between them encodes the same on its own), in
characters without (counted by regular expressions)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from transformers import AutoTokenizer

from pr1_eval.ingest.importer import import_jsonl
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.analysis_fixtures import block, response

TEXTS = [response("Let me think about this carefully first.", block(["two plus two is four", "four"]), "So", final="4"),
         response("Short.", block(["a", "b b b b b b b b", "c c"]), "Then", block(["x y", "z"]), final="4"),
         response("No blocks here.", final="4")]
_BLOCK = re.compile(r"<Parallel>.*?</Parallel>", re.S)
_PATH = re.compile(r"<Path>.*?</Path>", re.S)


def _losing(text: str, length: object) -> int:
    total = 0
    for b in _BLOCK.finditer(text):
        sizes = [length(p.group(0)) for p in _PATH.finditer(b.group(0))]  # type: ignore[operator]
        total += sum(sizes) - max(sizes)
    return total


def _import(tmp_path: Path, name: str, tokenizer: Path | None) -> RunStore:
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join(json.dumps({"task": "t", "problem_id": f"p{i}", "sample_idx": 0, "response": text,
                                          "gold": "4"}) + "\n" for i, text in enumerate(TEXTS)), encoding="utf-8")
    return RunStore(import_jsonl(source, tmp_path / name, workers=1, tokenizer=tokenizer))


def test_with_a_tokenizer_lengths_count_tokens(tmp_path: Path) -> None:
    model = cached_tiny_model("random")
    tokenizer = AutoTokenizer.from_pretrained(str(model))

    def n_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    for sample in _import(tmp_path, "tok", model).read_records():
        text = TEXTS[int(sample.problem_id[1:])]
        assert sample.length_unit == "token" and sample.response_length == n_tokens(text)
        assert sample.critical_path == n_tokens(text) - _losing(text, n_tokens)
    assert any(_losing(text, n_tokens) > 0 for text in TEXTS)


def test_without_a_tokenizer_lengths_count_characters(tmp_path: Path) -> None:
    for sample in _import(tmp_path, "chars", None).read_records():
        text = TEXTS[int(sample.problem_id[1:])]
        assert sample.length_unit == "char" and sample.response_length == len(text)
        assert sample.critical_path == len(text) - _losing(text, len)
        assert sample.losing_path_length == _losing(text, len)
