"""repro's rollout writer: the store side (many writers, completeness, reruns) on synthetic rollouts.

The end-to-end path (VERL's V1 agent-loop worker → our reward manager → runs) is in
``test_runs_verl.py``; here the writer is driven directly, so each rule is checked on
rollouts whose every field is known.
"""

from __future__ import annotations

import hashlib
import multiprocessing
from pathlib import Path

import pytest

from pr1_eval.store.run_store import RunStore
from repro.rollouts.runs import LEDGER, RolloutRunWriter, validation_size
from tests.support.deadlines import scaled
from tests.support.rollout_fixtures import N, keys, options, rollout, step_rows


def test_two_steps_become_two_complete_runs_with_summaries(tmp_path: Path) -> None:
    writer = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    for step in (1, 2):
        for row in step_rows(step):
            writer.add(row)
    writer.close()
    for step in (1, 2):
        run = writer.run_dir("train", step)
        store = RunStore(run)
        record = store.read_run()
        assert record.status == "complete" and record.model.step == step
        assert record.training is not None
        assert {k: getattr(record.training, k) for k in ("job", "kind", "step", "format", "tags_kept", "attempt")} == {
            "job": "job", "kind": "train", "step": step, "format": "repro", "tags_kept": True, "attempt": "A"}
        assert record.training.rows_seen == record.training.rows_stored == 12
        assert keys(run) == sorted(("dapo", f"p{p}", s) for p in range(3) for s in range(N))
        assert len(store.part_paths()) == 1, "a complete step's parts are compacted into one"
        summary = record.training.summary
        assert summary.n_samples == 12 and summary.n_problems == 3 and summary.k == N
        assert summary.reward_mean == pytest.approx(sum(range(N)) / N)  # rewards 0..3 in every group
        assert summary.parallel_ratio == pytest.approx(0.5) and summary.accuracy == pytest.approx(0.5)
        assert record.tasks["dapo"].k == N and record.tasks["dapo"].n_problems == 3
        responses = {r.response for r in store.read_records()}
        assert all(f"step {step} " in text for text in responses)


def test_a_step_cut_short_stays_running_and_a_restarted_writer_adds_no_duplicate(tmp_path: Path) -> None:
    rows = step_rows(5)
    first = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    for row in rows[:7]:
        first.add(row)
    first.close()
    run = first.run_dir("train", 5)
    record = RunStore(run).read_run()
    assert record.status == "running" and record.training is not None and record.training.rows_seen == 7
    assert record.training.summary is None
    again = RolloutRunWriter(options(tmp_path), attempt="A", background=False)  # a restarted reward worker
    for row in rows[3:]:  # four rollouts delivered a second time, then the five missing ones
        again.add(row)
    again.close()
    record = RunStore(run).read_run()
    assert record.status == "complete" and record.training is not None
    assert record.training.rows_seen == record.training.rows_stored == 12
    assert keys(run) == sorted(set(keys(run))) and len(keys(run)) == 12
    late = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    late.add(rows[0])
    late.close()
    assert len(keys(run)) == 12, "a delivery after completion changes nothing"


def test_a_resumed_job_redoes_the_step_and_the_old_attempt_moves_aside(tmp_path: Path) -> None:
    old = RolloutRunWriter(options(tmp_path), attempt="A", background=False)
    for row in step_rows(3)[:5]:
        old.add(row)
    old.close()
    resumed = RolloutRunWriter(options(tmp_path), attempt="B", background=False)
    fresh = [rollout(3, p, s, uid=f"B-u{p}", reward=2.0) for p in range(3) for s in range(N)]
    for row in fresh:
        resumed.add(row)
    resumed.close()
    run = resumed.run_dir("train", 3)
    record = RunStore(run).read_run()
    assert record.status == "complete" and record.training is not None and record.training.attempt == "B"
    assert len(keys(run)) == 12 and {r.reward for r in RunStore(run).read_records()} == {2.0}
    aside = list((Path(str(tmp_path.resolve()) + ".superseded") / "train").iterdir())
    assert len(aside) == 1 and len(RunStore(aside[0]).read_records()) == 5


