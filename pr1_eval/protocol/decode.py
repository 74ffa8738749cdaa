"""Tag-keeping decoding: drop special tokens, except the six tags.

Trainers and harnesses decode responses with ``skip_special_tokens=True`` (VERL's reward
managers, lm-eval's ``hf`` backend), which deletes the tags of a Parallel-R1 tokenizer — every
parallel response then reads as sequential to the format check and the parallel ratio. Decoding
here drops exactly what ``skip_special_tokens=True`` drops (pad, eos, chat markers, every other
special token) and keeps the tags.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from pr1_eval.protocol.tags import single_token_tag_ids

_CACHE_ATTR = "_pr1_tag_keeping_ids"


def special_token_ids(tokenizer: Any) -> set[int]:
    """Ids that ``decode(..., skip_special_tokens=True)`` drops: special added tokens and the
    tokenizer's declared special tokens."""
    decoder = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special = {int(i) for i, tok in decoder.items() if getattr(tok, "special", False)}
    return special | {int(i) for i in (getattr(tokenizer, "all_special_ids", []) or [])}


def tag_keeping_ids(tokenizer: Any) -> tuple[frozenset[int], frozenset[int]]:
    """(ids to drop when decoding, ids of the tags that are special tokens), cached on the
    tokenizer (decoding happens once per sample)."""
    cached: tuple[frozenset[int], frozenset[int]] | None = getattr(tokenizer, _CACHE_ATTR, None)
    if cached is None:
        special = special_token_ids(tokenizer)
        tags = frozenset(i for i in single_token_tag_ids(tokenizer).values() if i in special)
        cached = (frozenset(special - tags), tags)
        with contextlib.suppress(AttributeError):  # a tokenizer refusing attributes just recomputes
            setattr(tokenizer, _CACHE_ATTR, cached)
    return cached


def decode_keeping_tags(tokenizer: Any, tokens: int | Iterable[int] | Any) -> str:
    """Decode like ``skip_special_tokens=True`` except that the six tags stay in the text."""
    if hasattr(tokens, "tolist"):
        tokens = tokens.tolist()
    ids = [int(tokens)] if isinstance(tokens, int) else [int(t) for t in tokens]
    drop, _ = tag_keeping_ids(tokenizer)
    return str(tokenizer.decode([i for i in ids if i not in drop], skip_special_tokens=False))
