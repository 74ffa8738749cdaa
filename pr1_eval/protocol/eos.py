"""The end-of-sequence set: which token ids end a response, exactly as vLLM computes it.

A checkpoint can name its EOS in three places: the tokenizer (``eos_token``), the generation
config (``generation_config.json``: ``eos_token_id``, an int or a list — Qwen3 lists
``<|im_end|>`` and ``<|endoftext|>``) and, when there is no generation config, ``config.json``.
vLLM 0.32/0.33 stops on the tokenizer's EOS (``Renderer.get_eos_token_id``) plus every
``eos_token_id`` of the generation config (``SamplingParams.update_from_generation_config``), and
reads that config with ``try_get_generation_config`` (``vllm/transformers_utils/config.py``):
``GenerationConfig.from_pretrained(model)``, and on ``OSError`` (no ``generation_config.json``)
``GenerationConfig.from_model_config(config)`` built from ``config.json``. transformers builds the
same fallback when it loads a model without a generation config. :func:`load_generation_config`
does what vLLM does, so every engine and the RL rollout use one set; taking fewer ids lets a model
run past a token vLLM stops at, and the same checkpoint would write different responses per engine.
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
    """The checkpoint's ``GenerationConfig`` as vLLM's ``try_get_generation_config`` gets it: the
    ``generation_config.json``, else one built from ``config.json``; ``None`` when neither exists
    (or no path is given)."""
    if not model_path:
        return None
    from transformers import AutoConfig, GenerationConfig

    try:
        return GenerationConfig.from_pretrained(model_path)
    except OSError:  # no generation_config.json: vLLM (and transformers) derive one from config.json
        pass
    except ValueError:  # an unreadable generation_config.json: vLLM would fail to load the model at all
        return None
    try:
        return GenerationConfig.from_model_config(AutoConfig.from_pretrained(model_path))
    except (OSError, ValueError):  # no config.json either: the tokenizer's EOS is all there is
        return None


def model_eos_token_ids(model_path: str | None, tokenizer: Any) -> frozenset[int]:
    """:func:`eos_token_ids` for a checkpoint directory or hub id (reads its generation config,
    with the ``config.json`` fallback)."""
    return eos_token_ids(tokenizer, load_generation_config(model_path))
