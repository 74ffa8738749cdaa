"""A VERL reward manager that keeps the tags and hands the global step to the reward.

It is VERL's own ``NaiveRewardManager`` with two inputs fixed, not a copy of it:

* its tokenizer is wrapped so that ``decode(..., skip_special_tokens=True)`` drops every special
  token *except* the six tags (pad, eos and chat markers still go), because the reward's format
  check and answer extraction must see the blocks;
* before delegating, each row's ``extra_info`` gets ``global_step`` (from the ``global_steps``
  field VERL's V1 trainer stamps on every dispatched prompt) and a marker that the tags were kept.

With ``repro.rollout_runs.dir`` set (every repro RL stage sets it), each scored rollout is also
handed to :class:`repro.rollouts.runs.RolloutRunWriter`, which journals it on disk before the
reward is returned and stores it in its step's pr1-eval run; a rollout the writer cannot place
(no step: scored outside a trainer) is only scored. The validation size the writer waits for is
counted on VERL's own validation dataset, built with this manager's tokenizer.

Configure with ``reward.reward_manager.source=importlib``,
``reward.reward_manager.module.path=pkg://repro.reward_manager`` and
``reward.reward_manager.name=TagPreservingRewardManager``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from pr1_eval.protocol.decode import decode_keeping_tags, tag_keeping_ids
from repro.rewards import STEP_KEY, TAGS_KEPT_KEY
from repro.rollouts.records import rollout_of
from repro.rollouts.runs import RolloutRunWriter, options_from_config

log = logging.getLogger(__name__)


class TagKeepingTokenizer:
    """Proxy for a tokenizer whose ``decode`` never drops the six tags.

    With ``skip_special_tokens=True`` it decodes through :func:`pr1_eval.protocol.decode.decode_keeping_tags`
    (every other special id removed, the tags kept); everything else is delegated to the wrapped tokenizer.
    """

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        if skip_special_tokens and not kwargs:
            return decode_keeping_tags(self._tokenizer, token_ids)
        ids = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
        if skip_special_tokens:
            drop, _ = tag_keeping_ids(self._tokenizer)
            ids = [i for i in ids if int(i) not in drop]
        return str(self._tokenizer.decode(ids, skip_special_tokens=False, **kwargs))


def stamp_rows(data: DataProto) -> DataProto:
    """Copy each row's ``extra_info`` with ``global_step`` (when known) and the tags-kept marker."""
    batch = data.non_tensor_batch
    n = len(data)
    infos = batch.get("extra_info")
    steps = batch.get("global_steps")
    stamped = np.empty(n, dtype=object)
    for i in range(n):
        info = dict(infos[i]) if infos is not None and infos[i] is not None else {}
        if steps is not None and steps[i] is not None:
            info[STEP_KEY] = int(steps[i])
        info[TAGS_KEPT_KEY] = True
        stamped[i] = info
    batch["extra_info"] = stamped
    return data


class TagPreservingRewardManager(NaiveRewardManager):
    """``NaiveRewardManager`` that decodes with the tags kept and passes the step in ``extra_info``."""

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any, **kwargs: Any) -> None:
        super().__init__(config, TagKeepingTokenizer(tokenizer), compute_score, **kwargs)
        options = options_from_config(config, tokenizer)
        self.rollout_runs = None if options is None else RolloutRunWriter(options)
        if options is not None:
            log.info("rollout runs: every rollout's run goes to %s (every %d-th training group)", options.root,
                     options.every)

    async def run_single(self, data: DataProto) -> dict:
        stamped = stamp_rows(data)
        result = await super().run_single(stamped)
        if self.rollout_runs is not None:
            try:  # decoding, re-tokenising and journaling take a fraction of a millisecond: off the event loop
                await self.loop.run_in_executor(None, self._record, stamped, result)
            except Exception:  # recording must never cost the job its reward
                log.exception("rollout runs: could not record a rollout")
        return result

    def _record(self, stamped: DataProto, result: dict) -> None:
        """The scored row as a rollout of its step, handed to the writer (journaled when this returns)."""
        assert self.rollout_runs is not None
        rollout = rollout_of(stamped, result, self.tokenizer, self.rollout_runs.options.response_budget)
        if rollout is not None:
            self.rollout_runs.add(rollout)