def test_every_nth_group_keeps_whole_groups_by_problem_and_still_completes(tmp_path: Path) -> None:
    prompts = 40
    writer = RolloutRunWriter(options(tmp_path, prompts=prompts, every=4, chunk=17), attempt="A", background=False)
    for row in step_rows(1, prompts):
        writer.add(row)
    writer.close()
    run = writer.run_dir("train", 1)
    record = RunStore(run).read_run()
    expected = {f"p{p}" for p in range(prompts)
                if int.from_bytes(hashlib.sha256(f"dapo\tp{p}".encode()).digest()[:8], "big") % 4 == 0}
    stored = keys(run)
    assert 0 < len(expected) < prompts
    assert {pid for _, pid, _ in stored} == expected and len(stored) == len(expected) * N
    assert record.status == "complete" and record.training is not None
    assert record.training.rows_seen == prompts * N and record.training.every == 4


def test_a_problem_drawn_twice_in_a_step_keeps_both_groups(tmp_path: Path) -> None:
    writer = RolloutRunWriter(options(tmp_path, prompts=2), attempt="A", background=False)
    for uid in ("first", "second"):
        for s in range(N):
            writer.add(rollout(1, 0, s, uid=uid))
    writer.close()
    assert keys(writer.run_dir("train", 1)) == [("dapo", "p0", i) for i in range(2 * N)]


def test_validation_is_its_own_run_and_never_thinned(tmp_path: Path) -> None:
    writer = RolloutRunWriter(options(tmp_path, every=1000), attempt="A", background=False)
    for p in range(2):
        for s in range(3):
            writer.add(rollout(10, p, s, kind="validation"))
    writer.close()
    record = RunStore(writer.run_dir("validation", 10)).read_run()
    assert writer.run_dir("validation", 10).parent.name == "val"
    assert record.status == "complete" and record.training is not None and record.training.kind == "validation"
    assert len(keys(writer.run_dir("validation", 10))) == 6 and record.training.every == 1
    assert (writer.run_dir("validation", 10) / LEDGER).is_file()


def _write_half(root: str, half: int) -> None:
    writer = RolloutRunWriter(options(Path(root), prompts=10, chunk=3), attempt="A", background=False)
    for row in step_rows(1, 10)[half::2]:
        writer.add(row)
        writer.flush(force=False)
    writer.close()


def test_two_processes_writing_one_step_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_write_half, args=(str(tmp_path), half)) for half in (0, 1)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=scaled(120))
        assert proc.exitcode == 0
    run = tmp_path / "train" / "step-000001"
    record = RunStore(run).read_run()
    assert record.status == "complete" and len(keys(run)) == 40 == len(set(keys(run)))


def test_the_validation_size_is_read_from_the_files(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with_n = tmp_path / "val.parquet"
    pq.write_table(pa.Table.from_pylist([{"q": "a", "__rollout_n__": 16}, {"q": "b", "__rollout_n__": 1}]), with_n)
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.Table.from_pylist([{"q": "a"}, {"q": "b"}, {"q": "c"}]), plain)
    assert validation_size([str(with_n)], 1) == (17, 16)
    assert validation_size(str(plain), 2) == (6, 2)
    assert validation_size([str(tmp_path / "missing.parquet")], 2) == (None, 2)


def test_the_stage_config_names_the_sizes_and_the_mid_training_switch(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from repro.rollouts.runs import options_from_config

    def config(mode: str) -> object:
        return OmegaConf.create({
            "repro": {"rollout_runs": {"dir": str(tmp_path), "every": 2, "val_rows": 64}},
            "actor_rollout_ref": {"rollout": {"n": 8, "val_kwargs": {"n": 1}, "response_length": 3000}},
            "data": {"train_batch_size": 512, "val_files": None},
            "trainer": {"experiment_name": "s2"},
            "reward": {"custom_reward_function": {"reward_kwargs": {"mode": mode, "switch_step": 200}}},
        })

    mid = options_from_config(config("mid_training"))
    assert mid is not None
    assert (mid.job, mid.train_rows, mid.train_n, mid.val_rows, mid.every) == ("s2", 512 * 8, 8, 64, 2)
    assert (mid.reward_mode, mid.switch_step, mid.response_budget) == ("mid_training", 200, 3000)
    plain = options_from_config(config("accuracy"))
    assert plain is not None and (plain.reward_mode, plain.switch_step) == ("accuracy", None)  # no switch to mark
