"""The fork-join rollout: repro's adapter of the protocol machine on scripted raw engines, then VERL's
agent-loop machinery on CPU (registration, instantiation the way ``AgentLoopWorker`` does it, the
default V1 trainer's ``AgentLoopWorkerTQ`` end to end with the weight versions its metrics cast,
and the legacy worker with post-processing and the streamed reward) with a fake server manager
backed by the tiny model."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import parse_structure
from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput

TAGS = {
    T.PARALLEL_OPEN: 101,
    T.PARALLEL_CLOSE: 102,
    T.PATH_OPEN: 103,
    T.PATH_CLOSE: 104,
    T.SUMMARY_OPEN: 105,
    T.SUMMARY_CLOSE: 106,
}
EOS, NL = 0, 10


class Script:
    """A fake vLLM server: answers by the stop token it is asked for with raw ids (stop token or EOS
    last), and records every call."""

    def __init__(self, main: list[list[int]], path: list[list[int]], summary: list[list[int]]) -> None:
        self.queues = {101: list(main), 104: list(path), 106: list(summary), None: list(main)}
        self.calls: list[tuple[list[int], list[int], int]] = []

    async def __call__(self, prompt: list[int], stops: list[int], max_tokens: int,
                       temperature: float | None = None) -> RawOutput:
        self.calls.append((list(prompt), list(stops), max_tokens))
        key = stops[0] if stops else None
        queue = self.queues[key] if key in self.queues else self.queues[None]
        out = (queue.pop(0) if queue else [EOS])[:max_tokens]
        return RawOutput(out, [-0.5] * len(out))


def rollout(script: Script, **kw) -> ForkJoinRollout:
    return ForkJoinRollout(TAGS, [EOS], [NL], ForkJoinConfig(**{"response_length": 200, **kw}), script)


def test_protocol_layout_mask_and_isolation() -> None:
    script = Script(main=[[1, 2, 101], [3, EOS]], path=[[20, 21, 104], [30, 104]], summary=[[40, 106]])
    t = asyncio.run(rollout(script).run([9, 9]))
    assert t.ids == [1, 2, 101, 103, 20, 21, 104, 103, 30, 104, 102, NL, 105, 40, 106, 3, EOS]
    inserted = {3, 7, 10, 11, 12}  # <Path> x2, </Parallel>, "\n", <Summary>
    assert [i for i, m in enumerate(t.mask) if m == 0] == sorted(inserted)
    assert [lp for i, lp in enumerate(t.log_probs) if i in inserted] == [0.0] * 5
    assert t.log_probs[-1] == -0.5, "the final EOS is trained on, with its sampled log-prob"
    path_calls = [c for c in script.calls if c[1] == [104]]
    assert len(path_calls) == 2 and path_calls[0][0] == path_calls[1][0] == [9, 9, 1, 2, 101, 103], (
        "paths see only the prefix"
    )
    summary_call = next(c for c in script.calls if c[1] == [106])
    assert summary_call[0][-5:] == [30, 104, 102, NL, 105]
    assert (t.blocks, t.engine_calls, t.inserted_tokens, t.engine_closed_tags) == (1, 4, 5, 0)
    assert t.critical_path_tokens == 3 + 4 + 3 + 2 + 2  # main, longest path with tags, join, summary, main + EOS


def test_engine_closes_tags_at_eos_and_can_train_on_inserted_tokens() -> None:
    script = Script(main=[[101], [EOS]], path=[[20, EOS], [30, 104]], summary=[[40, EOS]])
    t = asyncio.run(rollout(script, train_on_inserted_tokens=True).run([9]))
    assert t.ids == [101, 103, 20, 104, 103, 30, 104, 102, NL, 105, 40, 106, EOS]
    assert t.engine_closed_tags == 2 and all(m == 1 for m in t.mask)
    assert t.generated_mask.count(False) == 7  # still recorded as inserted


def test_block_limit_ends_the_response_and_the_budget_cuts_it() -> None:
    many = Script(main=[[101]] * 6 + [[7, EOS]], path=[[20, 104]] * 12, summary=[[40, 106]] * 6)
    t = asyncio.run(rollout(many, max_blocks=4).run([9]))
    assert t.blocks == 4 and many.calls[-1][1] == [106] and t.ids[-1] == 106, "the 4th summary ends the response"
    assert t.finish == "block_limit"
    long = Script(main=[[101]], path=[[20] * 50 + [104]] * 2, summary=[[40] * 50])
    t = asyncio.run(rollout(long, response_length=60).run([9]))
    assert len(t.ids) == 60 and len(t.mask) == 60 == len(t.log_probs)
    assert long.calls[1][2] == 60 - 1 - 1, "a path may use the whole remaining budget"


# ---------- VERL agent loop on CPU ----------


@pytest.fixture(scope="module")
def setup():
    from hydra import compose, initialize_config_dir
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.stages import CONFIG_DIR
    from repro.testing import tiny_model_dir

    path = tiny_model_dir()
    overrides = [
        f"actor_rollout_ref.model.path={path}",
        "data.max_response_length=96",
        "data.max_prompt_length=400",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "repro.rollout_runs.dir=null",  # the rollout writer has its own tests (tests/repro/rollouts/)
    ]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(config_name="unseen_s2", overrides=overrides)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path)).eval()
    return cfg, tok, model


def server(model, tok, seed: int = 0):
    from repro.testing.fake_server import HFServerManager

    return HFServerManager(model, tok, stop_bias=6.0, seed=seed)


def test_agent_loop_is_registered_and_instantiable_like_verl_does(setup, verl_event_loop) -> None:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    import repro.agent_loop as al
    from repro.testing import forkjoin_agent_loop

    cfg, tok, model = setup
    assert _agent_loop_registry[al.AGENT_NAME] == {"_target_": "repro.agent_loop.ForkJoinAgentLoop"}
    fake = server(model, tok)
    loop = forkjoin_agent_loop(cfg, fake, tok)  # instantiated from the registry exactly as VERL's worker does
    messages = [{"role": "user", "content": "What is 12 + 30?"}]
    out = loop.loop.run_until_complete(
        loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}, raw_prompt=messages)
    )
    text = tok.decode(out.response_ids, skip_special_tokens=False)
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs) <= 96
    assert out.extra_fields["pr1_blocks"] >= 1, text
    assert len({r["request_id"] for r in fake.requests}) == 1, "one request id per trajectory (prefix-cache routing)"
    path_requests = [
        r
        for r in fake.requests
        if r["sampling_params"].get("stop_token_ids") == [tok.convert_tokens_to_ids(T.PATH_CLOSE)]
    ]
    first_block = [r["prompt_ids"] for r in path_requests[:2]]
    assert first_block[0] == first_block[1], "both paths of a block start from the same context"
    for i, token in enumerate(out.response_ids):
        if out.response_mask[i] == 0:
            assert tok.convert_ids_to_tokens(token) in (
                T.PATH_OPEN,
                T.PARALLEL_CLOSE,
                T.SUMMARY_OPEN,
                T.PATH_CLOSE,
                T.SUMMARY_CLOSE,
                "Ċ",
            )
    if out.response_ids[-1] == tok.eos_token_id:
        assert parse_structure(text.replace(tok.eos_token, "")).format_ok, text


def test_agent_loop_worker_end_to_end_with_streamed_reward(setup, verl_event_loop) -> None:
    """VERL's own AgentLoopWorker: dataset row → fork-join → padding/masks → reward from our manager (with the step)."""
    import torch
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    cfg, tok, model = setup
    reward_worker = RewardLoopWorker(cfg)

    class Remote:
        async def remote(self, data):
            return await reward_worker.compute_score(data)

    class Handle:
        compute_score = Remote()

    worker = AgentLoopWorker(cfg, llm_client=server(model, tok, seed=1), reward_loop_worker_handles=[Handle()])
    n = 2
    batch = DataProto.from_dict(
        tensors={"dummy": torch.zeros(n, 1)},
        non_tensors={
            "raw_prompt": np.array([[{"role": "user", "content": "What is 3 + 4?"}]] * n, dtype=object),
            "data_source": np.array(["dapo_math_17k"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": "7", "style": "rule"}] * n, dtype=object),
            "extra_info": np.array([{"index": 0}] * n, dtype=object),
            "index": np.array([0] * n),
            "agent_name": np.array(["pr1_forkjoin"] * n, dtype=object),
            "global_steps": np.array([9] * n),
        },
        meta_info={"global_steps": 9},
    )
    out = verl_event_loop.run_until_complete(worker.generate_sequences(batch))
    assert out.batch["responses"].shape == (n, 96) and out.batch["prompts"].shape == (n, 400)
    assert "rm_scores" in out.batch
    scores = out.batch["rm_scores"].sum(-1).tolist()
    assert all(s in (-1.0, 1.0, 1.2) for s in scores), scores
    steps = [d["step"] for d in out.non_tensor_batch["reward_extra_info"]]
    assert steps == [9.0] * n, "the global step reached the reward"
    inserted = (out.batch["response_mask"] == 0) & (out.batch["attention_mask"][:, 400:] == 1)
    assert inserted.any(), "engine-inserted tokens are masked out of the loss"


class RecordingTransferQueue:
    """Stands in for ``transfer_queue`` inside VERL's ``agent_loop_tq`` (which needs a running
    TransferQueue controller): records the prompt statuses and the trajectory puts, with the
    fields converted by VERL's own ``list_of_dict_to_tensordict`` exactly as the worker does."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {}
        self.keys: list[str] = []
        self.tags: list[dict] = []
        self.fields: list = []

    def init(self, *args, **kwargs) -> None:
        return None

    async def async_kv_put(self, key, partition_id, tag=None, **kwargs) -> None:
        self.status[key] = (tag or {}).get("status", "")

    async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None, **kwargs) -> None:
        self.keys += list(keys)
        self.tags += list(tags or [])
        self.fields.append(fields)


def test_default_v1_trainer_worker_keeps_the_weight_versions(setup, monkeypatch, verl_event_loop) -> None:
    """VERL 0.9.1's default trainer (``trainer.use_v1=true``) rolls out through ``AgentLoopWorkerTQ``
    and, after the first actor update, casts every trajectory's ``min/max_global_steps`` tag to int
    (``trainer_base._compute_metrics``). A loop that drops them (``None``) kills step 1 there."""
    import torch
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.utils import tensordict_utils as tu

    from repro.testing.fake_server import HFServerManager

    cfg, tok, model = setup
    assert cfg.trainer.use_v1, "the stages run VERL's default V1 trainer"
    queue = RecordingTransferQueue()
    monkeypatch.setattr(agent_loop_tq, "tq", queue)
    cfg.actor_rollout_ref.rollout.n = 2
    # a weight sync lands every 3 calls: a fork-join trajectory (≥ 4 calls) spans two versions
    fake = HFServerManager(model, tok, stop_bias=6.0, seed=2, global_steps=7, update_every=3)
    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__  # the class behind @ray.remote
    worker = worker_cls(cfg, llm_client=fake, reward_loop_worker_handles=None)
    batch = tu.get_tensordict({
        "raw_prompt": np.array([[{"role": "user", "content": "What is 3 + 4?"}]], dtype=object),
        "data_source": np.array(["dapo_math_17k"], dtype=object),
        "reward_model": np.array([{"ground_truth": "7", "style": "rule"}], dtype=object),
        "extra_info": np.array([{"index": 0}], dtype=object),
        "index": torch.tensor([0]),
        "uid": np.array(["u0"], dtype=object),
        "agent_name": np.array(["pr1_forkjoin"], dtype=object),
    })
    tu.assign_non_tensor_data(batch, "global_steps", 7)  # as trainer_base._next_train_batch does

    async def rollout() -> None:
        await worker.generate_sequences(batch)
        while worker.background_tasks:
            await asyncio.gather(*list(worker.background_tasks))

    verl_event_loop.run_until_complete(rollout())
    assert queue.status == {"u0": "finished"}, queue.status
    assert len(queue.tags) == 2 and all(tag["status"] == "success" for tag in queue.tags)
    # the trainer's own cast (trainer_base.py, _compute_metrics): it raises on a None step
    low = np.array([tag["min_global_steps"] for tag in queue.tags], dtype=int)
    high = np.array([tag["max_global_steps"] for tag in queue.tags], dtype=int)
    assert (low >= 7).all() and (high >= low).all() and (high > low).any(), (low, high)
    calls = len(fake.requests)
    assert high.max() <= 7 + calls // 3, "versions come from the server, not invented"
    with pytest.raises(TypeError):  # what the trainer does with a step the loop leaves unset
        np.array([None, None], dtype=int)
