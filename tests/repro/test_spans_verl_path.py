"""The rollout's path spans reach the structured actor's micro-batches through VERL 0.9.1's own code.

Each trajectory comes from repro's fork-join rollout on a scripted model and goes through the
fork-join agent loop's ``AgentLoopOutput``; from there VERL's functions carry it, unchanged:

* V1 trainer (VERL's default, ``trainer.use_v1``): ``AgentLoopWorkerTQ._agent_loop_postprocess``
  builds the per-sample fields it puts into TransferQueue (the spans ride inside ``extra_fields``);
  the TransferQueue round trip is stood in for by VERL's ``list_of_dict_to_tensordict`` over the
  stored rows in a shuffled key order (what a balanced ``kv_batch_get`` returns);
* V0 trainer (``main_ppo_v0``): ``AgentLoopWorker._agent_loop_postprocess`` + ``_postprocess``
  build the padded ``DataProto`` (the spans are a ``non_tensor_batch`` column), then ``union``,
  ``reorder`` (batch balancing), ``to_tensordict`` and ``left_right_2_no_padding`` as
  ``RayPPOTrainer._update_actor`` does;
* then, in both, the worker side: the DP split of the dispatch, ``make_iterator`` (shuffled,
  two epochs), ``prepare_micro_batches`` with and without ``use_dynamic_bsz`` (VERL's
  ``rearrange_micro_batches`` re-orders rows by workload), and the registered structured engine's
  ``prepare_model_inputs`` on each micro-batch, which pads and builds mask and positions.

Every row of every micro-batch is matched back to its trajectory by its tokens and its mask and
positions compared with the ones built from that trajectory's own spans: equal to the parse on
well-formed blocks, different from it (as generation was) on the rows with a stray tag in a path.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import torch

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.mask import build_mask_and_positions
from repro.agent_loop import ForkJoinAgentLoop, WeightVersions
from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput, Trajectory
from repro.spans import mask_and_positions_from_spans
from tests.support.structured_engine import engine_for

pytest.importorskip("transfer_queue")

PROMPT_LEN = 3


def ray_class(actor_cls: Any) -> Any:
    """The plain Python class behind a ``@ray.remote`` actor (its methods run without Ray)."""
    if isinstance(actor_cls, type):
        return actor_cls
    return getattr(actor_cls, "__ray_actor_class__", None) or actor_cls.__ray_metadata__.modified_class


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.testing import tiny_model_dir

    path = tiny_model_dir()
    model = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="sdpa").eval()
    return model, AutoTokenizer.from_pretrained(str(path))


def scripted(ids: dict[str, int], eos: int, paths: list[list[int]], blocks: int, words: list[int]):
    """A model that opens ``blocks`` blocks, writes ``words`` on the main line, and serves ``paths``."""
    queue = list(paths)
    po, ho, hc, so, sc = (ids[t] for t in (T.PARALLEL_OPEN, T.PATH_OPEN, T.PATH_CLOSE, T.SUMMARY_OPEN, T.SUMMARY_CLOSE))

    async def generate(prompt: list[int], stops: list[int], max_tokens: int, temperature: float | None) -> RawOutput:
        if prompt[-1] == ho:
            out = queue.pop(0) if queue else [20, hc]
        elif prompt[-1] == so:
            out = [30, 31, sc]
        elif prompt.count(po) < blocks:
            out = [*words, po]
        else:
            out = [13, eos]
        return RawOutput(out[:max_tokens])

    return generate


def trajectories(tok) -> list[tuple[list[int], Trajectory, bool]]:
    """``(prompt, trajectory, has_stray_tag)`` for eight rollouts of different lengths and shapes."""
    ids = {t: tok.convert_tokens_to_ids(t) for t in T.ALL_TAGS}
    po, ho, hc = ids[T.PARALLEL_OPEN], ids[T.PATH_OPEN], ids[T.PATH_CLOSE]
    eos = int(tok.eos_token_id)
    cases = [
        ([[20, 21, hc], [22, hc], [23, 24, 25, hc], [26, hc]], 2, False),
        ([[20, po, 21, hc], [22, 23, 24, hc]], 1, True),  # a stray <Parallel> inside the first path
        ([[20, 21, 22, 23, hc], [24, hc]], 1, False),
        ([[20, hc], [21, ho, 22, 23, hc]], 1, True),  # a stray <Path> inside the second path
        ([], 0, False),  # no block at all
        ([[20, 21, hc], [22, 23, hc], [24, hc], [25, 26, 27, 28, hc]], 2, False),
        ([[20, 21, hc], [22, po, 23, hc], [24, hc], [25, hc]], 2, True),
        ([[29, hc], [28, 27, hc]], 1, False),
    ]
    out = []
    for i, (paths, blocks, stray) in enumerate(cases):
        words = [11 + (i % 3)] * (1 + i % 4)  # main-line lengths differ, so rows have different lengths
        config = ForkJoinConfig(response_length=200)
        rollout = ForkJoinRollout(ids, [eos], [9], config, scripted(ids, eos, paths, blocks, words))
        prompt = [40 + i, 41, 42]
        out.append((prompt, asyncio.run(rollout.run(list(prompt))), stray))
    return out


def agent_outputs(tok) -> list[tuple[Any, list[int], Trajectory, bool]]:
    rows = []
    for prompt, traj, stray in trajectories(tok):
        output = ForkJoinAgentLoop._output(None, prompt, traj, 0.0, False, WeightVersions())  # type: ignore[arg-type]
        rows.append((output, prompt, traj, stray))
    return rows


def v1_batch(tok) -> tuple[Any, list]:
    """The actor's batch under VERL's V1 trainer: per-sample TransferQueue fields, read back reordered."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    worker = object.__new__(ray_class(AgentLoopWorkerTQ))
    worker.processor, worker.reward_loop_worker_handles, worker.distillation_enabled = None, None, False
    stored: list[dict[str, Any]] = []

    async def put(keys, fields, tags, partition_id):  # one row per call: unbind it into the stored row
        stored.append({k: v[0] if isinstance(v, torch.Tensor) else v.tolist()[0] for k, v in fields.items()})

    rows = agent_outputs(tok)
    with mock.patch.object(tq, "async_kv_batch_put", put):
        for i, (output, *_rest) in enumerate(rows):
            asyncio.run(worker._agent_loop_postprocess(output, False, uid=f"u{i}", session_id=0, global_steps=1))
    order = [5, 2, 7, 0, 3, 6, 1, 4]  # batch balancing reorders the keys; the read follows them
    data = list_of_dict_to_tensordict([stored[i] for i in order])
    assert "pr1_path_spans" not in data and "extra_fields" in data, "V1 keeps the spans inside extra_fields"
    return data, rows


