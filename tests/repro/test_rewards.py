"""Rewards: every mode on known responses, the step schedule, and the path through VERL's own
reward loading (``get_custom_reward_fn`` / ``load_reward_manager`` / ``RewardLoopWorker``) with a
real ``DataProto`` whose responses are token ids with the tags as special tokens."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from repro import rewards
from repro.rewards import compute_score, tiered_active

GOLD = "72"
PARALLEL_OK = "Start.\n<Parallel><Path>48/2=24</Path><Path>half of 48 is 24</Path></Parallel>\n<Summary>24 in May</Summary>\n48+24=72\nFinal Answer: 72"
PARALLEL_WRONG = PARALLEL_OK.replace("Final Answer: 72", "Final Answer: 70")
SEQUENTIAL_OK = "48/2=24, 48+24=72.\nFinal Answer: 72"
MALFORMED_OK = "<Parallel><Path>only one path</Path></Parallel>\n<Summary>x</Summary>\nFinal Answer: 72"
UNCLOSED_OK = "<Parallel><Path>a</Path><Path>b</Path></Parallel>\n<Summary>never closed\nFinal Answer: 72"
ANSWER_IN_PATH = (
    "<Parallel><Path>Final Answer: 72</Path><Path>b</Path></Parallel>\n<Summary>s</Summary>\nno answer here"
)

#: pr1-eval's strict readings (format_check=strict, gsm8k_answer=grader, miss_score=-1).
STRICT = {"format_check": "strict", "gsm8k_answer": "grader", "miss_score": -1.0}
STRICT_EXPECTED = {
    # response: (accuracy, parallel_accuracy, tiered)
    PARALLEL_OK: (1.0, 1.0, 1.2),
    PARALLEL_WRONG: (-1.0, -1.0, -1.0),
    SEQUENTIAL_OK: (1.0, -1.0, 1.0),
    MALFORMED_OK: (1.0, -1.0, -1.0),
    UNCLOSED_OK: (1.0, -1.0, -1.0),
    ANSWER_IN_PATH: (-1.0, -1.0, -1.0),
    "": (-1.0, -1.0, -1.0),
}
#: The official readings (the defaults): the lenient format check passes the unclosed summary; the
#: GSM8K stage reads the first "Final Answer:" number anywhere (inside a path too) and a miss is 0.
OFFICIAL_EXPECTED = {
    PARALLEL_OK: (1.0, 1.0, 1.2),
    PARALLEL_WRONG: (-1.0, 0.0, -1.0),
    SEQUENTIAL_OK: (1.0, 0.0, 1.0),
    MALFORMED_OK: (1.0, 0.0, -1.0),  # one path: the official check fails it too
    UNCLOSED_OK: (1.0, 1.0, 1.2),
    ANSWER_IN_PATH: (-1.0, 1.0, -1.0),
    "": (-1.0, 0.0, -1.0),
}


@pytest.mark.parametrize("response", list(OFFICIAL_EXPECTED))
def test_plain_modes_on_known_responses(response: str) -> None:
    modes = ("accuracy", "parallel_accuracy", "tiered")
    official = tuple(compute_score("gsm8k", response, GOLD, mode=m)["score"] for m in modes)
    strict = tuple(compute_score("gsm8k", response, GOLD, mode=m, **STRICT)["score"] for m in modes)
    assert official == OFFICIAL_EXPECTED[response]
    assert strict == STRICT_EXPECTED[response]


def test_bad_reading_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="format_check='loose'"):
        compute_score("d", SEQUENTIAL_OK, GOLD, format_check="loose")


def test_equivalent_answer_graded_by_math_verify_off_the_main_thread() -> None:
    """VERL calls a sync reward from a worker thread; math-verify must still work (worker processes)."""
    response = "So the ratio is one half.\nFinal Answer: $\\frac{1}{2}$"
    with ThreadPoolExecutor(2) as pool:
        right, wrong = pool.map(lambda gold: compute_score("x", response, gold, mode="accuracy"), ["0.5", "0.25"])
    assert (right["score"], right["acc"], right["acc_paper"]) == (1.0, 1.0, 0.0), "the paper's string checker misses it"
    assert wrong["score"] == -1.0


def test_alternating_schedule_and_mid_training_switch() -> None:
    assert [s for s in range(1, 31) if tiered_active(s)] == [9, 10, 19, 20, 29, 30]
    assert [s for s in range(1, 13) if tiered_active(s, window=4, tiered_steps=1)] == [4, 8, 12]
    for step, tiered in ((1, False), (8, False), (9, True), (10, True), (11, False), (200, True)):
        out = compute_score("d", SEQUENTIAL_OK, GOLD, mode="alternating", step=step)
        assert out["tiered_active"] == float(tiered) and out["score"] == 1.0
        assert compute_score("d", PARALLEL_OK, GOLD, mode="alternating", step=step)["score"] == (1.2 if tiered else 1.0)
        assert compute_score("d", MALFORMED_OK, GOLD, mode="alternating", step=step)["score"] == (
            -1.0 if tiered else 1.0
        )
    assert compute_score("d", PARALLEL_OK, GOLD, mode="mid_training", step=199)["score"] == 1.2
    assert compute_score("d", PARALLEL_OK, GOLD, mode="mid_training", step=209)["score"] == 1.0  # after 200: accuracy
    assert compute_score("d", PARALLEL_OK, GOLD, mode="mid_training", step=19, switch_step=10)["score"] == 1.0
    # the step may also come from extra_info (how VERL delivers it)
    assert compute_score("d", PARALLEL_OK, GOLD, {"global_step": 9}, mode="alternating")["score"] == 1.2


def test_step_dependent_modes_need_a_step_and_bad_modes_fail() -> None:
    with pytest.raises(ValueError, match="global step"):
        compute_score("d", SEQUENTIAL_OK, GOLD, mode="alternating")
    with pytest.raises(ValueError, match="unknown reward mode"):
        compute_score("d", SEQUENTIAL_OK, GOLD, mode="format")
    with pytest.raises(ValueError):
        tiered_active(3, window=4, tiered_steps=5)


def test_tag_modes_refuse_a_manager_that_strips_tags() -> None:
    verl_info = {"num_turns": None, "rollout_reward_scores": {}}
    with pytest.raises(RuntimeError, match="TagPreservingRewardManager"):
        compute_score("d", "x", GOLD, verl_info, mode="tiered")
    assert compute_score("d", SEQUENTIAL_OK, GOLD, verl_info, mode="accuracy")["score"] == 1.0


# ---------- through VERL's own loading code ----------


@pytest.fixture(scope="module")
def verl_setup():
    from hydra import compose, initialize_config_dir
    from transformers import AutoTokenizer

    from repro.stages import CONFIG_DIR
    from repro.testing import tiny_model_dir

    model = tiny_model_dir()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="unseen_s2", overrides=[f"actor_rollout_ref.model.path={model}",
                                                          "repro.rollout_runs.dir=null"])
    return cfg, AutoTokenizer.from_pretrained(str(model))


def make_batch(tokenizer, responses: list[str], step: int | None, with_eos: bool = True):
    """A DataProto shaped like the agent loop's reward batch: left-padded prompts, right-padded responses."""
    from verl import DataProto

    prompt = tokenizer.encode(
        "<|im_start|>user\nWhat is 48+24?<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
    )
    resp = [
        tokenizer.encode(r, add_special_tokens=False) + ([tokenizer.eos_token_id] if with_eos else [])
        for r in responses
    ]
    width = max(len(r) for r in resp) + 2
    responses_t = torch.full((len(resp), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(resp), len(prompt) + width), dtype=torch.long)
    mask[:, : len(prompt)] = 1
    for i, r in enumerate(resp):
        responses_t[i, : len(r)] = torch.tensor(r)
        mask[i, len(prompt) : len(prompt) + len(r)] = 1
    prompts = torch.tensor([prompt] * len(resp))
    non_tensor = {
        "data_source": np.array(["dapo_math_17k"] * len(resp), dtype=object),
        "reward_model": np.array([{"ground_truth": GOLD, "style": "rule"}] * len(resp), dtype=object),
        "extra_info": np.array([{"index": i} for i in range(len(resp))], dtype=object),
    }
    if step is not None:
        non_tensor["global_steps"] = np.array([step] * len(resp))
    tensors = {
        "prompts": prompts,
        "responses": responses_t,
        "attention_mask": mask,
        "input_ids": torch.cat([prompts, responses_t], 1),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensor)


