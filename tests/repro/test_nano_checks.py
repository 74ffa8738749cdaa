"""The nano job's pieces that need no trainer: VERL's metric lines read back, the checks' verdicts on
good and broken runs (a frozen rollout server, a flat reward, a short stored step), the overrides
composed onto the real stage configs, and the nano data built by ``pr1-repro data`` itself."""

from __future__ import annotations

import math
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


def test_welch_z_matches_a_hand_computation() -> None:
    before, after = [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]
    # means 0.25 and 0.75, variances 0.25 each (n-1): se = sqrt(0.25/4 + 0.25/4) = 0.35355
    assert checks.welch_z(before, after) == pytest.approx(0.5 / math.sqrt(0.125))
    assert checks.welch_z([0.0, 0.0], [1.0, 1.0]) == math.inf


def test_reward_check_passes_a_learned_task_and_fails_noise() -> None:
    learned = {1: [0.0] * 14 + [1.0] * 2, 2: [0.0] * 12 + [1.0] * 4, 3: [1.0] * 12 + [0.0] * 4, 4: [1.0] * 15 + [0.0]}
    assert checks.reward_rises("s", learned).passed
    flat = {s: [0.0] * 12 + [1.0] * 4 for s in range(1, 7)}
    assert not checks.reward_rises("s", flat).passed
    assert not checks.reward_rises("s", {1: [1.0]}).passed
    reported = checks.reward_rises("s", flat, required=False)
    assert reported.passed and reported.name == "reward trend (reported)" and "z = 0.0" in reported.figures


def test_parallel_ratio_check_rises_holds_or_reports() -> None:
    rising = {1: [0.0] * 12 + [1.0] * 4, 2: [0.0] * 10 + [1.0] * 6, 3: [1.0] * 12 + [0.0] * 4, 4: [1.0] * 15 + [0.0]}
    verdict = checks.parallel_ratio("s", rising, "every step")
    assert verdict.passed and verdict.name == "parallel ratio rises" and "1: 0.25" in verdict.figures
    flat_low = {s: [0.0] * 12 + [1.0] * 4 for s in range(1, 7)}
    assert not checks.parallel_ratio("s", flat_low, "every step").passed
    saturated = {s: [1.0] * 16 for s in range(1, 7)}
    held = checks.parallel_ratio("s", saturated, "every step")
    assert held.passed and held.name == "parallel ratio holds" and "saturated" in held.figures
    falling = {**saturated, 4: [1.0] * 10 + [0.0] * 6, 5: [1.0] * 10 + [0.0] * 6, 6: [1.0] * 9 + [0.0] * 7}
    assert not checks.parallel_ratio("s", falling, "every step").passed  # 19 of 48 fell: z = -(19/48)/sqrt((19/48)(29/48)/47) = -5.5
    for demand in ("tiered steps", "never"):
        reported = checks.parallel_ratio("s", falling, demand)
        assert reported.passed and reported.name == "parallel ratio (reported)"
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
    from repro.nano.data import TARGET_ANSWER, UNSEEN_DATA, UNSEEN_TARGET_ANSWER

    unseen = pq.read_table(tmp_path / UNSEEN_DATA / "rl_dapo.parquet").to_pylist()
    assert len(unseen) == 12 and {r["reward_model"]["ground_truth"] for r in unseen} == {str(UNSEEN_TARGET_ANSWER)}
    seen = pq.read_table(data / "rl_dapo.parquet").to_pylist()
    assert {r["reward_model"]["ground_truth"] for r in seen} == {str(TARGET_ANSWER)}


