"""The structured ("Unseen") attention mask and position ids, in one place.

Models trained with the structured variant of Parallel-R1 never saw a sibling path: inside a
``<Parallel>`` block every ``<Path>`` restarts at position ``p + 1`` (``p`` = position of
``<Parallel>``) and attends only to the shared prefix and to itself; ``</Parallel>`` sits at
``p + L + 1`` (``L`` = token length of the longest path, both tags included) and it and every
later token attend to everything before them. Decoding such a model exactly (the structured
decoder) and training it (``repro/``) must agree token for token, so both use this module:
:func:`build_mask_and_positions` for a whole sequence, :class:`StructureTracker` for one token at
a time. The function is a fold of the tracker, so the two cannot drift apart.

Rules beyond the paper's well-formed layout (which ``<Path>…</Path><Path>…</Path>`` never
exercises), chosen so that every sequence has a mask:

* tokens between ``<Parallel>`` and the first ``<Path>`` are shared prefix (causal); ``p`` is then
  the position of the last of them;
* tokens after a ``</Path>`` and before the next ``<Path>`` or ``</Parallel>`` belong to the path
  they follow (hidden from its siblings, counted in its length);
* ``<Summary>``/``</Summary>`` never change the mask;
* a tag that breaks the grammar (``<Path>`` outside a block, a nested ``<Parallel>``, a ``<Path>``
  or ``</Parallel>`` inside an open path, a stray ``</Path>``/``</Parallel>``) makes the sequence
  *malformed* from that token on: it and every later token are plain causal (they attend to all
  earlier tokens) with positions ``max position so far + 1, + 2, …``. Nothing ever raises;
* a sequence that ends inside a block (cut off by the budget) simply ends: its mask so far is
  already exact;
* tokens before ``response_start`` (the prompt, which may mention the tags in plain words) are
  always causal with positions ``0 … response_start - 1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pr1_eval import tags as T
from pr1_eval.errors import Pr1EvalError

NO_PATH = -1
"""Block/path label of a token that is not inside a path (prompt, main line, summary, tags)."""


@dataclass(frozen=True)
class TokenSlot:
    """Where one token sits: its position id and the (block, path) it belongs to, or ``NO_PATH``."""

    position: int
    block: int = NO_PATH
    path: int = NO_PATH


class StructureTracker:
    """Incremental mask/position state over a token stream (see the module docstring for rules).

    ``push(token)`` returns the token's :class:`TokenSlot`. Token ``i`` may attend token ``j <= i``
    unless both sit in paths of the same block and the paths differ — which depends only on slots,
    so a decoder can build each new token's mask row from the slots pushed so far.
    """

    def __init__(self, tag_ids: Mapping[str, int], start_position: int = 0) -> None:
        self.ids = {tag: int(tag_ids[tag]) for tag in T.ALL_TAGS}
        self.next_pos = start_position
        self.max_pos = start_position - 1
        self.state = "main"  # main | pre | path | after_path | malformed
        self.block = NO_PATH
        self.path = NO_PATH
        self.base = 0  # p: position the paths of the open block restart after
        self.longest = 0
        self.path_len = 0
        self._n_blocks = 0
        self._n_paths = 0

    @property
    def malformed(self) -> bool:
        return self.state == "malformed"

    def _place(self, position: int, block: int = NO_PATH, path: int = NO_PATH) -> TokenSlot:
        self.next_pos = position + 1
        self.max_pos = max(self.max_pos, position)
        return TokenSlot(position, block, path)

    def _break(self) -> TokenSlot:
        self.state = "malformed"
        self.block = self.path = NO_PATH
        return self._place(self.max_pos + 1)

    def push(self, token: int) -> TokenSlot:
        """Place ``token`` after everything pushed so far."""
        ids = self.ids
        if self.state == "main":
            if token == ids[T.PARALLEL_OPEN]:
                self.state, self.longest = "pre", 0
                self.block, self._n_blocks = self._n_blocks, self._n_blocks + 1
                self.base = self.next_pos
                return self._place(self.next_pos)
            if token in (ids[T.PATH_OPEN], ids[T.PATH_CLOSE], ids[T.PARALLEL_CLOSE]):
                return self._break()
            return self._place(self.next_pos)
        if self.state == "malformed":
            return self._place(self.next_pos)
        if token == ids[T.PARALLEL_OPEN]:
            return self._break()
        if self.state == "path":
            return self._push_in_path(token)
        # pre (before the first path) or after_path (trailing tokens of the last path)
        if token == ids[T.PATH_OPEN]:
            self.state, self.path_len = "path", 1
            self.path, self._n_paths = self._n_paths, self._n_paths + 1
            self.longest = max(self.longest, 1)
            return self._place(self.base + 1, self.block, self.path)
        if token == ids[T.PARALLEL_CLOSE]:
            self.state, self.block, self.path = "main", NO_PATH, NO_PATH
            return self._place(self.base + self.longest + 1)
        if token == ids[T.PATH_CLOSE]:
            return self._break()
        if self.state == "pre":
            self.base = self.next_pos
            return self._place(self.next_pos)
        return self._extend_path()

    def _push_in_path(self, token: int) -> TokenSlot:
        if token in (self.ids[T.PATH_OPEN], self.ids[T.PARALLEL_CLOSE]):
            return self._break()
        if token == self.ids[T.PATH_CLOSE]:
            self.state = "after_path"
        return self._extend_path()

    def _extend_path(self) -> TokenSlot:
        self.path_len += 1
        self.longest = max(self.longest, self.path_len)
        return self._place(self.next_pos, self.block, self.path)


def build_mask_and_positions(
    token_ids: Sequence[int], tag_ids: Mapping[str, int], response_start: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask, position_ids)`` for one sequence: a bool ``[L, L]`` (True = row may attend column)
    and a long ``[L]``. Any number of blocks and paths; never raises on malformed input.

    ``response_start`` marks where the response begins: the prompt before it is plain causal.
    ``repro/`` trains with this function and the structured decoder decodes with the same rules.
    """
    length = len(token_ids)
    start = max(0, min(int(response_start), length))
    tracker = StructureTracker(tag_ids, start_position=start)
    positions = list(range(start))
    blocks = [NO_PATH] * start
    paths = [NO_PATH] * start
    for token in token_ids[start:]:
        slot = tracker.push(int(token))
        positions.append(slot.position)
        blocks.append(slot.block)
        paths.append(slot.path)
    return slots_to_mask(torch.tensor(blocks, dtype=torch.long), torch.tensor(paths, dtype=torch.long)), torch.tensor(
        positions, dtype=torch.long
    )


