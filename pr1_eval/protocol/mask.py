"""The structured ("Unseen") attention mask and position ids, in one place.

Models trained with the structured variant of Parallel-R1 never saw a sibling path: inside a
``<Parallel>`` block every ``<Path>`` restarts at position ``p + 1`` (``p`` = position of
``<Parallel>``) and attends only to the shared prefix and to itself; ``</Parallel>`` sits at
``p + L + 1`` (``L`` = token length of the longest path, both tags included) and it and every
later token attend to everything before them. Decoding such a model exactly (the structured
decoder) and training it (``repro/``) must agree token for token, so both use this module:
:func:`build_mask_and_positions` for a whole sequence, :class:`StructureTracker` for one token at
a time. Both are driven by the same tracker, so they cannot drift apart.

Rules beyond the paper's well-formed layout (which ``<Path>…</Path><Path>…</Path>`` never
exercises), chosen so that every sequence has a mask:

* tokens between ``<Parallel>`` and the first ``<Path>`` are shared prefix (causal); ``p`` is then
  the position of the last of them;
* tokens after a ``</Path>`` and before the next ``<Path>`` or ``</Parallel>`` belong to the path
  they follow (hidden from its siblings, counted in its length). The SFT data is normalised so
  that no such token exists (:mod:`pr1_eval.protocol.layout`), and fork-join never writes one;
* ``<Summary>``/``</Summary>`` never change the mask;
* a tag that breaks the grammar (``<Path>`` outside a block, a nested ``<Parallel>``, a ``<Path>``
  or ``</Parallel>`` inside an open path, a stray ``</Path>``/``</Parallel>``) makes the sequence
  *malformed* from that token on: it and every later token are plain causal (they attend to all
  earlier tokens) with positions ``max position so far + 1, + 2, …``. Nothing ever raises;
* a sequence that ends inside a block (cut off by the budget) simply ends: its mask so far is
  already exact;
* tokens before ``response_start`` (the prompt, which may mention the tags in plain words) are
  always causal with positions ``0 … response_start - 1``.

Speed: :func:`build_mask_and_positions` visits only the four structural tags (runs of ordinary
tokens are placed in bulk), starts from a causal matrix and blanks one rectangle per pair of
sibling paths, so a 5,000-token response costs a few milliseconds on one CPU core (mostly the
25 MB causal matrix itself; ``bench/bench_mask.py``) instead of a Python loop over 25 M cells.
:func:`build_mask_and_positions_reference` is the token-by-token fold it is tested against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from pr1_eval.protocol import tags as T

NO_PATH = -1
"""Block/path label of a token that is not inside a path (prompt, main line, summary, tags)."""

STRUCTURAL_TAGS = (T.PARALLEL_OPEN, T.PARALLEL_CLOSE, T.PATH_OPEN, T.PATH_CLOSE)
"""The only tags that move positions or hide tokens; every other token (summary tags included)
is placed like plain text."""


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
        self.n_blocks = 0
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
                self.block, self.n_blocks = self.n_blocks, self.n_blocks + 1
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

    def push_run(self, n: int) -> TokenSlot:
        """Place ``n`` consecutive non-structural tokens at once; returns the first one's slot
        (the run has consecutive positions and one label). Same state as ``n`` calls of
        :meth:`push` with tokens that are not in :data:`STRUCTURAL_TAGS`."""
        first = self.next_pos
        block = path = NO_PATH
        if self.state in ("path", "after_path"):
            self.path_len += n
            self.longest = max(self.longest, self.path_len)
            block, path = self.block, self.path
        elif self.state == "pre":
            self.base = first + n - 1
        self._place(first + n - 1)
        return TokenSlot(first, block, path)

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


@dataclass
class Layout:
    """Where every token of one sequence sits: position ids and the token span of each path.

    ``paths[(block, path)] = (start, end)`` indexes the sequence (end exclusive); a path's tokens
    are contiguous by construction.
    """

    positions: torch.Tensor
    paths: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def sibling_rectangles(self) -> list[tuple[int, int, int, int]]:
        """``(row_start, row_end, col_start, col_end)`` of every later path's rows over an earlier
        sibling's columns: the only causal cells the structured mask hides."""
        by_block: dict[int, list[tuple[int, int]]] = {}
        for (block, _), span in sorted(self.paths.items(), key=lambda item: item[1]):
            by_block.setdefault(block, []).append(span)
        return [
            (later[0], later[1], earlier[0], earlier[1])
            for spans in by_block.values()
            for j, later in enumerate(spans)
            for earlier in spans[:j]
        ]


