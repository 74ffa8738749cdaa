"""The end-of-sequence set: which token ids end a response.

A checkpoint can name its EOS in two places: the tokenizer (``eos_token``) and the generation
config (``eos_token_id``, an int or a list — Qwen3 lists ``<|im_end|>`` and ``<|endoftext|>``).
vLLM stops on both, so every engine and the RL rollout use the union; taking only one of them
(as the HF engine once did) lets a model run past an end-of-turn token that the other engines
stop at, and the same checkpoint would then write different responses per engine.
"""

from __future__ import annotations

from typing import Any


def _as_ids(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, (list, tuple, set, frozenset)):
        return {int(v) for v in value if v is not None}
    return {int(value)}


def eos_token_ids(tokenizer: Any, generation_config: Any = None) -> frozenset[int]:
    """The tokenizer's EOS id plus every EOS id of the generation config (``None`` for none)."""
    ids = _as_ids(getattr(tokenizer, "eos_token_id", None))
    if generation_config is not None:
        ids |= _as_ids(getattr(generation_config, "eos_token_id", None))
    return frozenset(ids)


def load_generation_config(model_path: str | None) -> Any:
    """The checkpoint's ``GenerationConfig``, or ``None`` when it has none (or no path is given)."""
    if not model_path:
        return None
    try:
        from transformers import GenerationConfig

        return GenerationConfig.from_pretrained(model_path)
    except Exception:  # no generation_config.json (or unreadable): the tokenizer's EOS is all there is
        return None


def model_eos_token_ids(model_path: str | None, tokenizer: Any) -> frozenset[int]:
    """:func:`eos_token_ids` for a checkpoint directory or hub id (reads its generation config)."""
    return eos_token_ids(tokenizer, load_generation_config(model_path))
