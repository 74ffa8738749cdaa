"""repro's rollout writer driven the way a job drives it: VERL 0.9.1's default (V1) agent-loop
worker rolls out with the fork-join loop on the fake server, streams each trajectory to VERL's
RewardLoopWorker, which loads our reward manager from the stage config; two training steps and
one validation must come out as three complete runs whose records match what the worker put
into its transfer queue."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pr1_eval.protocol.decode import decode_keeping_tags
from pr1_eval.store.run_store import RunStore

PROMPTS = {"p1": ("What is 3 + 4?", "7"), "p2": ("What is 5 + 6?", "11")}
RESPONSE_LENGTH = 96


class RecordingQueue:
    """Stands in for ``transfer_queue`` in ``agent_loop_tq`` (no TransferQueue controller on CPU)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.fields: list[Any] = []

    def init(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def async_kv_put(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def async_kv_batch_put(self, keys: Any, partition_id: Any, fields: Any = None, **kwargs: Any) -> None:
        self.keys += list(keys)
        self.fields.append(fields)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    from hydra import compose, initialize_config_dir
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.stages import CONFIG_DIR
    from repro.testing import tiny_model_dir

    base = tmp_path_factory.mktemp("job")
    val = base / "rl_val.parquet"
    prompt = [{"role": "user", "content": PROMPTS["p1"][0]}]  # VERL's own dataset counts what it validates
    pq.write_table(pa.Table.from_pylist([{"data_source": "aime24", "prompt": prompt, "__rollout_n__": 2}]), val)
    path = tiny_model_dir()
    overrides = [
        f"actor_rollout_ref.model.path={path}", f"data.max_response_length={RESPONSE_LENGTH}",
        "data.max_prompt_length=400", "actor_rollout_ref.rollout.agent.num_workers=1", "reward.num_workers=1",
        "data.train_batch_size=2", "actor_rollout_ref.rollout.n=2", f"data.val_files={val}",
        f"repro.rollout_runs.dir={base / 'runs'}", "repro.rollout_runs.chunk=3",
    ]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="unseen_s2", overrides=overrides)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path)).eval()
    return cfg, tok, model, base / "runs"


def prompt_batch(step: int, split: str, task: str, uids: list[str]):
    import torch
    from verl.utils import tensordict_utils as tu

    ids = list(PROMPTS)[: len(uids)]
    rows: dict[str, Any] = {
        "raw_prompt": np.array([[{"role": "user", "content": PROMPTS[i][0]}] for i in ids], dtype=object),
        "data_source": np.array([task] * len(ids), dtype=object),
        "reward_model": np.array([{"ground_truth": PROMPTS[i][1], "style": "rule"} for i in ids], dtype=object),
        "extra_info": np.array([{"index": n, "id": i, "problem": PROMPTS[i][0], "split": split}
                                for n, i in enumerate(ids)], dtype=object),
        "index": torch.arange(len(ids)),
        "uid": np.array(uids, dtype=object),
        "agent_name": np.array(["pr1_forkjoin"] * len(ids), dtype=object),
    }
    if split == "test":
        rows["__rollout_n__"] = np.array([2] * len(ids))
    batch = tu.get_tensordict(rows)
    tu.assign_non_tensor_data(batch, "global_steps", step)  # as trainer_base._next_train_batch / _validate do
    if split == "test":
        tu.assign_non_tensor_data(batch, "validate", True)
    return batch


