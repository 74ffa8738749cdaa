"""What the stage config tells the rollout writer: the validation size is what VERL will validate
(its own overlong-prompt filter applied), and dynamic sampling is refused with a fix."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from pr1_eval.errors import Pr1EvalError
from pr1_eval.store.run_store import RunStore
from repro.rollouts.runs import RolloutRunWriter, options_from_config, validation_size
from tests.support.rollout_fixtures import rollout

MAX_PROMPT = 64


def config(tmp_path: Path, val_files: list[str], **algorithm: object) -> object:
    return OmegaConf.create({
        "repro": {"rollout_runs": {"dir": str(tmp_path / "runs")}},
        "actor_rollout_ref": {"rollout": {"n": 4, "val_kwargs": {"n": 1}, "response_length": 100}},
        "data": {"train_batch_size": 2, "val_files": val_files, "max_prompt_length": MAX_PROMPT,
                 "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1, "truncation": "error",
                 "cache_dir": str(tmp_path / "cache")},
        "trainer": {"experiment_name": "job"},
        "algorithm": algorithm,
    })


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from repro.testing import tiny_model_dir

    return AutoTokenizer.from_pretrained(str(tiny_model_dir()))


def test_a_validation_whose_overlong_prompts_verl_drops_still_completes(tmp_path: Path, tokenizer) -> None:
    problems = [("What is 3 + 4?", 16), ("Compute " + " + ".join(["12"] * 80) + ".", 16), ("What is 5 + 6?", 1)]
    rows = [{"data_source": "aime24", "prompt": [{"role": "user", "content": text}], "__rollout_n__": n,
             "reward_model": {"ground_truth": "7", "style": "rule"}, "extra_info": {"id": f"p{i}", "split": "test"}}
            for i, (text, n) in enumerate(problems)]
    val = tmp_path / "rl_val.parquet"
    pq.write_table(pa.Table.from_pylist(rows), val)
    texts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert lengths[0] <= MAX_PROMPT < lengths[1] and lengths[2] <= MAX_PROMPT  # the middle one is dropped
    assert validation_size([str(val)], 1) == (33, 16), "the files' rows: 16 rollouts that never come"
    options = options_from_config(config(tmp_path, [str(val)]), tokenizer)
    assert options is not None and (options.val_rows, options.val_n) == (16 + 1, 16)
    writer = RolloutRunWriter(options, attempt="A", background=False)
    for p, (_, n) in zip((0, 2), (problems[0], problems[2]), strict=True):
        for s in range(n):
            writer.add(rollout(6, p, s, kind="validation", uid=f"v{p}"))
    writer.close()
    record = RunStore(writer.run_dir("validation", 6)).read_run()
    assert record.status == "complete" and record.training is not None and record.training.rows_seen == 17


def test_without_the_filter_every_row_is_validated(tmp_path: Path, tokenizer) -> None:
    val = tmp_path / "rl_val.parquet"
    long = [{"role": "user", "content": "Compute " + " + ".join(["12"] * 80)}]
    pq.write_table(pa.Table.from_pylist([{"data_source": "x", "prompt": long}] * 3), val)
    cfg = config(tmp_path, [str(val)])
    cfg.data.filter_overlong_prompts = False
    options = options_from_config(cfg, tokenizer)
    assert options is not None and (options.val_rows, options.val_n) == (3, 1)


def test_dynamic_sampling_is_refused_at_config_time_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match=r"algorithm\.filter_groups\.enable=false.*--no-rollout-runs"):
        options_from_config(config(tmp_path, [], filter_groups={"enable": True, "metric": "acc"}))
    off = options_from_config(config(tmp_path, [], filter_groups={"enable": False, "metric": "acc"}))
    assert off is not None and off.train_rows == 8
    cfg = config(tmp_path, [], filter_groups={"enable": True})
    cfg.repro.rollout_runs.dir = None
    assert options_from_config(cfg) is None, "with the rollout runs off, the job is VERL's business"
