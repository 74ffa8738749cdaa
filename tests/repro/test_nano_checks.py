"""The nano job's pieces that need no trainer: VERL's metric lines read back, the checks' verdicts on
good and broken runs (a frozen rollout server, a flat reward, a short stored step), the overrides
composed onto the real stage configs, and the nano data built by ``pr1-repro data`` itself."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pr1_eval.records.step_summary import StepSummary
from repro import stages
from repro.nano import checks
from repro.nano.data import arithmetic_rows, build_nano_data, check_sft_slice
from repro.nano.metrics import parse_metric_line, step_metrics
from repro.nano.plan import PLANS, Scale, cpu_overrides, scale_overrides
from repro.nano.runner import stage_argv

RAY_LINE = ("\x1b[36m(TaskRunnerV1 pid=24755)\x1b[0m step:2 - actor/entropy:0.98046875 - rollout_corr/kl:-0.0006662"
            " - critic/score/mean:0.25 - training/global_step:2 - timing_s/gen:1.5e+01 - note:n/a")


def test_metric_lines_are_read_as_verl_prints_them() -> None:
    step, metrics = parse_metric_line(RAY_LINE) or (0, {})
    assert step == 2
    assert metrics == {"actor/entropy": 0.98046875, "rollout_corr/kl": -0.0006662, "critic/score/mean": 0.25,
                       "training/global_step": 2.0, "timing_s/gen": 15.0}
    assert parse_metric_line("Epoch 1/5:  12%|█▎ | 1/8 [00:08<00:57]") is None
    glued = "Epoch 1/5:  50%|█████     | 2/4 [00:21<00:21, 10.63s/it]step:3 - train/loss:10.75 - train/lr:0.0001"
    assert parse_metric_line(glued) == (3, {"train/loss": 10.75, "train/lr": 0.0001})
    assert parse_metric_line("x\r" + glued + "\r Epoch 1/5: 75%") == (3, {"train/loss": 10.75, "train/lr": 0.0001})
    sft = "step:1 - perf/max_memory_allocated_gb:0.68 - train/loss:6.6796875 - train/lr:7.5e-06"
    log = [sft, "noise", sft.replace("step:1", "step:3").replace("6.6796875", "5.1"), sft.replace("6.67", "9.99")]
    assert {s: m["train/loss"] for s, m in step_metrics(log).items()} == {1: 9.9996875, 3: 5.1}


def test_loss_and_nll_checks() -> None:
    falling = {1: {"train/loss": 6.7}, 2: {"train/loss": 6.1}, 3: {"train/loss": 5.4}}
    assert checks.loss_falls("s", falling).passed
    assert not checks.loss_falls("s", {1: {"train/loss": 6.7}, 2: {"train/loss": 6.7}}).passed
    assert not checks.loss_falls("s", {1: {"train/loss": 6.7}}).passed
    assert checks.nll_falls("s", 6.69, 5.36, 6.70, 5.39).passed
    assert not checks.nll_falls("s", 6.69, 6.69, 6.70, 5.39).passed


def _groups(values: list[float], size: int = 4) -> dict[str, list[float]]:
    """One step's rollouts as prompt groups of ``size``: the same problem ids p0, p1, … every step."""
    return {f"p{i // size}": values[i:i + size] for i in range(0, len(values), size)}


def test_trend_z_is_the_within_problem_regression_t() -> None:
    """Checked against scipy: the within-problem slope is the slope of the problem-demeaned points, and
    its t has n − problems − 1 degrees of freedom (one mean per problem, one slope)."""
    from scipy import stats

    by_step = {1: {"a": [0.0, 0.0, 1.0, 0.0], "b": [0.0, 0.0, 0.0, 0.0]},
               2: {"a": [1.0, 0.0, 1.0, 0.0], "b": [0.0, 1.0, 0.0, 0.0], "c": [1.0, 1.0, 1.0, 1.0]},
               3: {"a": [1.0, 1.0, 0.0, 1.0], "b": [1.0, 0.0, 1.0, 1.0]}}
    x = [1 - 2, 2 - 2, 3 - 2, 1 - 2, 2 - 2, 3 - 2]  # "c" was met once: it says nothing about a trend
    y = [0.25 - 0.5, 0.5 - 0.5, 0.75 - 0.5, 0.0 - 1 / 3, 0.25 - 1 / 3, 0.75 - 1 / 3]
    slope = sum(a * b for a, b in zip(x, y, strict=True)) / sum(a * a for a in x)
    ssr = sum((b - slope * a) ** 2 for a, b in zip(x, y, strict=True))
    t = slope / math.sqrt(ssr / 3 / sum(a * a for a in x))
    z, groups = checks.trend_z(by_step)
    assert groups == 7 and z == pytest.approx(stats.norm.isf(stats.t.sf(t, 3)))
    line = {s: {"a": [float(s)], "b": [float(s) + 1]} for s in (1, 2, 3)}
    assert checks.trend_z(line)[0] == math.inf  # a perfect rise in both problems
    assert checks.trend_z({s: {"a": [1.0], "b": [0.0]} for s in (1, 2, 3)})[0] == 0.0
    assert math.isnan(checks.trend_z({1: {"a": [1.0]}, 2: {"b": [0.0]}})[0])  # no problem met twice


