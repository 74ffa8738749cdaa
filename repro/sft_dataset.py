"""SFT rows that end as the official cold start's did: the response, then ``tokenizer.eos_token``.

The official SFT dataset (``verl/utils/dataset/parallel_thinking_sft_dataset.py``) tokenises
``chat_template(prompt, add_generation_prompt=True)`` + ``response + tokenizer.eos_token`` and trains
the response and that end token. VERL 0.9.1's multi-turn dataset, which repro reads turn by turn
(the exact rollout prompt, see ``sft_common.yaml``), closes the assistant turn with the template's
own suffix instead — ``<|im_end|>\\n`` for Qwen — and trains both tokens. With Qwen3-Base's
tokenizer (``eos_token`` ``<|endoftext|>``, whose generation config lists only that id) a model
SFT'd that way learns to end with ``<|im_end|>``, which no stop set of that checkpoint holds, and
runs on past its answer.

:class:`OfficialEndSFTDataset` is VERL's dataset with that tail replaced: the turn suffix the chat
template writes after an assistant message is cut and the tokenizer's EOS appended (trained on,
as officially); nothing follows it. The EOS is then the tokenizer's own id, which every engine's
EOS set (:func:`pr1_eval.protocol.eos.eos_token_ids`) and the RL rollout's stop set hold.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

_SENTINEL = "\u27e6PR1-END\u27e7"


def turn_suffix_ids(tokenizer: Any) -> list[int]:
    """The ids the chat template writes after an assistant message's content (``<|im_end|>\\n``
    for Qwen), read off the template itself."""
    text = tokenizer.apply_chat_template([{"role": "assistant", "content": _SENTINEL}], tokenize=False)
    suffix = str(text).split(_SENTINEL, 1)[1] if _SENTINEL in str(text) else ""
    return list(tokenizer.encode(suffix, add_special_tokens=False)) if suffix else []


def end_with_eos(row: dict[str, Any], suffix: list[int], eos_id: int) -> dict[str, Any]:
    """``row`` (VERL's ``no_padding`` SFT item) with its trailing ``suffix`` replaced by ``eos_id``,
    trained on; position ids renumbered. A row that does not end with ``suffix`` is refused."""
    ids = row["input_ids"].tolist()
    if suffix and ids[len(ids) - len(suffix):] != suffix:
        raise ValueError(
            f"SFT row does not end with the chat template's turn suffix {suffix}: cannot close it with the EOS "
            "(use data.pad_mode=no_padding and data.truncation=error, as repro's SFT configs do)"
        )
    keep = len(ids) - len(suffix)
    out = dict(row)
    out["input_ids"] = torch.cat([row["input_ids"][:keep], torch.tensor([eos_id], dtype=row["input_ids"].dtype)])
    out["loss_mask"] = torch.cat([row["loss_mask"][:keep], torch.ones(1, dtype=row["loss_mask"].dtype)])
    if "attention_mask" in row:
        out["attention_mask"] = torch.ones(keep + 1, dtype=row["attention_mask"].dtype)
    if "position_ids" in row:
        out["position_ids"] = torch.arange(keep + 1, dtype=row["position_ids"].dtype)
    return out


class OfficialEndSFTDataset(MultiTurnSFTDataset):
    """VERL's multi-turn SFT dataset whose rows end with ``tokenizer.eos_token`` (module docstring)."""

    def __getitem__(self, item: int) -> dict[str, Any]:
        row = super().__getitem__(item)
        if not hasattr(self, "_repro_suffix"):
            self._repro_suffix = turn_suffix_ids(self.tokenizer)
        return end_with_eos(row, self._repro_suffix, int(self.tokenizer.eos_token_id))