def test_two_steps_and_a_validation_become_complete_runs(job, monkeypatch, verl_event_loop) -> None:
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.v1 import agent_loop_tq

    from repro.testing.fake_server import HFServerManager

    cfg, tok, model, runs = job
    queue = RecordingQueue()
    monkeypatch.setattr(agent_loop_tq, "tq", queue)
    reward_worker = RewardLoopWorker(cfg)
    writer = reward_worker.reward_manager.rollout_runs
    assert writer is not None and writer.options.train_rows == 4 and writer.options.val_rows == 2

    class Handle:
        class compute_score:  # noqa: N801 - the shape of a Ray actor method handle
            @staticmethod
            async def remote(data):
                return await reward_worker.compute_score(data)

    fake = HFServerManager(model, tok, stop_bias=6.0, seed=3)
    worker = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__(cfg, llm_client=fake,
                                                                  reward_loop_worker_handles=[Handle()])

    async def rollout(batch) -> None:
        await worker.generate_sequences(batch)
        while worker.background_tasks:
            await asyncio.gather(*list(worker.background_tasks))

    loop = verl_event_loop  # the loop the reward manager took when it was built
    loop.run_until_complete(rollout(prompt_batch(1, "train", "dapo_math_17k", ["a1", "a2"])))
    loop.run_until_complete(rollout(prompt_batch(2, "train", "dapo_math_17k", ["b1", "b2"])))
    loop.run_until_complete(rollout(prompt_batch(2, "test", "aime24", ["v1"])))
    writer.close()

    put = {}  # queue key {uid}_{session}_{index} → what the worker stored for training
    for fields in queue.fields:
        for i in range(len(fields["uid"])):
            put[(str(fields["uid"][i]), int(fields["session_id"][i]))] = (
                [int(t) for t in fields["responses"][i].tolist()], float(fields["rm_scores"][i].sum()))
    uid_problem = {"a1": "p1", "a2": "p2", "b1": "p1", "b2": "p2", "v1": "p1"}
    for kind, step, uids, task in (("train", 1, ["a1", "a2"], "dapo_math_17k"),
                                   ("train", 2, ["b1", "b2"], "dapo_math_17k"), ("val", 2, ["v1"], "aime24")):
        store = RunStore(runs / kind / f"step-{step:06d}")
        record = store.read_run()
        assert record.status == "complete" and record.training is not None
        assert record.training.step == step and record.training.format == "repro"
        assert record.training.kind == ("validation" if kind == "val" else "train")
        samples = {(s.problem_id, s.sample_idx): s for s in store.read_records()}
        want = {(uid_problem[u], s): put[(u, s)] for u in uids for s in range(2)}
        assert set(samples) == set(want)
        for key, (ids, reward) in want.items():
            sample = samples[key]
            assert sample.task == task and sample.reward == pytest.approx(reward)
            assert sample.n_response_tokens == len(ids)
            assert sample.response == decode_keeping_tags(tok, ids)
            assert sample.n_blocks == sample.response.count("<Parallel>")
            assert sample.finish_reason == ("length" if len(ids) >= RESPONSE_LENGTH else "stop")
            assert sample.problem == PROMPTS[key[0]][0] and sample.gold == PROMPTS[key[0]][1]
            assert sample.n_prompt_tokens and sample.engine_calls and sample.position_unit == "token"
        summary = record.training.summary
        assert summary.n_samples == len(want) and summary.k == 2
        assert summary.reward_mean == pytest.approx(sum(r for _, r in want.values()) / len(want))
        assert summary.parallel_ratio == pytest.approx(
            sum("<Parallel>" in s.response for s in samples.values()) / len(samples))
    assert any("<Parallel>" in s.response for s in RunStore(runs / "train" / "step-000001").read_records())


def test_a_row_scored_outside_a_trainer_is_only_scored(job, tmp_path: Path, verl_event_loop) -> None:
    """No ``global_steps``: the reward is computed as always and nothing is written."""
    import torch
    from omegaconf import open_dict
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    cfg, tok, _, _ = job
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.repro.rollout_runs.dir = str(tmp_path / "runs")
        cfg.reward.custom_reward_function.reward_kwargs.mode = "accuracy"  # a mode that needs no step
    manager = load_reward_manager(cfg, tok)
    prompt = tok.encode("<|im_start|>user\nWhat is 3+4?<|im_end|>\n", add_special_tokens=False)
    response = tok.encode("Final Answer: 7", add_special_tokens=False) + [tok.eos_token_id]
    data = DataProto.from_dict(
        tensors={"prompts": torch.tensor([prompt]), "responses": torch.tensor([response]),
                 "attention_mask": torch.ones(1, len(prompt) + len(response), dtype=torch.long)},
        non_tensors={"data_source": np.array(["dapo"], dtype=object),
                     "reward_model": np.array([{"ground_truth": "7"}], dtype=object),
                     "extra_info": np.array([{"id": "p"}], dtype=object)})
    out = manager.loop.run_until_complete(manager.run_single(data))
    manager.rollout_runs.close()
    assert out["reward_score"] == 1.0
    assert not list((tmp_path / "runs").glob("*/step-*"))