def simulated_z(rng: random.Random, lift: float = 0.0) -> float:
    """One simulated GRPO stage as the CI slice runs it: 16 problems with their own chance of a
    reward (spread like the tiny models', mean 0.2), each met once an epoch in a shuffled order, 4
    problems × 8 rollouts a step, 8 steps; ``lift`` is added to every chance per step (0: a frozen
    policy)."""
    chance = [rng.betavariate(1.0, 4.0) for _ in range(16)]
    by_step: dict[int, dict[str, list[float]]] = {}
    for epoch in range(2):
        order = list(range(16))
        rng.shuffle(order)
        for i in range(4):
            step = epoch * 4 + i + 1
            by_step[step] = {f"p{p}": [float(rng.random() < min(1.0, chance[p] + lift * step)) for _ in range(8)]
                             for p in order[i * 4:(i + 1) * 4]}
    return checks.trend_z(by_step)[0]


def test_trend_z_is_calibrated_when_the_policy_does_not_move() -> None:
    """A learning-rate-0 stage in simulation gives z ≈ N(0, 1): mean within 0.1 of 0 and SD within 0.1
    of 1 over 2,000 runs (their SEs are 0.022 and 0.016), and passes the bar in about 0.6 % of runs."""
    rng = random.Random(11)
    zs = [simulated_z(rng) for _ in range(2000)]
    assert abs(statistics.fmean(zs)) < 0.1 and abs(statistics.stdev(zs) - 1.0) < 0.1
    assert sum(z >= checks.Z_MIN for z in zs) / len(zs) < 0.015


def test_reward_check_passes_a_learned_task_and_fails_noise() -> None:
    learned = {1: _groups([0.0] * 14 + [1.0] * 2), 2: _groups([0.0] * 12 + [1.0] * 4),
               3: _groups([1.0] * 10 + [0.0] * 6), 4: _groups([1.0] * 15 + [0.0])}
    assert checks.reward_rises("s", learned).passed
    flat = {s: _groups([0.0] * 3 + [1.0] + [0.0] * 3 + [1.0] + [0.0] * 3 + [1.0] + [0.0] * 3 + [1.0])
            for s in range(1, 7)}
    assert not checks.reward_rises("s", flat).passed
    assert not checks.reward_rises("s", {1: {"p0": [1.0]}}).passed
    reported = checks.reward_rises("s", flat, required=False)
    assert reported.passed and reported.name == "reward trend (reported)" and "z = 0.0" in reported.figures


def test_parallel_ratio_check_rises_holds_or_reports() -> None:
    rising = {1: _groups([0.0, 0.0, 0.0, 1.0] * 4), 2: _groups([0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0] * 2),
              3: _groups([1.0, 1.0, 1.0, 0.0] * 4), 4: _groups([1.0] * 15 + [0.0])}
    verdict = checks.parallel_ratio("s", rising, "every step")
    assert verdict.passed and verdict.name == "parallel ratio rises" and "1: 0.25" in verdict.figures
    flat_low = {s: _groups([0.0, 0.0, 0.0, 1.0] * 4) for s in range(1, 7)}
    assert not checks.parallel_ratio("s", flat_low, "every step").passed
    saturated = {s: _groups([1.0] * 16) for s in range(1, 7)}
    held = checks.parallel_ratio("s", saturated, "every step")
    assert held.passed and held.name == "parallel ratio holds" and "saturated" in held.figures
    falling = {**saturated, 4: _groups([1.0, 1.0, 0.0, 0.0] * 4), 5: _groups([1.0, 0.0, 1.0, 0.0] * 4),
               6: _groups([1.0, 0.0, 0.0, 0.0] * 4)}
    assert not checks.parallel_ratio("s", falling, "every step").passed
    for demand in ("tiered steps", "never"):
        reported = checks.parallel_ratio("s", falling, demand)
        assert reported.passed and reported.name == "parallel ratio (reported)"
    elsewhere = checks.parallel_ratio("s", falling, "every step", start_share=0.97, judged_elsewhere=True)
    assert elsewhere.passed and elsewhere.name == "parallel ratio trend (reported)" and "starts at 0.97" in elsewhere.figures
    # the start measured apart decides: the same saturated rollouts from a start model at 0.5 must rise
    assert checks.parallel_ratio("s", saturated, "every step", start_share=0.5).name == "parallel ratio rises"
    with pytest.raises(ValueError):
        checks.parallel_ratio("s", falling, "sometimes")