def run_manager(manager, batch) -> list[float]:
    loop = manager.loop
    return [loop.run_until_complete(manager.run_single(batch[i : i + 1]))["reward_score"] for i in range(len(batch))]


@pytest.mark.parametrize(
    ("mode", "step", "expected"),
    [
        ("accuracy", None, [1.0, -1.0, 1.0, 1.0]),
        ("parallel_accuracy", None, [1.0, 0.0, 0.0, 0.0]),
        ("tiered", None, [1.2, -1.0, 1.0, -1.0]),
        ("alternating", 3, [1.0, -1.0, 1.0, 1.0]),
        ("alternating", 10, [1.2, -1.0, 1.0, -1.0]),
        ("mid_training", 200, [1.2, -1.0, 1.0, -1.0]),
        ("mid_training", 210, [1.0, -1.0, 1.0, 1.0]),
    ],
)
def test_every_mode_through_verl_reward_loading(verl_setup, mode: str, step: int | None, expected: list[float]) -> None:
    from omegaconf import open_dict
    from verl.trainer.ppo.reward import load_reward_manager

    from repro.reward_manager import TagPreservingRewardManager

    cfg, tokenizer = verl_setup
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.reward.custom_reward_function.reward_kwargs.mode = mode
    manager = load_reward_manager(cfg, tokenizer)
    assert type(manager).__name__ == TagPreservingRewardManager.__name__
    batch = make_batch(tokenizer, [PARALLEL_OK, PARALLEL_WRONG, SEQUENTIAL_OK, MALFORMED_OK], step)
    assert run_manager(manager, batch) == expected


