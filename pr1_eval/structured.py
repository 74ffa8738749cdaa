"""The structured ("Unseen") mask and position ids: moved to :mod:`pr1_eval.protocol.mask`.

This module keeps the old import path working for code outside the package.
"""

from __future__ import annotations

from pr1_eval.protocol.mask import (
    NO_PATH,
    StructureTracker,
    TokenSlot,
    additive_mask,
    build_mask_and_positions,
    build_mask_and_positions_reference,
    slots_to_mask,
)
from pr1_eval.protocol.tags import resolve_tag_ids

__all__ = [
    "NO_PATH",
    "StructureTracker",
    "TokenSlot",
    "additive_mask",
    "build_mask_and_positions",
    "build_mask_and_positions_reference",
    "resolve_tag_ids",
    "slots_to_mask",
]
