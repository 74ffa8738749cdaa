"""``import-verl`` on dumps written by VERL 0.9.1's own code and in the Parallel-R1 fork's exact format
(:mod:`verl_dump_fixtures`), compared row by row with what was dumped."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import tests.support.verl_dump_fixtures as F
from pr1_eval.ingest.verl_formats import IM_END, IM_START, PAD, Lengths
from pr1_eval.ingest.verl_import import ImportOptions, import_verl
from pr1_eval.store.run_store import RunStore

LENGTHS = Lengths(prompt=900, response=160)
N_TRAIN = 4


def _opts(**kw: object) -> ImportOptions:
    base: dict[str, object] = {"lengths": LENGTHS, "workers": 1}
    base.update(kw)
    return ImportOptions(**base)  # type: ignore[arg-type]


def _frame(run: Path):  # noqa: ANN202 - a DataFrame
    return RunStore(run).read_frame()


@pytest.fixture(scope="module")
def fork_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("fork") / "Parallel-R1-S1"
    truths = {
        ("train", 1): F.write_fork_step(root / "rollout-log", 1, F.training_problems(3), N_TRAIN, validation=False),
        ("validation", 1): F.write_fork_step(root / "validation-log", 1, F.aime_problems(2), 16, validation=True),
        ("train", 2): F.write_fork_step(root / "rollout-log", 2, F.training_problems(3), N_TRAIN, validation=False),
    }
    out = root.parent / "runs"
    results = import_verl(root, out, _opts())
    return {"root": root, "out": out, "truths": truths, "results": results}


def _as_rows(frame) -> Counter:  # noqa: ANN001
    return Counter(zip(frame.problem, frame.response, frame.n_response_tokens, frame.finish_reason == "length",
                       frame.reward, frame.reward_acc, strict=True))


def test_fork_dumps_import_row_by_row(fork_job: dict[str, object]) -> None:
    out, truths = Path(str(fork_job["out"])), fork_job["truths"]
    assert isinstance(truths, dict)
    statuses = {(r.file.kind, r.file.step): r.status for r in fork_job["results"]}  # type: ignore[attr-defined]
    assert statuses == {("train", 1): "imported", ("validation", 1): "imported", ("train", 2): "waiting"}
    train = _frame(out / "train" / "step-000001")
    expected = Counter((t.problem, t.response, t.n_response_tokens, t.cut, t.score, t.acc) for t in truths[("train", 1)])
    assert _as_rows(train) == expected
    assert set(train.n_prompt_tokens) == {t.n_prompt_tokens for t in truths[("train", 1)]}
    assert train.groupby("problem_id").size().tolist() == [N_TRAIN] * 3  # scattered rows regrouped by prompt
    assert set(train.task) == {"unmatched"} and all(pid.startswith("h-") for pid in train.problem_id)
    val = _frame(out / "val" / "step-000001")
    assert _as_rows(val) == Counter((t.problem, t.response, t.n_response_tokens, t.cut, t.score, t.acc)
                                    for t in truths[("validation", 1)])
    assert val.n_prompt_tokens.isna().all()  # its prompt was decoded without specials: no padding to count
    assert set(val.task) == {"aime24"} and sorted(val.problem_id.unique()) == ["aime24-0", "aime24-1"]
    assert val.groupby("problem_id").sample_idx.apply(sorted).tolist() == [list(range(16))] * 2  # ×16 pooled
    assert RunStore(out / "val" / "step-000001").read_run().tasks["aime24"].k == 16


def test_fork_structure_and_no_pad_left(fork_job: dict[str, object]) -> None:
    out, root = Path(str(fork_job["out"])), Path(str(fork_job["root"]))
    for kind, folder, dump in (("train", "train", "rollout-log"), ("validation", "val", "validation-log")):
        frame = _frame(out / folder / "step-000001")
        outputs = [json.loads(line)["output"] for line in (root / dump / "1.jsonl").read_text().splitlines()]
        assert int(frame.n_blocks.sum()) == sum(o.count("<Parallel>") for o in outputs) > 0, kind  # plain search
        assert int(frame.has_parallel.sum()) == sum("<Parallel>" in o for o in outputs)
        assert sum(o.count(PAD) for o in outputs) > 100  # the dump really was padded
        for marker in (PAD, IM_END, IM_START):
            assert not frame.response.str.contains(marker, regex=False).any(), (kind, marker)
        run = RunStore(out / folder / "step-000001").read_run()
        assert run.training is not None and run.training.tags_kept and run.training.structure_measurable
        assert (run.model.step, run.model.family, run.status) == (1, "Parallel-R1-S1", "complete")


def test_each_step_run_holds_its_summary_computed_from_the_dump(fork_job: dict[str, object]) -> None:
    """The per-step numbers a Training page draws are in run.json, equal to values computed from the
    rows that were dumped (no response read back)."""
    out, truths = Path(str(fork_job["out"])), fork_job["truths"]
    assert isinstance(truths, dict)
    for kind, folder, k in (("train", "train", N_TRAIN), ("validation", "val", 16)):
        rows = truths[(kind, 1)]
        run = RunStore(out / folder / "step-000001").read_run()
        assert run.training is not None
        summary = run.training.summary
        assert (summary.n_samples, summary.k) == (len(rows), k)
        assert summary.n_problems == len({t.problem for t in rows})
        assert summary.reward_mean == pytest.approx(sum(t.score for t in rows) / len(rows))
        assert summary.parallel_ratio == pytest.approx(sum("<Parallel>" in t.response for t in rows) / len(rows))
        assert summary.blocks_per_response == pytest.approx(sum(t.response.count("<Parallel>") for t in rows)
                                                               / len(rows))
        assert summary.response_tokens_mean == pytest.approx(sum(t.n_response_tokens for t in rows) / len(rows))
        assert summary.truncated_ratio == pytest.approx(sum(t.cut for t in rows) / len(rows))


def test_fork_validation_is_graded_against_the_benchmark_gold(fork_job: dict[str, object]) -> None:
    val = _frame(Path(str(fork_job["out"])) / "val" / "step-000001")
    golds = {p.problem: p.gold for p in __import__("pr1_eval.inputs.tasks", fromlist=["x"]).load_task("aime24").problems}
    assert (val.gold == val.problem.map(golds)).all()
    check = RunStore(Path(str(fork_job["out"])) / "val" / "step-000001").read_run().extra["benchmark_check"]
    assert (check["aime24"]["verdict"], check["aime24"]["n_matched"], check["aime24"]["n_problems"]) == (
        "partial", 2, 30)  # 2 of AIME24's 30 problems: never averaged as the benchmark
    uncut = val[val.finish_reason != "length"]
    assert (uncut.correct == uncut.reward_acc).all() and uncut.correct.any() and not uncut.correct.all()


@pytest.fixture(scope="module")
def v1_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("v1") / "job"
    truths = {
        "train": F.write_v1_step(root / "rollout_data", 3, F.training_problems(2), N_TRAIN, validation=False,
                                 padding_rows=3),
        "validation": F.write_v1_step(root / "validation_data", 3, F.aime_problems(2), 4, validation=True),
    }
    F.write_v1_step(root / "rollout_data", 4, F.training_problems(2), N_TRAIN, validation=False)
    out = root.parent / "runs"
    return {"root": root, "out": out, "truths": truths, "results": import_verl(root, out, _opts())}


def test_verl_091_v1_rollouts_group_by_uid_and_drop_padding(v1_job: dict[str, object]) -> None:
    out, truths = Path(str(v1_job["out"])), v1_job["truths"]
    assert isinstance(truths, dict)
    frame = _frame(out / "train" / "step-000003")
    run = RunStore(out / "train" / "step-000003").read_run()
    assert run.training is not None
    assert run.training.padding_rows_dropped == 3 and run.training.format == "verl-0.9.1-v1"
    assert len(frame) == len(truths["train"]) == 2 * N_TRAIN and (frame.response != "").all()
    stripped = {t.response.replace("<Parallel>", "").replace("</Parallel>", "").replace("<Path>", "")
                .replace("</Path>", "").replace("<Summary>", "").replace("</Summary>", "") for t in truths["train"]}
    assert set(frame.response) == stripped  # the tags vanished in VERL's decode
    assert frame.n_blocks.sum() == 0 and any("<Parallel>" in t.response for t in truths["train"])
    assert not run.training.tags_kept and not run.training.structure_measurable
    summary = run.training.summary  # structure unmeasurable: None, never 0 ("stopped branching")
    assert summary.parallel_ratio is None and summary.first_block_rel_pos is None
    assert summary.reward_mean == pytest.approx(sum(t.score for t in truths["train"]) / len(truths["train"]))
    assert frame.groupby("problem_id").size().tolist() == [N_TRAIN, N_TRAIN]
    assert (frame.gold != "").all() and frame.correct.notna().all()  # gts is known: graded
    assert sorted(frame.reward) == sorted(t.score for t in truths["train"])


def test_unmeasurable_structure_is_never_shown_as_a_number(v1_job: dict[str, object],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """VERL 0.9.1 stripped the tags: report's table says n/a and why, --json gives null, the
    analysis' structure table (the dashboard's Behaviour page) gives n/a, not 0.0 "no parallel blocks"."""
    from analysis.runs.loader import load_runs
    from analysis.structure.branching import mark_unmeasurable, structure_stats
    from pr1_eval.cli.main import main

    run = Path(str(v1_job["out"])) / "train" / "step-000003"
    assert main(["report", str(run)]) == 0
    table = capsys.readouterr().out
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines)  # past the run and policy lines, in the table's part with them
                 if line.split()[:1] == ["task"] and "parallel" in line.split())
    head, row = lines[start].split(), lines[start + 1].split()
    assert row[head.index("parallel")] == "n/a" and row[head.index("format_ok")] == "n/a"
    assert "parallel, format_ok n/a (tags stripped by VERL 0.9.1): VERL 0.9.1 decodes with skip_special_tokens" in table
    assert main(["report", str(run), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    cells = next(iter(document["tasks"].values()))
    assert "parallel_ratio" in cells and cells["parallel_ratio"] is None and cells["format_ok_ratio"] is None
    assert document["structure_note"].startswith("n/a (tags stripped by VERL 0.9.1)")
    loaded = load_runs([run], tokenizer=None, cache=False)
    shown = mark_unmeasurable(structure_stats(loaded.samples), loaded.run_info, fill="n/a")
    assert set(shown["parallel_ratio"]) == {"n/a"} and set(shown["format_ok_ratio"]) == {"n/a"}
    assert all(n.startswith("structure n/a (tags stripped") and "no parallel blocks" not in n for n in shown["notes"])
    assert shown["accuracy"].notna().all()  # what is measurable stays
    from dashboards.tables import report_rows

    fallback = report_rows(loaded, list(loaded.run_info), sorted(set(loaded.samples["task"])))
    assert set(fallback["parallel_ratio"]) == {"n/a"}  # the leaderboard page's per-run report


def test_verl_091_v1_validation_pools_one_uid_per_row(v1_job: dict[str, object]) -> None:
    frame = _frame(Path(str(v1_job["out"])) / "val" / "step-000003")
    assert frame.groupby("problem_id").size().to_dict() == {"aime24-0": 4, "aime24-1": 4}
    assert (frame.reward_acc == frame.correct).all()


def test_verl_091_legacy_float_step_and_prompt_groups(tmp_path: Path) -> None:
    root = tmp_path / "job"
    truths = F.write_legacy_step(root / "rollout", 5, F.training_problems(2), N_TRAIN, validation=False)
    first = json.loads((root / "rollout" / "5.jsonl").read_text().splitlines()[0])
    assert first["step"] == 5.0 and isinstance(first["step"], float)  # the reward's own step won
    results = import_verl(root / "rollout", tmp_path / "runs", _opts(final=True))
    assert [(r.file.step, r.status) for r in results] == [(5, "imported")]
    run = RunStore(tmp_path / "runs" / "train" / "step-000005").read_run()
    assert run.model.step == 5 and run.training is not None and run.training.rows_with_other_step == 0
    frame = _frame(tmp_path / "runs" / "train" / "step-000005")
    assert frame.groupby("problem_id").size().tolist() == [N_TRAIN, N_TRAIN] and len(frame) == len(truths)


def test_data_file_gives_ids_and_golds(tmp_path: Path) -> None:
    problems = F.training_problems(2)
    F.write_fork_step(tmp_path / "job" / "rollout-log", 7, problems, 2, validation=False)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"data_source": "dapo", "prompt": [{"role": "user", "content": F.render(p)}],
                                        "reward_model": {"ground_truth": g}, "extra_info": {"id": f"d-{i}", "index": i}})
                            + "\n" for i, (p, g) in enumerate(problems)))
    import_verl(tmp_path / "job", tmp_path / "runs", _opts(final=True, data=[str(data)]))
    frame = _frame(tmp_path / "runs" / "train" / "step-000007")
    assert set(frame.task) == {"dapo"} and set(frame.problem_id) == {"d-0", "d-1"}
    assert (frame.gold == frame.problem_id.map({"d-0": "1", "d-1": "3"})).all() and frame.correct.notna().all()


def test_a_problem_twice_in_a_batch_is_pooled_without_making_the_step_incomplete(tmp_path: Path) -> None:
    from pr1_eval.report.completeness import check_run

    problems = F.training_problems(3)
    F.write_v1_step(tmp_path / "rollout", 9, [*problems, problems[0]], N_TRAIN, validation=False)  # 4 uids
    import_verl(tmp_path / "rollout", tmp_path / "runs", _opts(final=True))
    run_dir = tmp_path / "runs" / "train" / "step-000009"
    frame = _frame(run_dir)
    sizes = frame.groupby("problem").size()
    assert sizes[problems[0][0]] == 2 * N_TRAIN and sizes[problems[1][0]] == N_TRAIN
    assert RunStore(run_dir).read_run().tasks["unmatched"].k == N_TRAIN
    completeness = check_run(run_dir)
    assert not completeness.tasks["unmatched"].short_problems and completeness.status == "complete"


def test_the_analysis_loader_reads_the_step_runs(fork_job: dict[str, object]) -> None:
    from analysis.runs.loader import load_runs

    out = Path(str(fork_job["out"]))
    loaded = load_runs(out, tokenizer=None, cache=False)
    assert not loaded.failures
    per_run = loaded.samples.groupby("run").agg(step=("step", "first"), family=("model_family", "first"),
                                                n=("sample_idx", "size"), reward=("reward", "mean"))
    assert sorted(per_run.n) == [12, 32] and set(per_run.step) == {1} and set(per_run.family) == {"Parallel-R1-S1"}
    val = loaded.samples[loaded.samples.task == "aime24"]
    truths = fork_job["truths"]
    assert isinstance(truths, dict)
    assert val.reward.mean() == pytest.approx(sum(t.score for t in truths[("validation", 1)]) / 32)
    assert len(loaded.blocks) == int(loaded.samples.n_blocks.sum()) > 0  # blocks re-parsed from the kept tags


def test_tokenizer_gives_token_positions_and_counts_where_the_dump_has_none(tmp_path: Path) -> None:
    tok = F.tokenizer()
    tok.save_pretrained(tmp_path / "model")
    problems = F.training_problems(2)
    F.write_v1_step(tmp_path / "v1" / "rollout", 2, problems, 2, validation=False)
    truths = F.write_fork_step(tmp_path / "fork" / "rollout-log", 2, problems, 2, validation=False)
    for job in ("v1", "fork"):
        import_verl(tmp_path / job, tmp_path / job / "runs", _opts(final=True, tokenizer=str(tmp_path / "model")))
    v1 = _frame(tmp_path / "v1" / "runs" / "train" / "step-000002")
    counted = [len(tok(r, add_special_tokens=False)["input_ids"]) for r in v1.response]
    assert v1.n_response_tokens.tolist() == counted and (v1.position_unit == "token").all()
    fork_run = tmp_path / "fork" / "runs" / "train" / "step-000002"
    fork = _frame(fork_run)
    assert sorted(fork.n_response_tokens) == sorted(t.n_response_tokens for t in truths)  # the padding's count
    assert RunStore(fork_run).read_run().position_unit == "token"
    with_block = fork[fork.n_blocks > 0].iloc[0]
    before = with_block.response[: with_block.block_char_starts[0]]
    assert with_block.block_token_starts[0] == len(tok(before, add_special_tokens=False)["input_ids"])