def slots_to_mask(blocks: torch.Tensor, paths: torch.Tensor) -> torch.Tensor:
    """The bool ``[L, L]`` mask from per-token block/path labels: causal minus sibling paths."""
    length = blocks.shape[0]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    in_path = paths >= 0
    siblings = (
        in_path[:, None] & in_path[None, :] & (blocks[:, None] == blocks[None, :]) & (paths[:, None] != paths[None, :])
    )
    return causal & ~siblings


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool mask (True = attend) → additive float mask for eager/sdpa attention.

    A 4-D bool or float mask is handed to attention unchanged by transformers 5.x; eager attention
    *adds* it to the scores, so it must be float. Blocked entries get the dtype's most negative
    finite value rather than ``-inf``, so a row that can see nothing (padding) gives a uniform
    softmax, never NaN.
    """
    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return out.masked_fill(~allowed, torch.finfo(dtype).min)


def resolve_tag_ids(tokenizer: Any) -> dict[str, int]:
    """Map the six tags to token ids; fail clearly when a tag is not a single token.

    Fork-join stops on ``</Path>`` and the structured mask keys on tag ids, so both need every tag
    to be exactly one token (as in Parallel-R1 checkpoints, where they are added special tokens).
    """
    out: dict[str, int] = {}
    for tag in T.ALL_TAGS:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        if len(ids) != 1:
            raise Pr1EvalError(
                f"tag {tag} is {len(ids)} tokens in this tokenizer, but fork-join and structured decoding need "
                "each of the six tags to be one (special) token; use a Parallel-R1 checkpoint's tokenizer, or "
                "--decoding sequential"
            )
        out[tag] = int(ids[0])
    return out
