"""The six Parallel-R1 tags and the one way to find their token ids.

Every stage (structure parsing, fork-join, masks, rewards, tokenizer building, lm-eval decoding)
must agree on the exact tag strings; in Parallel-R1 checkpoints they are single added special
tokens. Token ids are always found by encoding the tag text (what a model sees), never by
``convert_tokens_to_ids`` (which maps an unknown tag to the unknown-token id without a word).
"""

from __future__ import annotations

from typing import Any

from pr1_eval.errors import Pr1EvalError

PARALLEL_OPEN = "<Parallel>"
PARALLEL_CLOSE = "</Parallel>"
PATH_OPEN = "<Path>"
PATH_CLOSE = "</Path>"
SUMMARY_OPEN = "<Summary>"
SUMMARY_CLOSE = "</Summary>"

ALL_TAGS: tuple[str, ...] = (
    PARALLEL_OPEN,
    PARALLEL_CLOSE,
    PATH_OPEN,
    PATH_CLOSE,
    SUMMARY_OPEN,
    SUMMARY_CLOSE,
)


def single_token_tag_ids(tokenizer: Any) -> dict[str, int]:
    """The tags that ``tokenizer`` encodes as exactly one token, with their ids (maybe none).

    For callers that must also work with a tokenizer without the tags (lm-eval decoding,
    ``add-tokens`` checking what is already there)."""
    out: dict[str, int] = {}
    for tag in ALL_TAGS:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        if len(ids) == 1:
            out[tag] = int(ids[0])
    return out


def resolve_tag_ids(tokenizer: Any) -> dict[str, int]:
    """Map all six tags to token ids; fail clearly when a tag is not a single token.

    Fork-join stops on ``</Path>`` and the structured mask keys on tag ids, so both need every tag
    to be exactly one token (as in Parallel-R1 checkpoints, where they are added special tokens).
    """
    found = single_token_tag_ids(tokenizer)
    missing = [tag for tag in ALL_TAGS if tag not in found]
    if missing:
        n = len(tokenizer.encode(missing[0], add_special_tokens=False))
        raise Pr1EvalError(
            f"tag {missing[0]} is {n} tokens in this tokenizer, but fork-join and structured decoding need "
            "each of the six tags to be one (special) token; use a Parallel-R1 checkpoint's tokenizer "
            "(or `pr1-repro add-tokens`), or --decoding sequential"
        )
    if len(set(found.values())) != len(ALL_TAGS):
        raise Pr1EvalError(f"the six tags share token ids in this tokenizer ({found}); each needs its own token")
    return found