def test_the_start_model_writes_the_target_answer_often_enough_to_learn() -> None:
    """Why the RL golds are all 3 (repro/nano/data.py): the trained tiny model answers 3 far more
    often than chance allows for a learnable signal, whatever the problem. If a new tiny model stops
    doing so, the nano job's reward check has nothing to reinforce: this test says so first."""
    import re

    from pr1_eval.engines.base import GenerationRequest, SamplingConfig
    from pr1_eval.engines.hf import HFEngine
    from pr1_eval.inputs.prompts import load_template
    from repro.nano.data import TARGET_ANSWER
    from repro.testing import tiny_model_dir

    engine = HFEngine(str(tiny_model_dir("trained")), device="cpu", dtype="float32")
    template = load_template("parallel_r1_v3").text
    tok = engine.tokenizer
    requests = []
    for row in arithmetic_rows(8, 0, "t"):
        text = tok.apply_chat_template([{"role": "user", "content": template.replace("{problem}", row["problem"])}],
                                       add_generation_prompt=True, tokenize=False)
        requests.append(GenerationRequest(row["id"], tok(text, add_special_tokens=False)["input_ids"], n=8, seed=5))
    outs = engine.generate(requests, SamplingConfig(temperature=1.0, max_new_tokens=64, seed=5))
    answers = [(re.findall(r"Final Answer:\s*(-?\d+)", c.text) or [None])[-1] for comps in outs for c in comps]
    share = answers.count(str(TARGET_ANSWER)) / len(answers)
    assert share >= 0.08, f"the tiny model answers {TARGET_ANSWER} in {share:.0%} of 64 samples"


def test_repro_readme_lists_every_override_cpu_forces() -> None:
    """The table of what CPU forces is the list the job applies (a new override must be documented)."""
    from repro.nano.plan import CPU_PPO, CPU_SEEN, CPU_SFT, DETERMINISM, DETERMINISM_SEEN

    readme = (Path(__file__).resolve().parents[2] / "repro" / "README.md").read_text(encoding="utf-8")
    for override in (*CPU_SFT, *CPU_PPO, *DETERMINISM, *DETERMINISM_SEEN):
        assert f"`{override.text}`" in readme, override.text
    for override in CPU_SEEN:
        assert override.text.format(model="model").lstrip("+").split(".", 1)[1] in readme, override.text


@pytest.mark.slow  # 32 fork-join rollouts: about 5 s
def test_the_structured_start_model_gets_the_unseen_target_right_often_enough() -> None:
    """Why the Unseen RL golds are all UNSEEN_TARGET_ANSWER (repro/nano/data.py): sampled as the Unseen
    stages sample it (fork-join, 96-token responses, paths capped at 24) on problems whose answer it
    is, the structured tiny model is right often enough for GRPO to have something to reinforce."""
    import asyncio

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1_eval.inputs.prompts import load_template
    from pr1_eval.protocol.eos import eos_token_ids
    from pr1_eval.protocol.tags import resolve_tag_ids
    from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput
    from repro.nano.data import UNSEEN_TARGET_ANSWER
    from repro.rewards import judge
    from repro.testing import tiny_model_dir
    from repro.testing.fake_server import HFServerManager

    path = str(tiny_model_dir("trained-structured"))
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    server = HFServerManager(model, tok, seed=0, global_steps=None)

    async def generate(prompt: list[int], stops: list[int], max_tokens: int, temperature: float | None) -> RawOutput:
        params = {"stop_token_ids": stops, "max_tokens": max_tokens, "temperature": temperature or 1.0}
        out = await server.generate("r", prompt_ids=prompt, sampling_params=params)
        return RawOutput(list(out.token_ids), None)

    fork = ForkJoinRollout(resolve_tag_ids(tok), eos_token_ids(tok, model.generation_config),
                           list(tok.encode("\n", add_special_tokens=False)),
                           ForkJoinConfig(response_length=96, max_path_response_length=24), generate)
    template = load_template("parallel_r1_v3").text
    right = total = 0
    for row in arithmetic_rows(4, 0, "t", answer=UNSEEN_TARGET_ANSWER):
        text = tok.apply_chat_template([{"role": "user", "content": template.replace("{problem}", row["problem"])}],
                                       add_generation_prompt=True, tokenize=False)
        prompt = list(tok(text, add_special_tokens=False)["input_ids"])
        for _ in range(8):
            traj = asyncio.run(fork.run(prompt))
            response = tok.decode(traj.ids, skip_special_tokens=False).replace(tok.eos_token, "")
            right += judge(response, row["answer"]).correct
            total += 1
    assert right / total >= 0.06, f"the structured tiny model is right on {right} of {total} rollouts"


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
