"""What makes a CPU training job give the same figures twice, beside the seeded rollout server.

The nano job's CI verdict must be a function of the commit. The CPU rollout server seeds every
request from its id (``repro.testing.cpu_rollout.request_seed``), so the ids must name the sample,
not the moment; and the trainer's batch must come in one order, not the order trajectories
finished in. VERL 0.9.1's V1 trainer gives neither under ``rollout.full_determinism``, so this module
(loaded through VERL's plugin hook in CPU jobs only, like the rest of ``repro.testing``) adds:

- :class:`SeededSingleTurnAgentLoop` (``agent_name: pr1_seeded_single_turn``): VERL's single-turn
  loop, unchanged, except for the request id. VERL's loop names a request ``det-<priority>`` and
  the V1 trainer's transfer-queue worker never sets ``priority``, so all ``n`` samples of every
  prompt would share ``det-0`` (and one seed). This loop passes a priority made of the prompt's data
  index and the sample's number (:func:`sample_priority`); priority only orders vLLM's queue, and
  the CPU server has none.
- :class:`OrderedReplayBuffer` (``trainer.v1.sampler.custom_sampler``, VERL's extension point): the
  sync replay buffer, with each batch sorted by (data index, sample number, output number).
  VERL's buffer lists trajectories in the order the transfer queue received them, i.e. the order
  they finished: the loss would sum in another order on every run.

VERL symbols touched: ``SingleTurnAgentLoop`` and ``register`` (public agent-loop API),
``ReplayBuffer._materialize_batch`` (private: the hook its ``sample`` calls to build a batch; if VERL
renames it the batch is VERL's, the figures can differ in the last bits, and the repeat check says
so), ``ReplayBuffer(poll_interval=...)`` (its constructor's keyword), ``transfer_queue.kv_batch_get`` and
``KVBatchMeta`` (public).
"""

from __future__ import annotations

from typing import Any

from transfer_queue import KVBatchMeta
from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

SEEDED_SINGLE_TURN = "pr1_seeded_single_turn"
SESSIONS = 1_000_000
"""Room for the samples of one prompt in :func:`sample_priority` (``rollout.n`` is far smaller)."""


def sample_priority(index: int, session_id: int) -> int:
    """One integer per (prompt data index, sample number): the request is then ``det-<this>``."""
    if not 0 <= session_id < SESSIONS:
        raise ValueError(f"session_id {session_id} outside [0, {SESSIONS})")
    return int(index) * SESSIONS + int(session_id)


@register(SEEDED_SINGLE_TURN)
class SeededSingleTurnAgentLoop(SingleTurnAgentLoop):
    """VERL's single-turn loop with a request id that names the sample (module docstring)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        kwargs.pop("priority", None)
        priority = sample_priority(int(kwargs.get("index", 0)), int(kwargs.get("session_id", 0)))
        return await super().run(sampling_params, priority=priority, **kwargs)


def batch_order(keys: list[str], index: list[int]) -> list[int]:
    """Positions of ``keys`` (``{uid}_{session}_{output}``) sorted by (data index, session, output)."""
    def rank(i: int) -> tuple[int, int, int]:
        parts = keys[i].rsplit("_", 2)
        return int(index[i]), int(parts[1]), int(parts[2])

    return sorted(range(len(keys)), key=rank)


#: How often the replay buffer looks for a finished batch, in seconds (VERL's default: 2.0).
POLL_SECONDS = 0.05


class OrderedReplayBuffer(ReplayBuffer):
    """VERL's sync replay buffer, every batch in (data index, sample, output) order, polled every
    :data:`POLL_SECONDS`. Why the poll: VERL's buffer sleeps 2 s between looks, made for GPU steps of
    minutes; a CPU step's rollouts take 4-6 s, so each step waited a second on average for a batch that
    was ready (the nano stages' ``timing_s/gen`` came in multiples of 2 s: 4.03, 6.03, 8.04). The order of
    the batch does not depend on when it is looked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("poll_interval", POLL_SECONDS)
        super().__init__(*args, **kwargs)

    def _materialize_batch(self, partition_id: str, selected_prompt_uids: list[str],
                           partition_snapshot: dict[str, dict]) -> KVBatchMeta:
        import transfer_queue as tq

        meta = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        if len(meta.keys) < 2:
            return meta
        fetched = tq.kv_batch_get(keys=meta.keys, partition_id=partition_id, select_fields=["index"])
        raw = fetched["index"]
        index = [int(v) for v in (raw.tolist() if hasattr(raw, "tolist") else list(raw))]
        order = batch_order(meta.keys, index)
        return KVBatchMeta(partition_id=meta.partition_id, keys=[meta.keys[i] for i in order],
                           tags=[meta.tags[i] for i in order], fields=meta.fields, extra_info=meta.extra_info)
