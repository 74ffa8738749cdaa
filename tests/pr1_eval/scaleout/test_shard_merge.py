"""``--shard i/n`` and ``pr1-eval merge``: job-array shards joined back into one run.

Two shards of the trained tiny model, merged, must equal the unsharded run of the same settings
key for key and response for response (chunks of one problem, per-request seeds); a merge with a
shard missing, given twice, from other settings, unfinished, short of samples, or not a shard at
all is refused naming the reason; a rerun of a shard folder as another shard is refused.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.runner import RunConfig, run_eval
from pr1_eval.scaleout.merge import merge_shards
from pr1_eval.scaleout.shard import parse_shard, select_shard
from pr1_eval.store.run_store import RunStore

KEY = ["task", "problem_id", "sample_idx"]
TASKS, LIMIT, K = ["aime24", "amc23"], 5, 2


def _config(model: Path, out: Path, **kw: Any) -> RunConfig:
    return RunConfig(model=str(model), tasks=TASKS, k=K, limit=LIMIT, max_new_tokens=32, seed=5, engine="hf",
                     data_source="packaged", out=str(out), problems_per_chunk=1, **kw)


@pytest.fixture(scope="module")
def model() -> Path:
    from pr1_eval.testing.tiny_model import cached_tiny_model

    return cached_tiny_model("trained")


@pytest.fixture(scope="module")
def runs(model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shards")
    return {"whole": run_eval(_config(model, root / "whole")),
            "s0": run_eval(_config(model, root / "s0", shard="0/2")),
            "s1": run_eval(_config(model, root / "s1", shard="1/2"))}


def _edited_copy(src: Path, dest: Path, **changes: Any) -> Path:
    shutil.copytree(src, dest)
    info = json.loads((dest / "run.json").read_text())
    info.update(changes)
    (dest / "run.json").write_text(json.dumps(info))
    return dest


def test_parse_and_select_shard() -> None:
    assert parse_shard("1/4") == (1, 4) and parse_shard(" 0 / 1 ") == (0, 1)
    for bad in ("4/4", "a/b", "1/0", "-1/2", "3"):
        with pytest.raises(Pr1EvalError, match="--shard"):
            parse_shard(bad)
    assert select_shard(list(range(7)), 1, 3) == [1, 4] and select_shard(list(range(7)), 0, 3) == [0, 3, 6]
    assert RunConfig(model="m/x", tasks=["aime24"], shard="1/2").default_out().name.endswith("-shard1of2")


def test_shards_hold_disjoint_round_robin_slices(runs: dict[str, Path]) -> None:
    whole = json.loads((runs["whole"] / "run.json").read_text())
    for index, name in enumerate(("s0", "s1")):
        info = json.loads((runs[name] / "run.json").read_text())
        shard = info["shard"]
        assert (shard["index"], shard["count"], shard["task_sizes"]) == (index, 2, {t: LIMIT for t in TASKS})
        for task in TASKS:
            assert shard["problem_ids"][task] == whole["tasks"][task]["problem_ids"][index::2]
        frame = RunStore(runs[name]).read_frame()
        assert sorted(set(frame["problem_id"])) == sorted(p for t in TASKS for p in shard["problem_ids"][t])
        assert len(frame) == K * sum(len(shard["problem_ids"][t]) for t in TASKS)


def test_merge_reproduces_the_unsharded_run(runs: dict[str, Path], model: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "merged"
    assert main(["merge", str(runs["s1"]), str(runs["s0"]), "--out", str(out)]) == 0
    assert "mean@2" in capsys.readouterr().out  # the report of the merged run
    got, want = RunStore(out).read_frame(), RunStore(runs["whole"]).read_frame()
    assert len(got) == len(want) == len(TASKS) * LIMIT * K
    merged = got.merge(want, on=KEY, suffixes=("", "_ref"))
    assert len(merged) == len(want) and (merged["response"] == merged["response_ref"]).all()
    info = json.loads((out / "run.json").read_text())
    assert info["shard"] is None and "shard" not in info["config"]  # its one home is the shard section
    assert info["status"] == "complete" and [m["index"] for m in info["merged_from"]] == [0, 1]
    # each shard's wall clock stays with it; the merged run measured none of its own
    assert "generation" not in info
    assert [m["generation"]["samples"] for m in info["merged_from"]] == [
        len(RunStore(runs[name]).read_frame()) for name in ("s0", "s1")]
    whole = json.loads((runs["whole"] / "run.json").read_text())
    for task in TASKS:
        assert info["tasks"][task]["n_problems"] == LIMIT
        assert sorted(info["tasks"][task]["problem_ids"]) == sorted(whole["tasks"][task]["problem_ids"])
    rerun = run_eval(_config(model, out))  # the merged run is an ordinary run: the unsharded command resumes it
    assert len(RunStore(rerun).read_frame()) == len(want)


def test_merge_names_what_is_wrong(runs: dict[str, Path], tmp_path: Path) -> None:
    s0, s1 = str(runs["s0"]), str(runs["s1"])

    def refused(paths: list[str], pattern: str) -> None:
        with pytest.raises(Pr1EvalError, match=pattern):
            merge_shards(paths, tmp_path / f"out{len(list(tmp_path.iterdir()))}")

    refused([s0], r"shard 1/2 is missing")
    refused([s0, s0], r"shard 0/2 is given 2 times.*; shard 1/2 is missing|shard 1/2 is missing; shard 0/2 is given 2 times")
    refused([s0, str(runs["whole"])], r"is not a shard")
    other_seed = _edited_copy(runs["s1"], tmp_path / "seed", seed=6)
    refused([s0, str(other_seed)], r"seed differs: 6 in .*seed, 5 in ")
    running = _edited_copy(runs["s1"], tmp_path / "running", status="running")
    refused([s0, str(running)], r"is not finished \(status 'running'\)")
    short = _edited_copy(runs["s1"], tmp_path / "short")
    RunStore(short).part_paths()[0].unlink()
    refused([s0, str(short)], r"holds 0 of 2 samples of aime24/")
    existing = tmp_path / "taken"
    merge_shards([s0, s1], existing)
    with pytest.raises(Pr1EvalError, match="already holds a run"):
        merge_shards([s0, s1], existing)


def test_merge_cli_error_is_one_line(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", str(runs["s0"]), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: cannot merge: shard 1/2 is missing"


def test_a_shard_folder_is_not_resumed_as_another_shard(runs: dict[str, Path], model: Path) -> None:
    frame_before = RunStore(runs["s1"]).read_frame()
    with pytest.raises(Pr1EvalError, match=r"different settings \(shard\)"):
        run_eval(_config(model, runs["s1"], shard="0/2"))
    pd.testing.assert_frame_equal(RunStore(runs["s1"]).read_frame(), frame_before)


def test_a_lone_shard_reports_as_a_shard_and_is_incomplete_until_merged(
        runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.report.completeness import check_run

    held = {t: len(range(0, LIMIT, 2)) for t in TASKS}  # round robin: shard 0/2 holds problems 0, 2, 4
    total = LIMIT * len(TASKS)
    check = check_run(runs["s0"])
    assert not check.complete and check.shard_label() == f"shard 0/2 of {total} problems"
    for task in TASKS:
        part = check.tasks[task].part_of
        assert part is not None and (part.kind, part.held, part.total) == ("shard", held[task], LIMIT)
        assert f"shard 0/2 of {LIMIT} problems" in check.tasks[task].describe()
    assert "pr1-eval merge" in check.advice()
    assert main(["report", str(runs["s0"]), "--strict"]) == 2
    captured = capsys.readouterr()
    assert f"run: {runs['s0']}  (shard 0/2 of {total} problems)" in captured.out
    assert f"{held['aime24']}/{LIMIT}" in captured.out and "aime24*" in captured.out  # problems of the whole task
    assert "incomplete (--strict)" in captured.err and "shard 0/2" in captured.err
    report = json.loads(_report_json(runs["s0"], capsys))
    assert not report["complete"] and "mean@2" not in report["tasks"]["aime24"]  # only under "partial"
    assert report["tasks"]["aime24"]["part_of"] == {"kind": "shard", "label": "shard 0/2", "held": held["aime24"],
                                                    "total": LIMIT}
    out = tmp_path / "merged"
    assert main(["merge", str(runs["s0"]), str(runs["s1"]), "--out", str(out)]) == 0
    capsys.readouterr()
    assert check_run(out).complete and main(["report", str(out), "--strict"]) == 0


def _report_json(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", str(run), "--json"]) == 0
    return capsys.readouterr().out