def test_same_twice_compares_every_step_and_every_reward() -> None:
    from repro.nano.repeat import same_twice

    first = {1: {"critic/score/mean": 0.25, "actor/pg_loss": 0.01, "timing_s/gen": 4.0}, 2: {"critic/score/mean": 0.5}}
    again = {1: {"critic/score/mean": 0.25 + 1e-9, "actor/pg_loss": 0.01, "timing_s/gen": 9.0},
             2: {"critic/score/mean": 0.5}}
    assert same_twice("s", first, again, {1: [0.0, 1.0]}, {1: [0.0, 1.0]}).passed  # timings are the machine's
    moved = {**again, 2: {"critic/score/mean": 0.5 + 1e-4}}
    verdict = same_twice("s", first, moved)
    assert not verdict.passed and "step 2 critic/score/mean" in verdict.figures
    assert not same_twice("s", first, again, {1: [0.0, 1.0]}, {1: [1.0, 0.0]}).passed
    assert not same_twice("s", first, {1: again[1]}).passed


def test_on_policy_check_catches_a_frozen_rollout_server() -> None:
    synced = {s: {"rollout_corr/kl": kl} for s, kl in enumerate([-3e-5, -6e-4, 1e-3, 4e-4], start=1)}
    assert checks.on_policy("s", synced).passed
    # what a server that stopped taking weights logs: the actor moves, the sampler does not
    frozen = {s: {"rollout_corr/kl": kl} for s, kl in enumerate([-3e-5, 0.004, 0.03, 0.23], start=1)}
    verdict = checks.on_policy("s", frozen)
    assert not verdict.passed and "0.23" in verdict.figures
    assert not checks.on_policy("s", {1: {"rollout_corr/kl": 0.0}, 2: {}}).passed, "a step without the metric"


def _summary(reward_mean: float) -> StepSummary:
    return StepSummary(n_samples=4, n_problems=1, k=4, reward_mean=reward_mean)


def test_rollout_runs_must_equal_verls_own_figures() -> None:
    metrics = {1: {"critic/score/mean": 0.25}, 2: {"critic/score/mean": 0.5}}
    good: dict[int, dict[str, Any]] = {1: {"status": "complete", "rows": 4, "mean_reward": 0.25, "summary": _summary(0.25)},
            2: {"status": "complete", "rows": 4, "mean_reward": 0.5, "summary": _summary(0.5)}}
    assert checks.rollout_runs_match("s", metrics, good, 4).passed
    short = {**good, 2: {"status": "running", "rows": 3, "mean_reward": 0.5, "summary": None}}
    assert "3 of 4" in checks.rollout_runs_match("s", metrics, short, 4).figures
    wrong = {**good, 1: {"status": "complete", "rows": 4, "mean_reward": 0.3, "summary": _summary(0.3)}}
    assert not checks.rollout_runs_match("s", metrics, wrong, 4).passed
    stale = {**good, 2: {**good[2], "summary": _summary(0.4)}}
    assert "summary" in checks.rollout_runs_match("s", metrics, stale, 4).figures
    assert not checks.rollout_runs_match("s", metrics, {1: good[1]}, 4).passed
    left = checks.rollout_runs_match("s", metrics, short, 4, journaled=1).figures
    assert "3 of 4" in left and "1 rollout(s) still in the reward workers' journals" in left
    assert checks.rollout_runs_match("s", metrics, good, 4, journaled=2).passed, "a delivery again is no failure"


