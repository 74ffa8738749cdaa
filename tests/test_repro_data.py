"""Data builders on the shared training data: counts of every file, full problem texts, the
paper's prompt, and that VERL's own datasets read the parquet files back."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.prompts import load_template
from repro.data import OUTPUTS, build_all, dedup, read_jsonl
from repro.testing import training_file


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("repro_data")
    reports = {r.name: r for r in build_all(out)}
    return out, reports


def test_counts_on_the_shared_data(built) -> None:
    _, reports = built
    sft = reports["sft"]
    assert (sft.rows_in, sft.rows_out, sft.dropped) == (341, 340, {"format check failed": 1})
    assert sft.examples["format check failed"][0].startswith("parallel-gsm8k-v2-475")
    assert sft.info == {"kept without a parallel block": 3}
    assert (reports["rl_gsm8k"].rows_in, reports["rl_gsm8k"].rows_out) == (7473, 7473)
    dapo = reports["rl_dapo"]
    assert (dapo.rows_in, dapo.rows_out) == (17917, 17168 - 20 - 285)
    assert dapo.dropped == {"problems with conflicting answers": 20, "problem ends with ':' (truncated upstream)": 285}
    assert dapo.info == {"rows of conflicting problems": 43, "unique problems": 17168, "repeated rows collapsed": 726}
    assert reports["rl_val"].rows_out == 30 + 30 + 40 + 316


def test_rows_follow_verl_schema_and_keep_full_problems(built) -> None:
    out, _ = built
    template = load_template()
    dapo = pq.read_table(out / OUTPUTS["dapo"]).to_pylist()
    assert not any(r["extra_info"]["problem"].rstrip().endswith(":") for r in dapo)
    row = dapo[0]
    assert row["prompt"] == [{"role": "user", "content": template.render(row["extra_info"]["problem"])}]
    assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert row["reward_model"]["style"] == "rule" and row["reward_model"]["ground_truth"]
    assert len({" ".join(r["extra_info"]["problem"].split()) for r in dapo}) == len(dapo), "no repeated problem"
    sft = pq.read_table(out / OUTPUTS["sft"]).to_pylist()
    assert [m["role"] for m in sft[0]["messages"]] == ["user", "assistant"]
    assert sft[0]["messages"][0]["content"].startswith("Solve the following problem step by step.")
    val = pq.read_table(out / OUTPUTS["val"]).to_pylist()
    assert {r["data_source"] for r in val} == {"aime24", "aime25", "amc23", "math300_pr1"}
    base8 = next(r for r in val if r["extra_info"]["id"] == "test/number_theory/864.json")
    assert base8["reward_model"]["ground_truth"] == "52_8", "MATH300 gold with the base subscript the paper lost"


def test_original_dapo_file_keeps_multi_paragraph_problems_whole(tmp_path) -> None:
    """The hub's DAPO-Math-17k wraps each problem in an instruction; the builder strips it, keeps every paragraph."""
    from repro.data import DAPO_PREFIX, DAPO_SUFFIX, Sources, build_dapo, write_parquet

    problem = "Let $f$ satisfy the following:\n\n$$f(x+1) = 2f(x), \\quad f(0) = 3.$$\n\nFind $f(5)$."
    rows = [
        {
            "data_source": "math_dapo",
            "prompt": [{"role": "user", "content": DAPO_PREFIX + problem + DAPO_SUFFIX}],
            "ability": "MATH",
            "reward_model": {"ground_truth": "96", "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": "u1"},
        },
        {
            "data_source": "math_dapo",
            "prompt": [{"role": "user", "content": DAPO_PREFIX + "Solve this:" + DAPO_SUFFIX}],
            "ability": "MATH",
            "reward_model": {"ground_truth": "1", "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": "u2"},
        },
    ]
    write_parquet(rows, tmp_path / "dapo.parquet")
    built, report = build_dapo(Sources(dapo=tmp_path / "dapo.parquet"), load_template())
    assert [r["extra_info"]["problem"] for r in built] == [problem]
    assert built[0]["extra_info"]["id"] == "u1" and built[0]["reward_model"]["ground_truth"] == "96"
    assert report.dropped == {"problem ends with ':' (truncated upstream)": 1}
    kept, _ = build_dapo(Sources(dapo=tmp_path / "dapo.parquet", keep_truncated=True), load_template())
    assert len(kept) == 2


def test_dedup_keeps_first_copy_and_drops_conflicts() -> None:
    rows = [
        {"id": "a", "problem": "What is  1+1?", "answer": "2"},
        {"id": "b", "problem": "What is 1+1?", "answer": "2"},
        {"id": "c", "problem": "Pick x.", "answer": "3"},
        {"id": "d", "problem": "Pick x.", "answer": "4"},
    ]
    out, report = dedup(rows)
    assert [r["id"] for r in out] == ["a"]
    assert report.info["repeated rows collapsed"] == 1 and report.dropped == {"problems with conflicting answers": 1}


def test_verl_rl_dataset_reads_the_parquet(built) -> None:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from repro.testing import tiny_model_dir

    out, _ = built
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 4096,
            "truncation": "left",
            "return_raw_chat": True,
            "filter_overlong_prompts": False,
        }
    )
    dataset = RLHFDataset(data_files=[str(out / OUTPUTS["val"])], tokenizer=tok, config=config)
    item = dataset[0]
    assert item["raw_prompt"][0]["role"] == "user" and item["reward_model"]["ground_truth"] == "204"
    assert item["data_source"] == "aime24" and item["index"] == 0


def test_malformed_jsonl_names_file_and_line(tmp_path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(Pr1EvalError, match=r"x.jsonl:2: not valid JSON"):
        read_jsonl(bad)
    assert training_file("gsm8k_train.jsonl").is_file()
