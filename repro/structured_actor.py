"""Structured ("Unseen") training inside VERL: sibling paths never see each other.

Loaded into every VERL process through ``model.external_lib=repro.structured_actor`` (VERL's
``HFModelConfig`` imports it before any engine is built). Importing it

* registers :class:`StructuredFSDPEngineWithLMHead` in VERL's ``EngineRegistry`` for the
  ``fsdp``/``fsdp2`` backends on ``(cuda, nvidia)`` and ``(cuda, amd)`` — the registry looks the
  vendor key up before the plain ``cuda`` one, so the override applies exactly where the module
  is loaded and VERL's own registration stays untouched;
* provides :class:`StructuredSFTDataset` (``data.custom_cls``) whose ``position_ids`` follow the
  structured layout (rows closed with the tokenizer's EOS, :mod:`repro.sft_dataset`);
* registers the fork-join agent loop (``repro.agent_loop``), which Unseen RL stages roll out with.

The engine subclass changes one method: after VERL builds the padded (non-remove-padding)
inputs, it replaces the 2-D attention mask by the 4-D structured mask and the position ids by
the structured ones, both from :func:`pr1_eval.protocol.mask.build_mask_and_positions` — the same
function the structured decoder uses, so training and decoding agree token for token. Right
padding rows would see nothing (every key masked) and give NaN through softmax; they are let
see themselves, and their logits are never read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from verl.utils import tensordict_utils as tu
from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

from pr1_eval.protocol.mask import additive_mask, build_mask_and_positions
from pr1_eval.protocol.tags import resolve_tag_ids
from repro.sft_dataset import OfficialEndSFTDataset
from repro.spans import SPANS_KEY, PathSpan, mask_and_positions_from_spans

logger = logging.getLogger(__name__)
SUPPORTED_ATTENTION = ("sdpa", "eager")
VENDORS = ("nvidia", "amd")
"""CUDA-device vendors the override is registered for (VERL looks ``(device, vendor)`` up first)."""


def response_starts(micro_batch: Any, lengths: Sequence[int]) -> list[int]:
    """Where each sequence's response begins, so prompt tokens (the prompt names the tags in plain
    words, which a tag-aware tokenizer turns into tag ids) are never read as structure.

    PPO micro-batches carry a nested ``response_mask`` (response lengths); SFT ones a ``loss_mask``
    whose first 1 is the first assistant token. Without either, the whole sequence is response.
    """
    keys = set(micro_batch.keys())
    if "response_mask" in keys:
        resp_mask = micro_batch["response_mask"]
        if getattr(resp_mask, "is_nested", False):
            resp = resp_mask.offsets().diff().tolist()
        elif "attention_mask" in keys:  # V0 trainer: responses right-padded to R, the padded mask beside them
            resp = micro_batch["attention_mask"][:, -resp_mask.shape[-1]:].sum(-1).tolist()
        else:  # equal-length rows were stacked into a dense [B, R] tensor: every response has R tokens
            resp = [int(resp_mask.shape[-1])] * len(lengths)
        return [max(0, int(n) - int(r)) for n, r in zip(lengths, resp, strict=True)]
    if "loss_mask" in keys:
        masks = micro_batch["loss_mask"]
        rows = masks.unbind() if getattr(masks, "is_nested", False) else list(masks)
        starts = []
        for row in rows:
            hits = torch.nonzero(row > 0)
            starts.append(int(hits[0, 0]) if hits.numel() else 0)
        return starts
    return [0] * len(lengths)


def structured_batch(
    sequences: Sequence[Sequence[int]],
    tag_ids: Mapping[str, int],
    starts: Sequence[int] | None = None,
    max_len: int | None = None,
    device: torch.device | str | None = None,
    spans: Sequence[Sequence[PathSpan] | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(mask [B,1,L,L] bool, position_ids [B,L] long)`` for a batch of sequences.

    Real rows follow :func:`pr1_eval.protocol.mask.build_mask_and_positions`; pad columns are hidden
    from every real row; pad rows attend only to themselves (never an all-masked row → no NaN).
    ``device`` builds the masks there (the GPU a forward runs on builds them in microseconds).
    ``spans`` (per row, the rollout's path spans, :mod:`repro.spans`) replace the parse for the rows
    that have them, so the forward sees the blocks generation made even with tags inside a path.
    """
    starts = list(starts) if starts is not None else [0] * len(sequences)
    length = max_len if max_len is not None else max((len(s) for s in sequences), default=0)
    mask = torch.zeros(len(sequences), 1, length, length, dtype=torch.bool, device=device)
    positions = torch.zeros(len(sequences), length, dtype=torch.long, device=device)
    for i, (seq, start) in enumerate(zip(sequences, starts, strict=True)):
        n = len(seq)
        row_spans = spans[i] if spans is not None else None
        if row_spans is not None:
            seq_mask, seq_pos = mask_and_positions_from_spans(n, row_spans, start, device=device)
        else:
            seq_mask, seq_pos = build_mask_and_positions(seq, tag_ids, response_start=start, device=device)
        mask[i, 0, :n, :n] = seq_mask
        positions[i, :n] = seq_pos
        pad = torch.arange(n, length, device=device)
        mask[i, 0, pad, pad] = True
    return mask, positions


