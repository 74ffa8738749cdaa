"""Wall clock of generated runs: each sample's ``wall_s`` and each wave's seconds in run.json.

The fake engine sleeps a known time per call, so the seconds have a floor to be checked against
(not just "positive"); the HF run checks that a real generated run stores both and that they agree:
every wave of run.json's ``generation`` section adds up to its totals, and no sample waited longer
than the waves of the session."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.decoding.base import SequentialDecoder
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig
from pr1_eval.generate.wall_clock import WaveLog
from pr1_eval.records.run import RunRecord
from pr1_eval.store.run_store import RunStore
from tests.support.parallel_fakes import FakeEngine, Script

PAUSE = 0.02  # seconds every engine call takes


@dataclass
class SlowEngine(FakeEngine):
    """The scripted engine, taking :data:`PAUSE` seconds per call."""

    pauses: list[float] = field(default_factory=list)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        time.sleep(PAUSE)
        return super().generate(requests, sampling)


def test_forkjoin_times_every_wave_and_every_sample() -> None:
    engine = SlowEngine(Script(blocks=2))
    decoder = ForkJoinDecoder()
    out = decoder.decode(engine, [[50, 51], [60]], 3, SamplingConfig(max_new_tokens=400, seed=1), ["t/a", "t/b"])
    assert [w.kind for w in decoder.waves] == ["main", "paths", "summary"] * 2 + ["main"]
    assert [w.requests for w in decoder.waves] == [len(call) for call in engine.calls]
    assert all(w.wall_s >= PAUSE for w in decoder.waves)
    total = sum(w.wall_s for w in decoder.waves)
    for sample in (s for samples in out for s in samples):
        assert sample.wall_s is not None
        # it took part in engine_calls waves, each at least PAUSE long; it cannot outlast every wave by more than
        # the machines' own bookkeeping
        assert PAUSE * sample.engine_calls <= sample.wall_s <= total + 0.05
    assert max(s.wall_s or 0.0 for samples in out for s in samples) >= total - 1e-9  # the last wave ended them all


def test_a_sample_that_stops_early_is_not_charged_for_later_waves() -> None:
    """One problem's samples never branch (their first wave ends them); the other's branch twice."""

    class Mixed(SlowEngine):
        def _write(self, prompt: Sequence[int], sample: int, rng: Any) -> list[int]:
            if prompt and prompt[0] == 99:
                return [11, 12, 2]  # EOS at once (the fakes' EOS id is 2)
            return super()._write(prompt, sample, rng)

    engine = Mixed(Script(blocks=2))
    decoder = ForkJoinDecoder()
    early, late = decoder.decode(engine, [[99], [60]], 2, SamplingConfig(max_new_tokens=400, seed=1), ["t/a", "t/b"])
    assert all(s.engine_calls == 1 for s in early) and all(s.engine_calls == 7 for s in late)
    first = decoder.waves[0].wall_s
    assert all(first - 1e-9 <= (s.wall_s or 0) < first + PAUSE for s in early)
    assert all((s.wall_s or 0) >= 7 * PAUSE for s in late)


def test_sequential_decoding_is_one_wave_shared_by_its_samples() -> None:
    decoder = SequentialDecoder()
    out = decoder.decode(SlowEngine(Script(blocks=0)), [[50], [60]], 2, SamplingConfig(seed=0), ["t/a", "t/b"])
    (wave,) = decoder.waves
    assert wave.kind == "sequential" and wave.requests == 2 and wave.wall_s >= PAUSE
    assert {s.wall_s for samples in out for s in samples} == {wave.wall_s}


def test_the_wave_log_adds_up() -> None:
    from pr1_eval.decoding.base import Wave

    log = WaveLog("forkjoin")
    log.add([Wave("main", 2, 0.5), Wave("paths", 4, 0.25)], samples=4)
    log.add([Wave("main", 1, 0.125)], samples=2)
    section = log.section()
    assert section is not None
    assert section["wall_s"] == 0.875 and section["chunks"] == 2 and section["samples"] == 6
    assert section["by_kind"] == {"main": {"waves": 2, "requests": 3, "wall_s": 0.625},
                                  "paths": {"waves": 1, "requests": 4, "wall_s": 0.25}}
    assert [w["chunk"] for w in section["waves"]] == [0, 0, 1]
    assert WaveLog("sequential").section() is None  # nothing decoded (a complete run resumed): no section


def _config(out: Path) -> Any:
    from pr1_eval.generate.config import RunConfig
    from pr1_eval.testing.tiny_model import cached_tiny_model

    return RunConfig(model=str(cached_tiny_model("trained")), tasks=["aime24"], k=2, limit=2, max_new_tokens=48,
                     seed=3, engine="hf", decoding="forkjoin", data_source="packaged", out=str(out),
                     problems_per_chunk=1, grade_workers=1)


@pytest.fixture(scope="module")
def forkjoin_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pr1_eval.generate.runner import run_eval

    return run_eval(_config(tmp_path_factory.mktemp("wall") / "run"))


def test_a_generated_run_records_wall_clock_per_sample_and_per_wave(forkjoin_run: Path) -> None:
    frame = RunStore(forkjoin_run).read_frame()
    record = RunRecord.from_dict(json.loads((forkjoin_run / "run.json").read_text()))
    section = record.generation
    assert section is not None and section["decoding"] == "forkjoin" and section["scope"] == "session"
    assert section["chunks"] == 2 and section["samples"] == len(frame) == 4  # one chunk per problem
    waves = section["waves"]
    assert len(waves) == section["waves_total"] == section["waves_listed"]
    assert all(w["wall_s"] > 0 and w["requests"] >= 1 for w in waves)
    assert sum(w["wall_s"] for w in waves) == pytest.approx(section["wall_s"], abs=1e-5)
    for kind, totals in section["by_kind"].items():
        mine = [w for w in waves if w["kind"] == kind]
        assert totals["waves"] == len(mine) and totals["requests"] == sum(w["requests"] for w in mine)
    chunk_s = [sum(w["wall_s"] for w in waves if w["chunk"] == c) for c in range(section["chunks"])]
    assert frame["wall_s"].notna().all() and (frame["wall_s"] > 0).all()
    assert frame["wall_s"].max() <= max(chunk_s) + 0.05  # no sample waited longer than its chunk's waves
    # each chunk's last wave ended its samples: the slowest sample of each problem took its chunk's waves
    slowest = sorted(frame.groupby("problem_id")["wall_s"].max())
    assert slowest == pytest.approx(sorted(chunk_s), abs=0.05)


def test_a_rerun_with_nothing_left_keeps_the_wall_clock(forkjoin_run: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.generate import runner

    def no_model(*args: Any) -> None:
        raise AssertionError("a finished run's rerun loaded the model")

    before = json.loads((forkjoin_run / "run.json").read_text())["generation"]
    monkeypatch.setattr(runner, "_open_source", no_model)
    capsys.readouterr()
    runner.run_eval(_config(forkjoin_run))  # complete: nothing is decoded, no model is loaded
    assert json.loads((forkjoin_run / "run.json").read_text())["generation"] == before
    err = capsys.readouterr().err
    assert f"resuming {forkjoin_run}: 4 of 4 samples already done (1 of 1 task(s) finished), 0 left; nothing to " \
           "generate (the model is not loaded)" in err
    assert err.count("SHOULD ONLY BE USED FOR TESTING") == 1 and "still" not in err


def test_the_demo_checks_its_earlier_run_without_a_second_limit_warning(forkjoin_run: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The cached demo rerun printed lm-eval's --limit warning twice: once as it checked the run it
    found, once as it ran. The check is quiet; the run warns (the test above: once)."""
    from pr1_eval.cli.demo import Narrator, _set_aside_another_demo

    capsys.readouterr()
    _set_aside_another_demo(_config(forkjoin_run), Narrator())
    out, err = capsys.readouterr()
    assert "SHOULD ONLY BE USED FOR TESTING" not in err and "moved it aside" not in out
    assert (forkjoin_run / "run.json").exists()
