"""Merging the shards of an adaptive run: the rule must match, and the merged run.json joins every
shard's samples drawn and settled sides (a reader that loads only the keys relies on them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pr1_eval.engines.factory import make_engine
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.runner import run_eval
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.report.completeness import check_completeness
from pr1_eval.scaleout.merge import merge_shards
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model


def test_adaptive_shards_merge_into_one_adaptive_run(tmp_path: Path) -> None:
    model = str(cached_tiny_model("trained"))
    engine = make_engine("hf", model)
    config = RunConfig(model=model, tasks=["aime24"], k=12, limit=2, max_new_tokens=4, engine="hf", seed=1,
                       problems_per_chunk=1, grade_workers=1, data_dir=str(packaged_benchmarks_dir()), adaptive=True)
    shards = [run_eval(dataclasses.replace(config, shard=f"{i}/2", out=str(tmp_path / f"s{i}")), engine) for i in (0, 1)]
    store = RunStore(shards[1])
    original = store.read_run()
    for changed in (None, {**(original.adaptive or {}), "margin": 0.3}):  # a fixed-k shard; another margin
        store.write_run(dataclasses.replace(original, adaptive=changed))
        with pytest.raises(Pr1EvalError, match="adaptive rule differs"):
            merge_shards(shards, tmp_path / "mixed")
    store.write_run(original)

    merged = merge_shards(shards, tmp_path / "whole")
    record = RunStore(merged).read_run()
    assert record.adaptive is not None and record.adaptive["samples_drawn"] == {"aime24": {"aime24-0": 8, "aime24-1": 8}}
    assert record.adaptive["settled"] == {"aime24": {"aime24-0": -1, "aime24-1": -1}}
    keys = RunStore(merged).read_table(columns=["task", "problem_id", "sample_idx", "grade_status"]).to_pandas()
    assert check_completeness(record, keys).complete  # no verdicts read: the joined samples_drawn decide
