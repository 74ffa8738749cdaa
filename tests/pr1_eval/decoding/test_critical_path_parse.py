"""A fork-join run's measured critical path (the machine's count over its own tokens) against the
parse of the stored text over re-tokenised offsets: the same number on well-formed blocks. And a
sequential run of the trained tiny model (the demo's decoding: a Seen model writing its blocks in
one stream) against a count made here from the raw text with the tokenizer: regular expressions
find each block's tagged paths, each encoded alone (the tags are special tokens, so the text
between them encodes the same alone as in the response)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from pr1_eval.cli.main import main
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.report.load import load_report
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model


def test_the_parse_gives_the_machines_number_on_well_formed_blocks(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", "--model", str(cached_tiny_model("trained")), "--tasks", "gsm8k", "-k", "4", "--limit", "4",
                 "--max-new-tokens", "200", "--engine", "hf", "--decoding", "forkjoin", "--max-blocks", "2",
                 "--out", str(out), "--seed", "5", "--data-dir", str(packaged_benchmarks_dir()),
                 "--grade-workers", "1"]) == 0
    frame = RunStore(out).read_frame()
    assert set(frame["length_unit"]) == {"token"}
    formed = frame[frame["format_ok"] & (frame["n_blocks"] > 0)]
    assert len(formed) >= 4, "the trained model branches, so the comparison is not vacuous"
    assert (formed["losing_path_length"] > 0).any()  # sibling paths of different lengths were compared
    assert formed["critical_path"].tolist() == formed["critical_path_tokens"].tolist()
    assert formed["response_length"].tolist() == formed["n_response_tokens"].tolist()


def test_a_sequential_run_matches_a_tokenizer_count_of_its_text(tmp_path: Path) -> None:
    model = cached_tiny_model("trained")
    out = tmp_path / "seq"
    assert main(["run", "--model", str(model), "--tasks", "gsm8k", "-k", "4", "--limit", "4", "--max-new-tokens", "200",
                 "--engine", "hf", "--decoding", "sequential", "--out", str(out), "--seed", "2",
                 "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1"]) == 0
    tokenizer = AutoTokenizer.from_pretrained(str(model))

    def n_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    records = RunStore(out).read_records()
    branched = 0
    for r in records:
        losing = 0
        for block in re.finditer(r"<Parallel>.*?(?:</Parallel>|$)", r.response, re.S):
            sizes = [n_tokens(p.group(0)) for p in re.finditer(r"<Path>.*?(?:</Path>|$)", block.group(0), re.S)]
            losing += sum(sizes) - max(sizes) if sizes else 0
        branched += losing > 0
        if r.format_ok:
            assert (r.response_length, r.critical_path) == (n_tokens(r.response), n_tokens(r.response) - losing)
    assert branched >= 2, "the trained model branches, so the comparison is not vacuous"
    m = load_report(out).tasks["gsm8k"].metrics
    assert m is not None and m.length_unit == "token"
    expected = sum(r.response_length or 0 for r in records) / sum(r.critical_path or 0 for r in records)
    assert m.speedup == pytest.approx(expected) and expected > 1