def attention_mask_for(mask: torch.Tensor, attn_implementation: str, dtype: torch.dtype) -> torch.Tensor:
    """The 4-D mask in the form the attention kernel takes: bool for sdpa, additive float for eager."""
    if attn_implementation == "sdpa":
        return mask
    if attn_implementation == "eager":
        return additive_mask(mask, dtype)
    raise ValueError(
        f"structured training needs a 4-D attention mask, which attn_implementation={attn_implementation!r} cannot "
        f"take; set model.override_config.attn_implementation to one of {SUPPORTED_ATTENTION}"
    )


def _column(micro_batch: Any, key: str) -> list[Any]:
    """One non-tensor column as a Python list, one entry per row (a TensorDict's ``NonTensorStack``,
    a ``DataProto``-style array or a plain list)."""
    value = micro_batch.get(key) if hasattr(micro_batch, "get") else micro_batch[key]
    return list(value.tolist()) if hasattr(value, "tolist") else list(value)


def batch_spans(micro_batch: Any, rows: int) -> list[list[PathSpan] | None] | None:
    """The rollout's path spans per row when the micro-batch carries them, else ``None`` (SFT and
    imported data: the parse).

    The fork-join agent loop returns them as the extra field ``pr1_path_spans``, and the two VERL
    0.9.1 trainers carry that field differently: the V1 trainer (the default) stores the whole
    ``extra_fields`` dict per sample in TransferQueue and hands it to the actor as one column,
    the V0 trainer flattens extra fields into ``non_tensor_batch`` columns of their own. Both are
    read here (``tests/repro/test_spans_verl_path.py`` drives each through VERL's batching). Which
    reading a forward used is logged once per process."""
    keys = set(micro_batch.keys())
    values: list[Any] | None = None
    if SPANS_KEY in keys:
        values = _column(micro_batch, SPANS_KEY)
    elif "extra_fields" in keys:
        fields = _column(micro_batch, "extra_fields")
        values = [f.get(SPANS_KEY) if isinstance(f, Mapping) else None for f in fields]
        if all(v is None for v in values):
            values = None
    global _SPANS_LOGGED
    if not _SPANS_LOGGED:
        logger.warning("repro: structured forward builds positions and mask from %s",
                       "the rollout's path spans" if values is not None
                       else "a parse of the tokens (no path spans in the batch)")
        _SPANS_LOGGED = True
    if values is None:
        return None
    if len(values) != rows:
        raise ValueError(f"{SPANS_KEY} has {len(values)} rows for a micro-batch of {rows}")
    return [None if v is None else [tuple(int(x) for x in span) for span in v] for v in values]  # type: ignore[misc]