def test_structured_engine_check_reads_the_actors_line(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("x\n(WorkerDict) WARNING: repro: structured forward builds positions and mask from the "
                   "rollout's path spans\n", encoding="utf-8")
    assert checks.structured_engine_used("s", log).passed
    log.write_text("repro: structured forward builds positions and mask from a parse of the tokens "
                   "(no path spans in the batch)\n", encoding="utf-8")
    assert not checks.structured_engine_used("s", log).passed


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_nano_stage_composes_on_its_real_stage_config(plan: str, tmp_path: Path) -> None:
    """The overrides go onto the configs GPU users run, and Hydra accepts every one of them."""
    from omegaconf import OmegaConf

    for stage in PLANS[plan]:
        spec = stages.STAGES[stage.stage]
        argv = stage_argv(stage, "/m", tmp_path / stage.name, tmp_path / "data", Scale())
        extra = tuple(argv[argv.index("--") + 1 :])
        req = stages.RunRequest(stage=spec, model="/m", gpus_per_node=1, data_dir=str(tmp_path / "data"),
                                out_dir=str(tmp_path / stage.name), extra=extra)
        config = stages.compose(req)
        assert OmegaConf.select(config, "trainer.device") == "cpu"
        assert OmegaConf.select(config, "trainer.total_training_steps") == stage.steps
        if spec.kind == "ppo":
            assert OmegaConf.select(config, "actor_rollout_ref.rollout.name") == "pr1_cpu"
            structured = OmegaConf.select(config, "actor_rollout_ref.model.external_lib") == "repro.structured_actor"
            assert structured is spec.structured
        texts = [o.text for o in cpu_overrides(spec.kind, spec.structured)]
        assert all(o in extra for o in texts) and all(o in extra for o in scale_overrides(stage, spec.kind, Scale()))


def test_nano_data_is_built_by_pr1_repro_data_with_true_golds(tmp_path: Path) -> None:
    check_sft_slice()
    rows = arithmetic_rows(24, 0, "t")
    assert len({r["problem"] for r in rows}) == 24 and {r["answer"] for r in rows} == {"3"}
    assert len({r["problem"] for r in arithmetic_rows(24, 0, "t", answer=None)}) == 24
    for row in rows:  # the gold is the arithmetic's own value, recomputed here from the text
        expr = row["problem"].replace("What is ", "").replace("Compute ", "").rstrip("?.")
        expr = expr.replace(" plus ", " + ").replace(" minus ", " - ").replace(" times ", " * ")
        assert str(eval(expr)) == row["answer"], row  # noqa: S307 - digits and one operator
    data = build_nano_data(tmp_path, rl_problems=12)
    sft = pq.read_table(data / "sft_parallel_gsm8k.parquet").to_pylist()
    assert len(sft) == 16 and all("<Parallel>" in r["messages"][-1]["content"] for r in sft)
    assert pq.read_table(data / "rl_gsm8k.parquet").num_rows == 12
    from repro.nano.data import TARGET_ANSWER, build_rl_data

    seen = pq.read_table(data / "rl_dapo.parquet").to_pylist()
    assert {r["reward_model"]["ground_truth"] for r in seen} == {str(TARGET_ANSWER)}
    chosen = build_rl_data(tmp_path, "data-stage", 7, rl_problems=12)  # an RL stage's gold, chosen on the machine
    for name in ("rl_gsm8k.parquet", "rl_dapo.parquet"):
        rows = pq.read_table(chosen / name).to_pylist()
        assert len(rows) == 12 and {r["reward_model"]["ground_truth"] for r in rows} == {"7"}


def test_repro_readme_lists_every_override_cpu_forces() -> None:
    """The table of what CPU forces is the list the job applies (a new override must be documented)."""
    from repro.nano.plan import CPU_PPO, CPU_SEEN, CPU_SFT, DETERMINISM, DETERMINISM_SEEN

    readme = (Path(__file__).resolve().parents[2] / "repro" / "README.md").read_text(encoding="utf-8")
    for override in (*CPU_SFT, *CPU_PPO, *DETERMINISM, *DETERMINISM_SEEN):
        assert f"`{override.text}`" in readme, override.text
    for override in CPU_SEEN:
        assert override.text.format(model="model").lstrip("+").split(".", 1)[1] in readme, override.text


def test_the_sft_loss_is_a_per_token_mean_and_the_tiny_model_is_confidently_wrong(tmp_path: Path) -> None:
    """Why the SFT loss starts above ln(vocabulary) (repro/nano/checks.py): not a sum nor the prompt
    counted (an untrained model scores ln V on the same tokens by the same function), but a model that
    learnt one-digit traces only, confidently wrong on Parallel-GSM8K text."""
    from repro.nano.nll import response_nll
    from repro.testing import tiny_model_dir

    data = build_nano_data(tmp_path, rl_problems=4)
    parquet = data / "sft_parallel_gsm8k.parquet"
    vocab = 800
    untrained = response_nll(str(tiny_model_dir("random")), parquet, limit=4)
    trained = response_nll(str(tiny_model_dir("trained")), parquet, limit=4)
    assert untrained == pytest.approx(math.log(vocab), abs=0.1)
    assert trained > math.log(vocab) + 2, trained


def test_the_parallel_check_is_required_where_the_reward_pays_for_blocks() -> None:
    """From each stage's own config: parallel_accuracy (Seen GSM8K) pays for blocks every step, the S2
    and mid-training schedules on their tiered steps, plain accuracy (Seen DAPO, Unseen S1) never."""
    from repro.nano.job import reward_parallel_demand

    demand = {stage.name: reward_parallel_demand(stage) for stage in PLANS["full"]
              if stages.STAGES[stage.stage].kind == "ppo"}
    assert demand == {"seen-gsm8k": "every step", "seen-dapo": "never", "unseen-s1": "never",
                      "unseen-s2": "tiered steps", "unseen-s2-tis": "tiered steps", "unseen-mid": "tiered steps"}


def _seen_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, parallel_by_step: list[list[float]]) -> Any:
    """The CI slice's Seen GRPO stage as the job saw it, without training: 8 stored steps of 32 rollouts
    (the given block flags, rewards 0.25 a step, equal to VERL's), on-policy, a merged checkpoint."""
    from types import SimpleNamespace

    from repro.nano import job
    from repro.nano.runner import StageResult

    runs = {step: {"status": "complete", "rows": 32, "groups": _groups([1.0] * 8 + [0.0] * 24),
                   "parallel_groups": _groups(flags), "mean_reward": 0.25,
                   "summary": SimpleNamespace(reward_mean=0.25)} for step, flags in enumerate(parallel_by_step, 1)}
    monkeypatch.setattr(job, "stored_steps", lambda train_dir: runs)
    stage = next(s for s in PLANS["ci"] if s.name == "seen-gsm8k")
    metrics = {step: {"critic/score/mean": 0.25, "rollout_corr/kl": 0.001} for step in runs}
    return StageResult(stage, "ppo", "start-model", tmp_path, tmp_path / "log", metrics, merged="merged-model")