def _as_array(token_ids: Sequence[int] | torch.Tensor) -> np.ndarray:
    """The ids as an int64 numpy array (``np.asarray`` on a list is ~5x faster than ``torch.tensor``)."""
    if isinstance(token_ids, torch.Tensor):
        return token_ids.detach().to("cpu", torch.long).numpy()
    return np.asarray(token_ids, dtype=np.int64).reshape(-1)


def structured_layout(
    token_ids: Sequence[int] | torch.Tensor, tag_ids: Mapping[str, int], response_start: int = 0
) -> Layout:
    """Position ids and path spans of one sequence (rules in the module docstring)."""
    ids = _as_array(token_ids)
    length = len(ids)
    start = max(0, min(int(response_start), length))
    structural = np.array([int(tag_ids[t]) for t in STRUCTURAL_TAGS], dtype=np.int64)
    hits = (np.flatnonzero(np.isin(ids[start:], structural)) + start).tolist()
    positions = np.empty(length, dtype=np.int64)
    positions[:start] = np.arange(start)
    tracker = StructureTracker(tag_ids, start_position=start)
    layout = Layout(torch.empty(0, dtype=torch.long))

    def label(slot: TokenSlot, first: int, end: int) -> None:
        if slot.path != NO_PATH:
            key = (slot.block, slot.path)
            begin = layout.paths.get(key, (first, end))[0]
            layout.paths[key] = (begin, end)

    cursor = start
    for hit in [*hits, length]:
        if hit > cursor:
            slot = tracker.push_run(hit - cursor)
            positions[cursor:hit] = np.arange(slot.position, slot.position + hit - cursor)
            label(slot, cursor, hit)
        if hit < length:
            slot = tracker.push(int(ids[hit]))
            positions[hit] = slot.position
            label(slot, hit, hit + 1)
        cursor = hit + 1
    layout.positions = torch.from_numpy(positions)
    return layout


def causal_mask(length: int, device: torch.device | str | None = None) -> torch.Tensor:
    """A fresh bool lower-triangular ``[length, length]`` matrix (numpy's ``tri`` on CPU, which is
    several times faster than torch's ``tril`` there)."""
    if device is None or torch.device(device).type == "cpu":
        return torch.from_numpy(np.tri(length, dtype=bool))
    return torch.ones(length, length, dtype=torch.bool, device=device).tril_()


def build_mask_and_positions(
    token_ids: Sequence[int] | torch.Tensor,
    tag_ids: Mapping[str, int],
    response_start: int = 0,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask, position_ids)`` for one sequence: a bool ``[L, L]`` (True = row may attend column)
    and a long ``[L]``. Any number of blocks and paths; never raises on malformed input.

    ``response_start`` marks where the response begins: the prompt before it is plain causal.
    ``device`` builds the mask there (a GPU builds the 25 MB matrix of a 5,000-token sequence in
    microseconds). ``repro/`` trains with this function and the structured decoder decodes with the
    same tracker.
    """
    layout = structured_layout(token_ids, tag_ids, response_start)
    mask = causal_mask(len(layout.positions), device)
    for row_start, row_end, col_start, col_end in layout.sibling_rectangles():
        mask[row_start:row_end, col_start:col_end] = False
    return mask, layout.positions.to(mask.device)


def build_mask_and_positions_reference(
    token_ids: Sequence[int], tag_ids: Mapping[str, int], response_start: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same result as :func:`build_mask_and_positions`, one :meth:`StructureTracker.push` per
    token and a dense label comparison: the definition the fast builder is tested against (and
    the baseline of ``bench/bench_mask.py``)."""
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
    mask = slots_to_mask(torch.tensor(blocks, dtype=torch.long), torch.tensor(paths, dtype=torch.long))
    return mask, torch.tensor(positions, dtype=torch.long)


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