_SPANS_LOGGED = False


def _tag_ids(tokenizer: Any) -> dict[str, int]:
    return resolve_tag_ids(tokenizer)


def structured_model_inputs(engine: Any, micro_batch: Any, model_inputs: dict[str, Any]) -> dict[str, Any]:
    """Replace VERL's padded 2-D mask and positions by the structured 4-D mask and positions."""
    input_ids = micro_batch["input_ids"]
    sequences = [t.tolist() for t in input_ids.unbind()]  # the tag scan is a numpy pass over each row
    lengths = [len(s) for s in sequences]
    padded = model_inputs["input_ids"]
    if not hasattr(engine, "_repro_tag_ids"):
        engine._repro_tag_ids = _tag_ids(engine.model_config.tokenizer)
    starts = response_starts(micro_batch, lengths)
    spans = batch_spans(micro_batch, len(sequences))
    mask, positions = structured_batch(
        sequences, engine._repro_tag_ids, starts, padded.shape[1], device=padded.device, spans=spans
    )
    attn = getattr(engine.model_config.hf_config, "_attn_implementation", None) or "sdpa"
    dtype = getattr(engine, "_autocast_dtype", torch.bfloat16)
    out = dict(model_inputs)
    out["attention_mask"] = attention_mask_for(mask, attn, dtype).to(padded.device)
    out["position_ids"] = positions.to(padded.device)
    return out


class StructuredFSDPEngineWithLMHead(FSDPEngineWithLMHead):
    """VERL's FSDP LM engine with the structured mask and positions (see module docstring)."""

    def prepare_model_inputs(self, micro_batch: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        if tu.get_non_tensor_data(data=micro_batch, key="use_remove_padding", default=True):
            raise RuntimeError(
                "structured training needs the padded path: set model.use_remove_padding=False "
                "(actor_rollout_ref.model.use_remove_padding=False for PPO); packed flash-attention has no 4-D mask"
            )
        model_inputs, output_args = super().prepare_model_inputs(micro_batch)
        return structured_model_inputs(self, micro_batch, model_inputs), output_args


def register() -> type:
    """Register the structured engine for fsdp/fsdp2 on (cuda, nvidia|amd); idempotent. Returns the class."""
    current = EngineRegistry._engines.get("language_model", {}).get("fsdp", {}).get(("cuda", VENDORS[0]))
    if current is StructuredFSDPEngineWithLMHead:
        return current
    EngineRegistry.register(
        model_type="language_model", backend=["fsdp", "fsdp2"], device="cuda", vendor=list(VENDORS)
    )(StructuredFSDPEngineWithLMHead)
    logger.info("repro: structured FSDP engine registered for fsdp/fsdp2 on cuda (%s)", ", ".join(VENDORS))
    return StructuredFSDPEngineWithLMHead


class StructuredSFTDataset(OfficialEndSFTDataset):
    """VERL's multi-turn SFT dataset with structured ``position_ids`` (``pad_mode=no_padding``), its
    rows ending with the tokenizer's EOS as the official SFT's (:mod:`repro.sft_dataset`).

    Defined at module level so DataLoader workers can pickle it under any start method.
    """

    def __getitem__(self, item: int) -> dict[str, Any]:
        row = super().__getitem__(item)
        if not hasattr(self, "_repro_tag_ids"):
            self._repro_tag_ids = _tag_ids(self.tokenizer)
        start = response_starts({"loss_mask": row["loss_mask"][None]}, [len(row["input_ids"])])[0]
        _, positions = build_mask_and_positions(row["input_ids"].tolist(), self._repro_tag_ids, response_start=start)
        row["position_ids"] = positions
        return row


register()
try:  # the Unseen RL stages roll out with the fork-join agent loop; make it known in this process
    import repro.agent_loop  # noqa: F401
except ImportError as error:  # pragma: no cover - only without VERL's agent-loop extras
    logger.warning("repro: fork-join agent loop not registered (%s)", error)