def test_reward_loop_worker_end_to_end(verl_setup) -> None:
    """VERL's RewardLoopWorker builds the tokenizer and our manager from the stage config itself."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    cfg, tokenizer = verl_setup
    worker = RewardLoopWorker(cfg)
    batch = make_batch(tokenizer, [PARALLEL_OK], step=20)
    out = worker.reward_manager.loop.run_until_complete(worker.compute_score(batch[0:1]))
    assert out["reward_score"] == 1.2
    assert out["reward_extra_info"]["step"] == 20.0 and out["reward_extra_info"]["has_parallel"] == 1.0


def test_plain_naive_manager_is_refused_for_tag_modes(verl_setup) -> None:
    """VERL's default manager deletes the tags (skip_special_tokens=True); the reward refuses it."""
    from omegaconf import open_dict
    from verl.trainer.ppo.reward import load_reward_manager

    cfg, tokenizer = verl_setup
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.reward.reward_manager.source = "register"
        cfg.reward.reward_manager.name = "naive"
        cfg.reward.custom_reward_function.reward_kwargs.mode = "tiered"
    manager = load_reward_manager(cfg, tokenizer)
    batch = make_batch(tokenizer, [PARALLEL_OK], step=None)
    assert "<Parallel>" not in tokenizer.decode(batch.batch["responses"][0], skip_special_tokens=True)
    with pytest.raises(RuntimeError, match="strips special tokens"):
        run_manager(manager, batch)


def test_mode_list_is_documented() -> None:
    assert set(rewards.MODES) == {"accuracy", "parallel_accuracy", "tiered", "alternating", "mid_training"}
