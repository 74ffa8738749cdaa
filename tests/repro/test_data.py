"""Data builders on slices of the training data (``tests/fixtures``): counts of every file, full
problem texts, the paper's prompt, the validation mix at Mean@16, one-line errors for missing
inputs, and that VERL's own datasets read the parquet files back."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.inputs.prompts import load_template
from repro.data import OUTPUTS, Sources, build_all, dedup, load_problems, read_jsonl, write_parquet

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VAL_ROWS = {"aime24": 30, "aime25": 30, "amc23": 40, "math300_pr1": 316}
VAL_ROLLOUTS = {"aime24": 16, "aime25": 16, "amc23": 16, "math300_pr1": 1}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("repro_data")
    reports = {r.name: r for r in build_all(out, Sources(training_dir=FIXTURES))}
    return out, reports


def test_counts_on_the_fixture_slices(built) -> None:
    """Expected counts follow from how the slices were chosen (tests/fixtures/README.md)."""
    _, reports = built
    sft = reports["sft"]
    assert (sft.rows_in, sft.rows_out, sft.dropped) == (34, 33, {"format check failed": 1})
    assert sft.examples["format check failed"][0].startswith("parallel-gsm8k-v2-475")
    # v2-3 writes "</Parallel>\n\n<Summary>" once, v2-18 "</Parallel>  \n<Summary>" four times, v2-33 once
    assert sft.info == {"kept without a parallel block": 3, "rows with tag whitespace rewritten to the rollout's": 3,
                        "tag joins rewritten": 6}
    assert sft.source == "response text: sft_answer of parallel_gsm8k_sft.jsonl (--sft-text official)"
    assert (reports["rl_gsm8k"].rows_in, reports["rl_gsm8k"].rows_out) == (30, 30)
    dapo = reports["rl_dapo"]
    assert (dapo.rows_in, dapo.rows_out) == (36, 29 - 2 - 4)
    assert dapo.dropped == {"problems with conflicting answers": 2, "problem ends with ':' (truncated upstream)": 4}
    assert dapo.info == {"rows of conflicting problems": 5, "unique problems": 29, "repeated rows collapsed": 4}
    val = reports["rl_val"]
    assert (val.rows_in, val.rows_out) == (30 + 30 + 40 + 316, sum(VAL_ROWS.values())) == (416, 416)


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


def test_validation_samples_aime_and_amc_16_times_like_the_paper(built) -> None:
    """The paper's validation samples each AIME/AMC problem 16 times and MATH300 once (1,916
    rollouts); here one row per problem asks for them through ``__rollout_n__``."""
    out, _ = built
    val = pq.read_table(out / OUTPUTS["val"]).to_pylist()
    assert Counter(r["data_source"] for r in val) == VAL_ROWS
    assert [r["extra_info"]["index"] for r in val] == list(range(416))
    assert {(r["data_source"], r["__rollout_n__"]) for r in val} == set(VAL_ROLLOUTS.items())
    assert sum(r["__rollout_n__"] for r in val) == 1916
    assert len({(r["data_source"], r["extra_info"]["id"]) for r in val}) == len(val), "one row per problem"
    first = next(r for r in val if r["extra_info"]["id"] == "aime24-0")
    assert first["reward_model"]["ground_truth"] == "204"
    # golds equal the benchmark file's, read here with plain json (math300: the MATH answer)
    with (packaged_benchmarks_dir() / "amc23.jsonl").open(encoding="utf-8") as handle:
        amc = {row["id"]: row["answer"] for row in map(json.loads, handle)}
    assert {r["extra_info"]["id"]: r["reward_model"]["ground_truth"] for r in val if r["data_source"] == "amc23"} == amc
    base8 = next(r for r in val if r["extra_info"]["id"] == "test/number_theory/864.json")
    assert base8["reward_model"]["ground_truth"] == "52_8", "MATH300 gold with the base subscript the paper lost"


def test_missing_training_file_is_one_line_naming_file_flag_and_hub(tmp_path, monkeypatch) -> None:
    import repro.data

    monkeypatch.setattr(repro.data, "resolve_training_dir", lambda: None)
    out = tmp_path / "out"
    with pytest.raises(Pr1EvalError) as err:
        build_all(out, Sources(sft=FIXTURES / "parallel_gsm8k_sft.jsonl", gsm8k=FIXTURES / "gsm8k_train.jsonl"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("dapo_math_17k.jsonl not found (no training folder")
    assert "--dapo FILE" in message and "BytedTsinghua-SIA/DAPO-Math-17k" in message
    assert not out.exists(), "nothing is built when an input is missing"
    with pytest.raises(Pr1EvalError, match=rf"parallel_gsm8k_sft.jsonl not found \(not in {tmp_path}\); pass --sft "
                       r"FILE \(JSONL with id, problem, answer, sft_answer: extra_info.answer of zhengkid/Parallel-R1 "
                       r"verl/data_preprocess_scripts/data/gsm8k/adaptive_parallel_thinking_v2/sft/train.parquet.*"
                       r"--sft-text released"):
        Sources(training_dir=tmp_path).resolve("sft")
    with pytest.raises(Pr1EvalError, match=rf"parallel_gsm8k.jsonl not found \(not in {tmp_path}\).*--sft FILE"):
        Sources(training_dir=tmp_path, sft_text="released").resolve("sft")
    with pytest.raises(Pr1EvalError, match=r"--gsm8k .*nope.jsonl: file not found; pass a hub dataset openai/gsm8k"):
        Sources(gsm8k=tmp_path / "nope.jsonl").resolve("gsm8k")


def test_hub_gsm8k_schema_is_read(tmp_path) -> None:
    """openai/gsm8k (the hub's train split) keeps the gold after '####', with thousands separators."""
    write_parquet([{"question": "How many?", "answer": "2 + 3 = 5\n#### 1,005"}], tmp_path / "train.parquet")
    assert load_problems(tmp_path / "train.parquet") == [{"id": "gsm8k-train-0", "problem": "How many?", "answer": "1005"}]


def test_original_dapo_file_keeps_multi_paragraph_problems_whole(tmp_path) -> None:
    """The hub's DAPO-Math-17k wraps each problem in an instruction; the builder strips it, keeps every paragraph."""
    from repro.data import DAPO_PREFIX, DAPO_SUFFIX, build_dapo

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


def test_overlong_prompts_are_dropped_by_the_stage_config_never_truncated(built, capsys, tmp_path) -> None:
    """The RL stages load data with the overlong-prompt filter on: VERL's dataset drops a prompt
    longer than max_prompt_length (printing the length before and after), and the fork-join agent
    loop refuses one instead of VERL's silent left-truncation."""
    from types import SimpleNamespace

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from repro.agent_loop import ForkJoinAgentLoop
    from repro.stages import CONFIG_DIR
    from repro.testing import tiny_model_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="unseen_s2", overrides=["actor_rollout_ref.model.path=m"])
    assert cfg.data.filter_overlong_prompts is True and cfg.data.truncation == "error"
    out, _ = built
    import pyarrow.parquet as pq

    rows = pq.read_table(out / OUTPUTS["val"]).to_pylist()[::16][:40]
    small = tmp_path / "rl_small.parquet"
    write_parquet(rows, small)
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    data = OmegaConf.create(OmegaConf.to_container(cfg.data, resolve=False))
    texts = [tok.apply_chat_template(list(r["prompt"]), add_generation_prompt=True, tokenize=False) for r in rows]
    lengths = [len(tok.encode(t, add_special_tokens=False)) for t in texts]
    limit = sorted(lengths)[len(lengths) // 2]
    with open_dict(data):
        data.max_prompt_length = limit
        data.filter_overlong_prompts_workers = 1
    dataset = RLHFDataset(data_files=[str(small)], tokenizer=tok, config=data)
    assert len(dataset) == sum(n <= limit for n in lengths) < len(lengths)
    assert f"filter dataset len: {len(dataset)}" in capsys.readouterr().out
    loop = SimpleNamespace(rollout_config=SimpleNamespace(prompt_length=3))
    assert ForkJoinAgentLoop._cap_text_prompt_length(loop, [1, 2, 3]) == [1, 2, 3]  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exceeds rollout.prompt_length=3.*filter_overlong_prompts"):
        ForkJoinAgentLoop._cap_text_prompt_length(loop, [1, 2, 3, 4])  # type: ignore[arg-type]


def test_validation_rollouts_pool_into_mean_and_best_at_16(built) -> None:
    """VERL 0.9.1's V1 trainer reads ``__rollout_n__`` per row (``agent_loop_tq._run_prompt``) and
    gives every rollout of a row the row's uid; its own ``process_validation_metrics`` then reports
    Mean@16 and best@16 per benchmark. Fed here with the uids that layout produces and known scores."""
    import numpy as np
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    out, _ = built
    val = pq.read_table(out / OUTPUTS["val"]).to_pylist()
    rows = [r for r in val if r["data_source"] in ("aime24", "math300_pr1")][:32]
    sources, uids, acc = [], [], []
    for i, row in enumerate(rows):
        for j in range(row["__rollout_n__"]):
            sources.append(row["data_source"])
            uids.append(f"uid-{i}")
            acc.append(float(j < i % 3))  # problem i: (i mod 3) of its 16 rollouts right
    metrics = process_validation_metrics(sources, uids, {"acc": acc})
    aime = metrics["aime24"]["acc"]
    right = [i % 3 for i, r in enumerate(rows) if r["data_source"] == "aime24"]
    assert aime["mean@16"] == pytest.approx(np.mean([c / 16 for c in right]))
    assert 0 < aime["best@16/mean"] <= np.mean([c > 0 for c in right]) + 1e-9
    assert "mean@1" in metrics["math300_pr1"]["acc"] and "best@16/mean" not in metrics["math300_pr1"]["acc"]


def test_malformed_jsonl_names_file_and_line(tmp_path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(Pr1EvalError, match=r"x.jsonl:2: not valid JSON"):
        read_jsonl(bad)


def test_a_row_of_unexpected_shape_names_file_line_and_expected_fields(tmp_path) -> None:
    import pyarrow as pa

    from repro.data import build_sft, read_rows

    rl = tmp_path / "rl.jsonl"
    rl.write_text('{"problem": "1+1?", "answer": "2"}\n{"prompt": "not messages", "reward_model": {}}\n')
    with pytest.raises(Pr1EvalError) as caught:
        load_problems(rl)
    message = str(caught.value)
    assert message.startswith(f"{rl}:2: a row of unexpected shape (its fields are prompt, reward_model)")
    assert "problem + answer" in message and "reward_model.ground_truth" in message and "question" in message
    table = tmp_path / "rl.parquet"
    pq.write_table(pa.Table.from_pylist([{"text": "x", "label": 1}]), table)
    with pytest.raises(Pr1EvalError, match=r"rl\.parquet row 1: a row of unexpected shape \(its fields are label, text\)"):
        load_problems(table)
    sft = tmp_path / "sft.jsonl"
    sft.write_text('{"id": "a", "problem": "p", "answer": "1", "response": "r"}\n{"id": "b", "problem": "p"}\n')
    with pytest.raises(Pr1EvalError, match=r"sft\.jsonl:2: .*expected id, problem, answer, response"):
        build_sft(read_rows(sft), load_template("parallel_r1_v3"), "response")
    with pytest.raises(Pr1EvalError, match=r"sft\.jsonl:1: .*its fields are answer, id, problem, response\); "
                       r"expected id, problem, answer, sft_answer"):
        build_sft(read_rows(sft), load_template("parallel_r1_v3"))
