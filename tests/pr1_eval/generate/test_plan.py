"""A run is planned once, then executed: each task file, the template and the model's identity are
read once per ``pr1-eval run`` and, in a sweep, the tasks and template once for all checkpoints and
the identity once per checkpoint (none for a checkpoint whose run is finished)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.cli.main import main
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.plan import build_plan
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model

OPTIONS = ["--tasks", "aime24,amc23", "-k", "2", "--limit", "2", "--max-new-tokens", "4", "--engine", "hf",
           "--grade-workers", "1"]
#: Each loader, and every module that looks it up by name (a call goes through exactly one of them).
LOADERS = {
    "load_task": ("pr1_eval.inputs.tasks", "pr1_eval.generate.preflight"),
    "load_template": ("pr1_eval.inputs.prompts", "pr1_eval.generate.preflight"),
    "model_identity": ("pr1_eval.records.provenance", "pr1_eval.generate.plan"),
}


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, Counter[str]]:
    """Counting wrappers around every loader, keyed by what it read (task name, template, model path)."""
    import importlib

    counts: dict[str, Counter[str]] = {name: Counter() for name in LOADERS}

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name][str(args[0]) if args else "default"] += 1
            return original(*args, **kwargs)
        return wrapper

    for name, modules in LOADERS.items():
        for module_name in modules:
            module = importlib.import_module(module_name)
            monkeypatch.setattr(module, name, counting(name, getattr(module, name)))
    return counts


def _checkpoint(folder: Path) -> Path:
    source = cached_tiny_model("random")
    folder.mkdir(parents=True)
    for item in source.iterdir():
        (folder / item.name).symlink_to(item)
    return folder


def test_run_reads_each_input_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = str(cached_tiny_model("random"))
    counts = _count_reads(monkeypatch)
    assert main(["run", "--model", model, "--out", str(tmp_path / "run"), *OPTIONS]) == 0
    assert counts["load_task"] == Counter({"aime24": 1, "amc23": 1})
    assert counts["load_template"] == Counter({"parallel_r1_v3": 1})
    assert counts["model_identity"] == Counter({model: 1})
    assert len(RunStore(tmp_path / "run").read_frame()) == 2 * 2 * 2  # the run happened: 2 tasks × 2 problems × k

    for counter in counts.values():
        counter.clear()
    assert main(["run", "--model", model, "--out", str(tmp_path / "run"), *OPTIONS]) == 0  # a rerun resumes
    assert counts["load_task"] == Counter({"aime24": 1, "amc23": 1})
    assert sum(counts["load_template"].values()) == 1 and sum(counts["model_identity"].values()) == 1


def test_a_run_joins_a_training_family_at_the_step_it_is_given(tmp_path: Path) -> None:
    """``run --family JOB --step 0``: the base model as step 0 of a sweep's job (run.json's ``model``, which
    ``analyze`` groups the drift by); a rerun without ``--family`` resumes and keeps it."""
    from analysis.structure.drift import model_family

    model = str(cached_tiny_model("random"))
    out = tmp_path / "base"
    assert main(["run", "--model", model, "--out", str(out), "--family", "my-sft", "--step", "0", *OPTIONS]) == 0
    info = RunStore(out).read_run()
    assert (info.model.family, info.model.step) == ("my-sft", 0)
    assert model_family(info, out.name) == "my-sft"
    assert main(["run", "--model", model, "--out", str(out), "--step", "0", *OPTIONS]) == 0
    assert RunStore(out).read_run().model.family == "my-sft"
    plain = tmp_path / "plain"
    assert main(["run", "--model", model, "--out", str(plain), *OPTIONS]) == 0
    assert RunStore(plain).read_run().model.family is None


def test_sweep_reads_the_shared_inputs_once_and_each_model_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "job"
    steps = [_checkpoint(root / f"global_step_{s}") for s in (10, 20, 30)]
    args = ["sweep", str(root), "--out-root", str(tmp_path / "runs"), *OPTIONS]
    counts = _count_reads(monkeypatch)
    assert main(args) == 0
    assert counts["load_task"] == Counter({"aime24": 1, "amc23": 1})
    assert counts["load_template"] == Counter({"parallel_r1_v3": 1})
    assert counts["model_identity"] == Counter({str(step): 1 for step in steps})
    for step in (10, 20, 30):
        info = RunStore(tmp_path / "runs" / f"job-step{step}-sequential-k2-seed0").read_run()
        assert (info.status, info.model.step, info.model.family) == ("complete", step, "job")

    for counter in counts.values():
        counter.clear()
    assert main(args) == 0  # every run finished: no checkpoint is planned again
    assert counts["load_task"] == Counter({"aime24": 1, "amc23": 1}) and not counts["model_identity"]
    assert capsys.readouterr().out.count("finished earlier") == 3


def test_the_plan_holds_what_the_run_records(tmp_path: Path) -> None:
    """The planned record is the run's: resuming keeps the stored start time and tasks, and the
    shard slice, the resolved decoding and the record name come from the plan."""
    model = str(cached_tiny_model("random"))
    config = RunConfig(model=model, tasks=["aime24"], k=2, limit=5, engine="hf", out=str(tmp_path / "r"),
                       decoding="forkjoin", paths=3, shard="1/2")
    plan = build_plan(config)
    assert [p.problem_id for p in plan.tasks["aime24"].loaded.problems] == plan.record.tasks["aime24"].problem_ids
    assert plan.tasks["aime24"].task_size == 5 and len(plan.record.tasks["aime24"].problem_ids) == 2  # problems 1, 3
    assert plan.record.shard is not None and (plan.record.shard["index"], plan.record.shard["count"]) == (1, 2)
    assert plan.record.decoding["paths"] == 3 and plan.decoding.params.paths == 3
    assert plan.record.name == "r" and not plan.resumes and plan.out == tmp_path / "r"
    stored = plan.record.__class__.from_dict({**plan.record.to_dict(), "started_at": "2000-01-01T00:00:00+00:00"})
    RunStore(tmp_path / "r").write_run(stored)
    again = build_plan(config)
    assert again.resumes and again.record.started_at == "2000-01-01T00:00:00+00:00"