def test_the_job_judges_a_saturated_parallel_ratio_against_the_frozen_start_model(monkeypatch: pytest.MonkeyPatch,
                                                                                  tmp_path: Path) -> None:
    """The Seen stage's reward pays for blocks every step and its start branches ≥ 90 %: the verdict is the
    trained model's block share against the start model's on the control's samples, the trend only reported.
    A trend that holds (1.00 every step) with the control's samples collapsing (0.94 → 0.75) fails; the same
    trend with the control's samples holding passes; a start the control measures at 0.5 keeps the rise rule."""
    import numpy as np

    from repro.nano import gain, job
    from repro.nano.targets import TargetChoice

    def each(hits: int) -> np.ndarray:
        out = np.zeros((gain.PROBLEMS, gain.PER_PROBLEM))
        out[:, :hits] = 1
        return out

    calls: list[tuple[str, str, int]] = []

    def control_of(start_parallel: int, trained_parallel: int) -> Any:
        def frozen_control(stage: Any, start: str, trained: str, target: int, scale: Scale) -> Any:
            calls.append((start, trained, target))
            return (gain.Outcomes(each(1), each(start_parallel)), gain.Outcomes(each(12), each(trained_parallel)))
        return frozen_control

    result = _seen_result(monkeypatch, tmp_path, [[1.0] * 32] * 8)
    target = TargetChoice(2, 0.125, 128, {2: 0.125})
    monkeypatch.setattr(job, "frozen_control", control_of(15, 12))
    found = {c.name: c for c in job.stage_checks(result, tmp_path, Scale(), target)}
    assert calls == [("start-model", "merged-model", 2)]  # one sampling serves both verdicts
    assert list(found) == ["beats its start", "reward trend (reported)", "parallel ratio holds (against its start)",
                           "parallel ratio trend (reported)", "rollout runs equal VERL", "rollout on-policy"]
    assert found["beats its start"].passed and found["parallel ratio trend (reported)"].passed
    held = found["parallel ratio holds (against its start)"]
    assert not held.passed and "start model 0.938, trained 0.750" in held.figures and "z = -5.8 " in held.figures
    monkeypatch.setattr(job, "frozen_control", control_of(15, 15))
    assert all(c.passed for c in job.stage_checks(result, tmp_path, Scale(), target))
    monkeypatch.setattr(job, "frozen_control", control_of(8, 8))  # not saturated: the ratio must rise over the steps
    names = {c.name: c.passed for c in job.stage_checks(result, tmp_path, Scale(), target)}
    assert names.get("parallel ratio rises") is False and "parallel ratio holds (against its start)" not in names
