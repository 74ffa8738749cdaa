"""A VERL reward manager that keeps the tags and hands the global step to the reward.

It is VERL's own ``NaiveRewardManager`` with two inputs fixed, not a copy of it:

* its tokenizer is wrapped so that ``decode(..., skip_special_tokens=True)`` drops every special
  token *except* the six tags (pad, eos and chat markers still go), because the reward's format
  check and answer extraction must see the blocks;
* before delegating, each row's ``extra_info`` gets ``global_step`` (from the ``global_steps``
  field VERL's V1 trainer stamps on every dispatched prompt) and a marker that the tags were kept.

Configure with ``reward.reward_manager.source=importlib``,
``reward.reward_manager.module.path=pkg://repro.reward_manager`` and
``reward.reward_manager.name=TagPreservingRewardManager``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from pr1_eval.protocol.decode import decode_keeping_tags, tag_keeping_ids
from repro.rewards import STEP_KEY, TAGS_KEPT_KEY


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

    async def run_single(self, data: DataProto) -> dict:
        return await super().run_single(stamp_rows(data))
