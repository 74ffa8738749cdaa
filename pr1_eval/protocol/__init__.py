"""The Parallel-R1 token-level protocol, in one home.

Evaluation (``pr1_eval.decoding``, ``pr1_eval.lm_eval_tasks``) and training (``repro``) import the
protocol from here and keep none of their own:

* :mod:`~pr1_eval.protocol.tags` — the six tags and :func:`resolve_tag_ids` (the one resolver);
* :mod:`~pr1_eval.protocol.eos` — the end-of-sequence set (:func:`eos_token_ids`);
* :mod:`~pr1_eval.protocol.decode` — tag-keeping decoding (:func:`decode_keeping_tags`);
* :mod:`~pr1_eval.protocol.parse` — the structure parser and format check;
* :mod:`~pr1_eval.protocol.layout` — the one block layout (:func:`normalise_block_layout`);
* :mod:`~pr1_eval.protocol.mask` — the structured (Unseen) mask and positions;
* :mod:`~pr1_eval.protocol.forkjoin` — the fork-join step machine both rollouts drive.

Names are loaded on first use, so importing the tags does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ALL_TAGS": "tags", "resolve_tag_ids": "tags", "single_token_tag_ids": "tags",
    "eos_token_ids": "eos", "model_eos_token_ids": "eos",
    "decode_keeping_tags": "decode",
    "parse_structure": "parse",
    "normalise_block_layout": "layout",
    "StructureTracker": "mask", "build_mask_and_positions": "mask", "additive_mask": "mask",
    "ForkJoinMachine": "forkjoin", "ForkJoinParams": "forkjoin", "Generation": "forkjoin", "run_async": "forkjoin",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pr1_eval.protocol' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pr1_eval.protocol.{module}"), name)
