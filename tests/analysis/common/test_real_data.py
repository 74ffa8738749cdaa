"""The first real input: real teacher traces (parallel_gsm8k.jsonl) imported as a run.

The traces are the 34-row slice in ``tests/fixtures`` (the first 30 of the 341 plus the four
irregular ones: three without a block, one with an unclosed ``<Summary>``), so the suite runs
without the training folder. Every expected number is computed here from the raw file by plain
string and regex work (or taken from the file's own ``has_parallel_block`` / ``tags_balanced``
flags), never by the parser under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import sacrebleu

from analysis.common.real_data import TASK, import_parallel_gsm8k, to_import_jsonl
from analysis.runs.loader import LoadedRuns, load_runs
from analysis.summary import Analysis, analyze, to_json

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "parallel_gsm8k.jsonl"
N_TRACES = 34


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    with SOURCE.open(encoding="utf-8") as handle:  # not splitlines(): texts contain U+2028
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> LoadedRuns:
    run = import_parallel_gsm8k(tmp_path_factory.mktemp("real") / "parallel_gsm8k", SOURCE)
    result = load_runs(run, tokenizer=None)
    assert result.failures == []
    return result


@pytest.fixture(scope="module")
def analysis(loaded: LoadedRuns) -> Analysis:
    return analyze(loaded)


def test_conversion_to_the_import_format(tmp_path: Path, raw: list[dict[str, Any]]) -> None:
    lines = to_import_jsonl(SOURCE, tmp_path / "x.jsonl").read_text(encoding="utf-8").rstrip("\n").split("\n")
    first = json.loads(lines[0])
    assert len(lines) == N_TRACES
    assert first == {"task": TASK, "problem_id": raw[0]["id"], "sample_idx": 0, "response": raw[0]["response"],
                     "gold": raw[0]["answer"], "problem": raw[0]["problem"], "model": "teacher"}


def test_counts_agree_with_the_raw_file(loaded: LoadedRuns, analysis: Analysis, raw: list[dict[str, Any]]) -> None:
    with_tag = sum("<Parallel>" in r["response"] for r in raw)
    assert (len(raw), with_tag) == (N_TRACES, 31)
    assert sum(r["tags_balanced"] for r in raw) == 33
    assert sum(r["tags_balanced"] and not r["has_parallel_block"] for r in raw) == 3
    samples = loaded.samples
    assert len(samples) == N_TRACES and int(samples["has_parallel"].sum()) == 31
    assert int(samples["format_ok"].sum()) == 33
    assert int((samples["format_ok"] & ~samples["has_parallel"]).sum()) == 3
    row = to_json(analysis)["runs"][0]
    assert row["n_samples"] == N_TRACES and row["parallel_ratio"] == pytest.approx(31 / N_TRACES)
    n_blocks = sum(r["response"].count("<Parallel>") for r in raw)
    n_paths = sum(r["response"].count("<Path>") for r in raw)
    assert len(analysis.blocks) == n_blocks == 38
    assert row["blocks_per_response"] == pytest.approx(n_blocks / N_TRACES)
    assert row["paths_per_block"] == pytest.approx(n_paths / n_blocks)
    firsts = [r["response"].index("<Parallel>") / len(r["response"]) for r in raw if "<Parallel>" in r["response"]]
    assert row["first_block_rel_pos"] == pytest.approx(sum(firsts) / len(firsts))
    assert analysis.runs.iloc[0]["accuracy"] == 1.0  # every last 'Final Answer:' equals the gold number
    assert row["step"] is None and row["cosine_mean"] is None
    # shares of block roles (their values are the path-conclusion extractor's, tested with its labels)
    assert set(row["roles"]) == {"verification", "exploration", "undetermined"}
    assert sum(row["roles"].values()) == pytest.approx(1.0)


def test_bleu_agrees_with_an_independent_regex_pass(analysis: Analysis, raw: list[dict[str, Any]]) -> None:
    scores = []
    for r in raw:
        for body in re.findall(r"<Parallel>(.*?)</Parallel>", r["response"], flags=re.DOTALL):
            paths = [p.strip() for p in re.findall(r"<Path>(.*?)</Path>", body, flags=re.DOTALL)]
            for i in range(len(paths)):
                for j in range(i + 1, len(paths)):
                    a, b = paths[i], paths[j]
                    scores.append((sacrebleu.sentence_bleu(a, [b]).score + sacrebleu.sentence_bleu(b, [a]).score) / 200)
    assert len(analysis.pairs) == len(scores)
    assert to_json(analysis)["runs"][0]["bleu_mean"] == pytest.approx(sum(scores) / len(scores))
