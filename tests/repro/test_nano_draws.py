"""What makes the nano slice decide the same way on any machine: golds chosen from the start model, the
machine and weights recorded, trainers broken on purpose, and the table of many draws."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from repro.nano import provenance, targets
from repro.nano.checks import Z_MIN
from repro.testing import broken

ROOT = Path(__file__).resolve().parents[2]


def _response(answer: str, block: bool = True) -> str:
    body = "<Parallel><Path>1 + 1 = 2</Path><Path>2 = 2</Path></Parallel>\n<Summary>2</Summary>\n" if block else ""
    return f"{body}So it is {answer}.\nFinal Answer: {answer}"


def test_the_target_is_the_answer_that_earns_the_reward_most_often() -> None:
    """Counted by hand: 5 answers 4 (two without a block), 4 answer 7, 3 answer 2, one answers 99 (no
    one-digit problem has it), one has no final answer. Plain accuracy pays 4 (5 of 14); the
    parallel_accuracy reward pays only well-formed blocks, so there 7 wins (4 of 14 against 3)."""
    responses = ([_response("4")] * 3 + [_response("4", block=False)] * 2 + [_response("7")] * 4
                 + [_response("2")] * 3 + [_response("99"), "no answer at all"])

    def grade(rule: str):  # noqa: ANN202 - the reward's rule, on the text alone
        def earns(text: str, answer: int) -> bool:
            right = text.rstrip().endswith(f"Final Answer: {answer}")
            return right and ("<Parallel>" in text or rule == "accuracy")
        return earns

    plain = targets.pick_target(responses, grade("accuracy"), problems_needed=16, seed=0)
    assert (plain.target, plain.share, plain.rollouts) == (4, pytest.approx(5 / 14), 14)
    assert 99 not in plain.shares and plain.shares[7] == pytest.approx(4 / 14)
    blocks = targets.pick_target(responses, grade("parallel_accuracy"), problems_needed=16, seed=0)
    assert blocks.target == 7 and blocks.share == pytest.approx(4 / 14)
    with pytest.raises(Exception, match="Final Answer"):
        targets.pick_target(["nothing"], grade("accuracy"), problems_needed=16, seed=0)


def test_the_reward_rule_of_a_target_is_the_reward_functions() -> None:
    from repro.rewards import judge

    right_with_block = judge(_response("4"), "4")
    assert targets.earns(right_with_block, "parallel_accuracy") and targets.earns(right_with_block, "accuracy")
    right_plain = judge(_response("4", block=False), "4")
    assert targets.earns(right_plain, "accuracy") and not targets.earns(right_plain, "parallel_accuracy")
    assert not targets.earns(judge(_response("5"), "4"), "accuracy")


@pytest.mark.slow  # 16 fork-join rollouts of the structured tiny model: a few seconds
def test_the_structured_start_models_target_is_its_best_answer_whatever_the_draw() -> None:
    """Whatever weights this machine trained, the chosen gold is the candidate the start model earns
    the reward with most often (recounted here with the reward's own judge), never below another."""
    from repro.nano.data import arithmetic_rows
    from repro.rewards import judge
    from repro.testing import tiny_model_dir

    rows = arithmetic_rows(2, 3, "t", answer=None)
    responses = targets.sample_responses(str(tiny_model_dir("trained-structured")), rows, structured=True,
                                         response_length=96, max_path_tokens=24, per_problem=8, seed=3)
    assert len(responses) == 16 and sum("<Parallel>" in r for r in responses) >= 8  # the Unseen rollout branches
    # and its blocks are well formed: the structured model also learnt the fork-join layout (two paths end to
    # end, then the summary). Measured 0.92-0.94 of 64 rollouts on four seeds (0.31-0.80 before it did);
    # at 0.85 the chance of fewer than 10 of 16 is 0.6 %, at 0.92 0.01 %
    well_formed = [judge(r, "0") for r in responses]
    assert sum(j.format_ok and j.has_parallel for j in well_formed) >= 10, responses
    choice = targets.pick_target(responses, lambda r, a: judge(r, str(a)).correct, problems_needed=16, seed=0)
    recount = {a: sum(judge(r, str(a)).correct for r in responses) / 16 for a in choice.shares}
    assert recount == pytest.approx(choice.shares) and choice.share == max(recount.values())


def test_the_record_names_the_machine_and_compare_refuses_other_weights(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    digest = provenance.weights_digest(model)
    import hashlib

    expected = hashlib.sha256()
    expected.update(b"model.safetensors")
    expected.update(b"weights")
    assert digest == expected.hexdigest()
    machine = provenance.machine_record()
    assert machine["torch"] and machine["torch_blas"] and machine["cores"] >= 1 and machine["cpu"]
    here = {"start_weights": {"seen-sft": digest}, "machine": machine}
    assert provenance.same_start(here, here).passed
    there = {"start_weights": {"seen-sft": "0" * 64}, "machine": {**machine, "cpu_flags_sha256": "x", "cpu": "Other"}}
    verdict = provenance.same_start(here, there)
    assert not verdict.passed and "a new draw" in verdict.figures and "other CPUs" in verdict.figures
    assert not provenance.same_start(here, {"machine": machine}).passed


def test_broken_trainers_are_what_they_say(monkeypatch: pytest.MonkeyPatch) -> None:
    assert broken.overrides("lr0", False) == ["actor_rollout_ref.actor.optim.lr=0"]
    assert broken.overrides("ok", True) == [] and broken.overrides("nospans", True) == []
    with pytest.raises(ValueError, match="unknown breakage"):
        broken.overrides("slow", False)
    import torch
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    monkeypatch.setenv(broken.BREAK_ENV, "noadv")
    broken.apply()
    rewards, mask = torch.tensor([[0.0, 1.0], [0.0, -1.0]]), torch.ones(2, 2)
    advantages, returns = get_adv_estimator_fn(broken.ZERO_ADVANTAGE)(token_level_rewards=rewards, response_mask=mask,
                                                                      index=None)
    assert torch.count_nonzero(advantages) == 0 and torch.count_nonzero(returns) == 0
    # sign: GRPO's advantages of the negated rewards; a group (0, 1, 1, 0) by hand: mean 0.5, SD 0.577
    monkeypatch.setenv(broken.BREAK_ENV, "sign")
    broken.apply()
    assert broken.overrides("sign", False) == [f"algorithm.adv_estimator={broken.NEGATED_GRPO}"]
    rewards, mask = torch.tensor([[0.0], [1.0], [1.0], [0.0]]), torch.ones(4, 1)
    advantages, _ = get_adv_estimator_fn(broken.NEGATED_GRPO)(token_level_rewards=rewards, response_mask=mask,
                                                              index=np.array(["a"] * 4))
    expected = 0.5 / np.std([0, 1, 1, 0], ddof=1)  # the right answers are pushed down
    assert advantages[:, 0].tolist() == pytest.approx([expected, -expected, -expected, expected], abs=1e-4)
    import repro.structured_actor as actor

    monkeypatch.setattr(actor, "batch_spans", actor.batch_spans)  # restored after the test
    monkeypatch.setenv(broken.BREAK_ENV, "nospans")
    broken.apply()
    assert actor.batch_spans(object(), 3) is None


def _draw(folder: Path, d: int, variant: str, reward_z: float, passed: bool) -> None:
    folder.mkdir(parents=True)
    checks = [{"stage": "unseen-s2", "check": "reward rises", "passed": passed,
               "figures": f"mean reward per rollout by step 1: -0.5; z = {reward_z:.1f} over 32 prompt groups"},
              {"stage": "unseen-s2", "check": "rollout runs equal VERL", "passed": True, "figures": "8 steps"}]
    (folder / "nano.json").write_text(json.dumps({"checks": checks, "draw": {"variant": variant}}), encoding="utf-8")


def test_the_draws_table_counts_margins_and_the_normal_tail(tmp_path: Path) -> None:
    for d, z in enumerate([5.0, 6.0, 7.0]):
        _draw(tmp_path / "ok" / f"draw-{d}", d, "ok", z, True)
    for d, z in enumerate([0.5, -1.0, 1.5]):
        _draw(tmp_path / "lr0" / f"draw-{d}", d, "lr0", z, False)
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_nano_draws.py"), "--summarise",
                           str(tmp_path / "ok"), str(tmp_path / "lr0")], capture_output=True, text=True, check=True)
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith(("ok ", "lr0 "))}
    ok = lines["ok"].split()
    # passed 3 of 3; mean 6.00, SD 1.00, min 5.00, max 7.00; margin 5.0 - 2.5; normal tail P(z < 2.5)
    assert ok[ok.index("of") - 1: ok.index("of") + 2] == ["3", "of", "3"]
    numbers = [float(x) for x in ok[ok.index("of") + 2:]]
    tail = 0.5 * math.erfc((6.0 - Z_MIN) / 1.0 / math.sqrt(2))
    assert numbers[:5] == pytest.approx([6.0, 1.0, 5.0, 7.0, 5.0 - Z_MIN]) and numbers[5] == pytest.approx(tail, rel=0.05)
    zero = lines["lr0"].split()
    assert zero[zero.index("of") - 1] == "0" and float(zero[zero.index("of") + 6]) == pytest.approx(Z_MIN - 1.5)