def v0_batch(tok) -> tuple[Any, list]:
    """The actor's batch under VERL's V0 trainer: the padded DataProto, then ``_update_actor``'s conversion."""
    import numpy as np
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.workers.utils.padding import left_right_2_no_padding

    worker = object.__new__(ray_class(AgentLoopWorker))
    worker.processor, worker.reward_loop_worker_handles, worker.distillation_enabled = None, None, False
    worker.tokenizer, worker.mm_processor_kwargs = tok, None
    worker.rollout_config = SimpleNamespace(prompt_length=8, response_length=64)
    rows = agent_outputs(tok)
    padded = [
        asyncio.run(worker._agent_loop_postprocess(output, False, raw_prompt=[{"role": "user", "content": "q"}]))
        for output, *_rest in rows
    ]
    batch = worker._postprocess(padded)
    assert "pr1_path_spans" in batch.non_tensor_batch, "V0 flattens extra_fields into non_tensor_batch columns"
    old = DataProto.from_dict(tensors={"old_log_probs": torch.zeros(len(rows), 64)})
    batch = batch.union(old)
    batch.non_tensor_batch["uid"] = np.array([f"u{i}" for i in range(len(rows))], dtype=object)
    batch.reorder(torch.tensor([5, 2, 7, 0, 3, 6, 1, 4]))  # _balance_batch
    return left_right_2_no_padding(batch.to_tensordict()), rows


def micro_batches(data, dynamic: bool) -> list:
    """The worker side: the DP split, the shuffled mini-batch iterator, the engine's micro-batches."""
    from verl.single_controller.base.decorator import _split_args_kwargs_data_proto
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    (ranks,), _ = _split_args_kwargs_data_proto(2, data)
    found = []
    for rank, part in enumerate(ranks):
        loader = tu.make_iterator(part, mini_batch_size=4, epochs=2, seed=7 + rank, dataloader_kwargs={"shuffle": True})
        for mini in loader:
            tu.assign_non_tensor(
                mini, use_remove_padding=False, use_dynamic_bsz=dynamic, max_token_len_per_gpu=64,
                micro_batch_size_per_gpu=2, pad_mode="no_padding", pad_token_id=0, temperature=1.0,
            )
            micros, _ = prepare_micro_batches(data=mini, dp_group=None, same_micro_num_in_dp=True)
            found.extend(micros)
    return found


def check(tiny, data, rows) -> tuple[int, int]:
    """Every micro-batch row against its own trajectory; returns ``(rows checked, stray rows)``."""
    model, tok = tiny
    tags = {t: tok.convert_tokens_to_ids(t) for t in T.ALL_TAGS}
    by_tokens = {tuple(prompt + traj.ids): (prompt, traj, stray) for _, prompt, traj, stray in rows}
    engine = engine_for(model, tok)
    checked = strays = 0
    for dynamic in (False, True):
        micros = micro_batches(data, dynamic)
        assert max(len(m) for m in micros) >= 2, "rows of different lengths share a padded micro-batch"
        for micro in micros:
            inputs, _ = engine.prepare_model_inputs(micro)
            for i, seq in enumerate(t.tolist() for t in micro["input_ids"].unbind()):
                prompt, traj, stray = by_tokens[tuple(seq)]
                n = len(seq)
                mask, pos = mask_and_positions_from_spans(n, traj.path_spans, len(prompt))
                parse_mask, parse_pos = build_mask_and_positions(seq, tags, response_start=len(prompt))
                assert torch.equal(inputs["position_ids"][i, :n], pos), f"positions of row {seq}"
                assert torch.equal(inputs["attention_mask"][i, 0, :n, :n], mask), f"mask of row {seq}"
                if stray:
                    assert not torch.equal(mask, parse_mask) or not torch.equal(pos, parse_pos)
                    strays += 1
                else:
                    assert torch.equal(mask, parse_mask) and torch.equal(pos, parse_pos)
                checked += 1
    return checked, strays


def test_v1_trainer_spans_reach_every_micro_batch_row(tiny) -> None:
    data, rows = v1_batch(tiny[1])
    # two epochs of 8 rows, once with fixed micro-batches and once with dynamic ones; 3 stray rows each time
    assert check(tiny, data, rows) == (32, 12)


def test_v0_trainer_spans_reach_every_micro_batch_row(tiny) -> None:
    data, rows = v0_batch(tiny[1])
    assert check(tiny, data, rows) == (32, 12)
