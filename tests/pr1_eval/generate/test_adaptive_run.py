"""``run --adaptive`` end to end with the trained tiny model on the CPU: rounds, run.json's adaptive
section, a complete report with fewer than k samples, and a resumed run equal to the uninterrupted one.

The tiny model answers no AIME problem, so every problem is settled below 1/2 after two rounds of 4
(eight wrong verdicts), short of k = 12; the resume drops the stored parts of the last chunks and
reruns the same configuration, which must redraw exactly those samples."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pr1_eval.engines.factory import make_engine
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.runner import run_eval
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.report.completeness import check_run
from pr1_eval.report.load import load_report
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    return make_engine("hf", str(cached_tiny_model("trained")))


def _config(out: Path, model: str) -> RunConfig:
    return RunConfig(model=model, tasks=["aime24"], k=12, limit=2, max_new_tokens=16, engine="hf", seed=3,
                     out=str(out), problems_per_chunk=1, grade_workers=1, data_dir=str(packaged_benchmarks_dir()),
                     adaptive=True, round_size=4)


def _samples(out: Path) -> list[tuple[str, int, str]]:
    frame = RunStore(out).read_frame().sort_values(["problem_id", "sample_idx"])
    return list(zip(frame["problem_id"], frame["sample_idx"], frame["response"], strict=True))


def test_an_adaptive_run_stops_settled_problems_and_resumes_its_rounds(engine, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    model = str(cached_tiny_model("trained"))
    out = run_eval(_config(tmp_path / "run", model), engine)
    said = capsys.readouterr().err  # rounds named as they start; the third never starts (all settled at 8)
    assert "round 1 of ≤ 3: 2 of 2 problem(s) open, 8 sample(s) to draw (4 per problem)" in said
    assert "round 2 of ≤ 3: 2 of 2 problem(s) open" in said and "round 3 of" not in said and "resuming" not in said
    record = RunStore(out).read_run()
    assert record.adaptive is not None and record.adaptive["max_k"] == 12 and record.adaptive["round_size"] == 4
    held = _samples(out)
    drawn = {pid: sum(1 for p, _, _ in held if p == pid) for pid in {p for p, _, _ in held}}
    assert record.adaptive["samples_drawn"] == {"aime24": drawn}
    assert set(drawn.values()) == {8} and record.adaptive["settled"] == {"aime24": {pid: -1 for pid in drawn}}
    assert check_run(out).complete
    report = load_report(out)
    assert report.complete and report.tasks["aime24"].metrics is not None and "16 samples drawn" in (report.adaptive_note or "")
    note = report.adaptive_note or ""  # the saving in tokens (8 of 12 drawn per problem: 4/8 of the drawn tokens)
    tokens = int(RunStore(out).read_frame()["n_response_tokens"].sum())
    assert f"{tokens:,} tokens drawn, about {tokens / 2:,.0f} fewer than fixed k (33%)" in note
    assert "decided: 0 problem(s) with p above 0.5, 2 below 0.5, 0 not settled" in note

    parts = RunStore(out).part_paths()
    assert len(parts) == 4  # two rounds × two one-problem chunks
    for part in parts[1:]:
        part.unlink()  # killed after the first chunk of round 0
    store = RunStore(out)
    store.write_run(dataclasses.replace(store.read_run(), status="running"))
    assert not check_run(out).complete
    capsys.readouterr()
    run_eval(_config(out, model), engine)
    assert _samples(out) == held and check_run(out).complete
    said = capsys.readouterr().err  # what the resume found, as a fixed-k resume says it
    assert f"resuming {out}: 4 sample(s) already held over 1 of 2 problem(s) (0 finished" in said
    assert "round 1 of ≤ 3: 1 of 2 problem(s) open" in said


def test_changing_the_rule_of_a_stored_run_is_refused(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = str(cached_tiny_model("trained"))
    config = dataclasses.replace(_config(tmp_path / "run", model), k=8, limit=1)
    run_eval(config, engine)
    with pytest.raises(Exception, match="adaptive"):
        run_eval(dataclasses.replace(config, adaptive_margin=0.3), engine)


def test_a_sweep_runs_every_checkpoint_adaptively_and_a_rerun_skips_it(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``sweep --adaptive``: the options reach each checkpoint's run (the shared option code), each run
    stops its settled problems, the closing table shows its mean@12 (not ⚠), and a rerun finds it finished."""
    from pr1_eval.cli.main import main

    source = cached_tiny_model("trained")
    folder = tmp_path / "ckpts" / "global_step_5"
    folder.mkdir(parents=True)
    for item in source.iterdir():
        (folder / item.name).symlink_to(item)
    args = ["sweep", str(tmp_path / "ckpts"), "--out-root", str(tmp_path / "runs"), "--tasks", "aime24", "-k", "12",
            "--limit", "1", "--max-new-tokens", "8", "--engine", "hf", "--problems-per-chunk", "1",
            "--grade-workers", "1", "--data-dir", str(packaged_benchmarks_dir()), "--adaptive"]
    assert main(args) == 0
    run = tmp_path / "runs" / "ckpts-step5-sequential-k12-seed0"
    record = RunStore(run).read_run()
    assert record.adaptive is not None and record.adaptive["samples_drawn"] == {"aime24": {"aime24-0": 8}}
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if "sequential-k12" in line]
    assert "done" in table and "0.000" in table and rows and all("⚠" not in line for line in rows)  # no incomplete mark
    assert "--limit 1: every run holds only the first 1 problem(s)" in table  # the limited sweep is named as such
    assert main(args) == 0 and "finished earlier" in capsys.readouterr().out
