"""Exact decoding for models trained with the structured ("Unseen") mask, on the HF engine.

A structured Parallel-R1 model was trained with sibling paths hidden from each other and with
every path restarting at ``p + 1``; sampling it with a plain causal mask shows it contexts it never
saw in training. This decoder samples token by token with a KV cache, feeding each new token with
its structural position id and a 4-D attention mask row that hides the sibling paths of its block
(:class:`pr1_eval.protocol.mask.StructureTracker`, the same rules as
:func:`pr1_eval.protocol.mask.build_mask_and_positions`, which training uses). Keys are cached with
the positions they were fed with, so the cache needs no splicing: the mask alone selects what each
new token sees. The result is exactly what one teacher-forced forward pass with the training mask
computes (the consistency test checks recorded log-probs against it to 1e-4). Recorded log-probs
are the raw model's (before temperature/top-k/top-p), as the HF engine records them; ``score``
runs the same loop on given responses.

Masks are additive float (eager attention adds them; sdpa accepts them) with each padding row
allowed to see itself, so no row is empty and nothing turns NaN. Rows that finish are dropped from
the batch and the cache. Each sample has its own seeded ``torch.Generator`` on the model's device
(CPU or CUDA), so a sample does not depend on how samples were batched, a seed reproduces it on
the same device, and no logits leave the GPU to be sampled.

Block limit, as fork-join: after the ``max_blocks``-th block's ``</Summary>`` the response ends
(finish ``block_limit``), and a ``<Parallel>`` that would open one block too many ends it before
that token; ``after_last_block="continue"`` lifts the limit (later blocks keep the structured
mask).

Wall clock: a batch of rows is one :class:`~pr1_eval.decoding.base.Wave` (kind ``batch``); a
sample's ``wall_s`` runs from its batch's prefill to the step that finished it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from pr1_eval.decoding.base import DecodedSample, Wave, request_seed
from pr1_eval.engines.base import Engine, SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.eos import eos_token_ids
from pr1_eval.protocol.forkjoin import AFTER_LAST_BLOCK
from pr1_eval.protocol.mask import NO_PATH, StructureTracker, TokenSlot, additive_mask
from pr1_eval.protocol.paper_settings import PAPER_MAX_BLOCKS
from pr1_eval.protocol.tags import resolve_tag_ids


@dataclass(frozen=True)
class _BlockLimit:
    """The paper's block cap on a token stream the model writes itself (fork-join's rule).

    Blocks are counted by ``<Parallel>`` tokens, as the structure parser counts them."""

    parallel_open: int
    summary_close: int
    max_blocks: int

    def refuses(self, tokens: list[int], token: int) -> bool:
        """``token`` would open a block past the cap: end the response before it."""
        return token == self.parallel_open and tokens.count(self.parallel_open) >= self.max_blocks

    def ends_after(self, tokens: list[int], tracker: StructureTracker) -> bool:
        """The token just pushed closed the summary of the last allowed block: end after it."""
        return (tokens[-1] == self.summary_close and tracker.state == "main"
                and tokens.count(self.parallel_open) >= self.max_blocks > 0)


@dataclass
class _Row:
    """One sample being decoded: its tracker, generator, budget and output so far.

    ``forced`` (scoring) replaces sampling with the given tokens.
    """

    prompt_len: int
    tracker: StructureTracker
    generator: torch.Generator
    budget: int
    forced: list[int] | None = None
    limit: _BlockLimit | None = None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str = ""
    ended: float | None = None  # perf_counter() when the row finished


def _model_of(engine: Engine) -> Any:
    model = getattr(engine, "model", None)
    if model is None or not callable(model):
        raise Pr1EvalError(
            f"--decoding structured needs direct access to a transformers model (the HF engine); the {engine.name!r} "
            "engine does not expose one. Run it with --engine hf"
        )
    layer_types = getattr(model.config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        raise Pr1EvalError("--decoding structured supports full-attention models only (this one has sliding-window layers)")
    return model


def sample_tokens(logits: torch.Tensor, sampling: SamplingConfig, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """One token per row of ``logits`` ([B, V]) with temperature / top-k / top-p, as HF generate does.

    Row ``i`` draws from ``generators[i]``, which must live on ``logits``' device."""
    if sampling.temperature <= 0:
        return logits.argmax(dim=-1)
    scores = logits.float() / sampling.temperature
    if sampling.top_k and sampling.top_k > 0:
        kth = scores.topk(min(sampling.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative - sorted_scores.softmax(dim=-1) >= sampling.top_p  # keeps the top token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    probs = scores.softmax(dim=-1)
    picks = [torch.multinomial(probs[row], 1, generator=generators[row]) for row in range(probs.shape[0])]
    return torch.cat(picks)


class _Labels:
    """Per cached column of each row: is it a real token, and which (block, path) it sits in.

    The mask row of a new token is "every real column, minus the sibling paths of its own block",
    computed from these labels, so the cache never needs reordering.
    """

    def __init__(self, prompts: list[list[int]]) -> None:
        width = max(len(p) for p in prompts)
        self.width = width
        self.valid = torch.zeros((len(prompts), width), dtype=torch.bool)
        for r, prompt in enumerate(prompts):
            self.valid[r, width - len(prompt) :] = True
        self.blocks = torch.full((len(prompts), width), NO_PATH, dtype=torch.long)
        self.paths = torch.full((len(prompts), width), NO_PATH, dtype=torch.long)

    def padded_ids(self, prompts: list[list[int]], pad: int) -> torch.Tensor:
        ids = torch.full((len(prompts), self.width), pad, dtype=torch.long)
        for r, prompt in enumerate(prompts):
            if prompt:
                ids[r, self.width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        return ids

    def prompt_positions(self, prompts: list[list[int]]) -> torch.Tensor:
        """0, 1, … over each prompt's real tokens, as in an unpadded forward (pads get 0)."""
        positions = torch.zeros((len(prompts), self.width), dtype=torch.long)
        for r, prompt in enumerate(prompts):
            positions[r, self.width - len(prompt) :] = torch.arange(len(prompt))
        return positions

    def prefill_mask(self) -> torch.Tensor:
        """[B, 1, W, W]: causal over real tokens; a pad row sees itself only (never an empty row)."""
        causal = torch.ones(self.width, self.width, dtype=torch.bool).tril()
        return ((causal & self.valid[:, None, :]) | torch.eye(self.width, dtype=torch.bool))[:, None]

    def select(self, index: torch.Tensor) -> None:
        self.valid, self.blocks, self.paths = self.valid[index], self.blocks[index], self.paths[index]

    def append(self, slots: Sequence[TokenSlot]) -> torch.Tensor:
        """Add one column (the new tokens); return their [B, T+1] bool mask rows."""
        block = torch.tensor([s.block for s in slots], dtype=torch.long)[:, None]
        path = torch.tensor([s.path for s in slots], dtype=torch.long)[:, None]
        siblings = (self.paths >= 0) & (path >= 0) & (self.blocks == block) & (self.paths != path)
        ones = torch.ones(len(slots), 1, dtype=torch.bool)
        row_mask = torch.cat([self.valid & ~siblings, ones], dim=1)
        self.valid = torch.cat([self.valid, ones], dim=1)
        self.blocks = torch.cat([self.blocks, block], dim=1)
        self.paths = torch.cat([self.paths, path], dim=1)
        return row_mask


class StructuredDecoder:
    """Token-by-token sampling under the structured mask (see the module docstring)."""

    name = "structured"

    def __init__(self, max_blocks: int = PAPER_MAX_BLOCKS, after_last_block: str = "end") -> None:
        if max_blocks < 0:
            raise Pr1EvalError(f"--max-blocks must be 0 or more, got {max_blocks}")
        if after_last_block not in AFTER_LAST_BLOCK:
            raise Pr1EvalError(f"--after-last-block must be one of {', '.join(AFTER_LAST_BLOCK)}, got {after_last_block!r}")
        self.max_blocks = max_blocks
        self.after_last_block = after_last_block
        self.waves: list[Wave] = []
        """Every batch of the last :meth:`decode`: rows and seconds."""

    def describe(self) -> dict[str, Any]:
        """Mode and every protocol parameter for ``run.json``."""
        return {
            "mode": self.name, "mask": "pr1_eval.protocol.mask (structured: sibling paths hidden, paths restart at p+1)",
            "max_blocks": self.max_blocks, "after_last_block": self.after_last_block,
            "response_budget": "sampling.max_new_tokens",
            "sampling_generator": "one torch.Generator per sample on the model's device, seeded from the run seed and request id",
        }

    def decode(
        self, engine: Engine, contexts: Sequence[Sequence[int]], k: int, sampling: SamplingConfig, request_ids: Sequence[str]
    ) -> list[list[DecodedSample]]:
        """``k`` samples per context; every sample records its per-token log-probs."""
        model = _model_of(engine)
        tag_ids = resolve_tag_ids(engine.tokenizer)
        eos = set(getattr(engine, "eos_token_ids", None) or eos_token_ids(engine.tokenizer))
        pad = engine.tokenizer.pad_token_id if engine.tokenizer.pad_token_id is not None else next(iter(eos))
        device = next(model.parameters()).device
        limit = _BlockLimit(tag_ids[T.PARALLEL_OPEN], tag_ids[T.SUMMARY_CLOSE], self.max_blocks) if self.after_last_block == "end" else None
        jobs = [
            (p, j, list(ctx), request_seed(sampling.seed, f"{rid}#{j}"))
            for p, (ctx, rid) in enumerate(zip(contexts, request_ids, strict=True))
            for j in range(k)
        ]
        out: list[list[DecodedSample]] = [[] for _ in contexts]
        batch_size = int(getattr(engine, "max_batch_size", 64))
        self.waves = []
        for start in range(0, len(jobs), batch_size):
            chunk = jobs[start : start + batch_size]
            rows = [
                _Row(len(ctx), StructureTracker(tag_ids, start_position=len(ctx)), self._generator(seed, device),
                     sampling.max_new_tokens, limit=limit)
                for _, _, ctx, seed in chunk
            ]
            begun = time.perf_counter()
            with torch.no_grad():
                self._decode_batch(model, [ctx for _, _, ctx, _ in chunk], rows, sampling, {*eos, pad}, pad,
                                   getattr(engine, "on_decoding_step", None))
            ended = time.perf_counter()
            self.waves.append(Wave("batch", len(rows), ended - begun))
            for (p, _, _, _), row in zip(chunk, rows, strict=True):
                out[p].append(self._result(engine, row, (row.ended or ended) - begun))
        return out

    def score(self, engine: Engine, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]]) -> list[list[float]]:
        """Log-probs of given responses, computed by the decoding loop itself (same cache, masks and
        positions) with the responses fed instead of sampled: the incremental half of the
        consistency check, and a way to score any response under the structured model."""
        model = _model_of(engine)
        tag_ids = resolve_tag_ids(engine.tokenizer)
        pad = engine.tokenizer.pad_token_id if engine.tokenizer.pad_token_id is not None else 0
        rows = [
            _Row(len(p), StructureTracker(tag_ids, start_position=len(p)), torch.Generator(), len(r), forced=list(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
        batch_size = int(getattr(engine, "max_batch_size", 64))
        for start in range(0, len(rows), batch_size):
            with torch.no_grad():
                self._decode_batch(model, [list(p) for p in prompts[start : start + batch_size]],
                                   rows[start : start + batch_size], SamplingConfig(), set(), pad)
        return [row.logprobs for row in rows]

    @staticmethod
    def _generator(seed: int | None, device: torch.device) -> torch.Generator:
        """A generator on the logits' device: ``torch.multinomial`` refuses a CPU generator for CUDA
        probabilities, and sampling there keeps the logits on the GPU."""
        generator = torch.Generator(device=device)
        if seed is None:
            generator.seed()  # non-deterministic, and leaves torch's global generator alone
        else:
            generator.manual_seed(seed)
        return generator

    def _decode_batch(
        self, model: Any, prompts: list[list[int]], rows: list[_Row], sampling: SamplingConfig, eos: set[int], pad: int,
        on_step: Callable[[int], None] | None = None,
    ) -> None:
        """Prefill the left-padded prompts, then add one token per live row per step.

        ``eos`` includes the pad id: like the HF engine, a sampled pad ends the sample. ``on_step``
        is told the live rows of every step (the run's progress: a batch takes minutes on a CPU).
        """
        from transformers import DynamicCache

        device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        cache = DynamicCache(config=model.config)
        labels = _Labels(prompts)
        logits = model(
            input_ids=labels.padded_ids(prompts, pad).to(device), attention_mask=additive_mask(labels.prefill_mask(), dtype).to(device),
            position_ids=labels.prompt_positions(prompts).to(device), past_key_values=cache, use_cache=True, logits_to_keep=1,
        ).logits[:, -1]
        live = [i for i, row in enumerate(rows) if row.budget > 0]
        if len(live) < len(rows):
            index = torch.tensor(live, dtype=torch.long)
            cache.batch_select_indices(index.to(device))
            logits = logits[index.to(logits.device)]
            labels.select(index)
        while live:
            if rows[live[0]].forced is not None:
                chosen = torch.tensor([rows[i].forced[len(rows[i].tokens)] for i in live], dtype=torch.long)  # type: ignore[index]
            else:
                chosen = sample_tokens(logits, sampling, [rows[i].generator for i in live])
            raw = logits.float().log_softmax(dim=-1).gather(-1, chosen[:, None].to(logits.device)).squeeze(-1).tolist()
            keep, slots = self._advance(rows, live, chosen.tolist(), raw, eos)
            if on_step is not None:
                on_step(len(live))
            if not keep:
                return
            if len(keep) < len(live):  # drop finished rows from the batch and the cache
                index = torch.tensor(keep, dtype=torch.long)
                cache.batch_select_indices(index.to(device))
                labels.select(index)
            live = [live[b] for b in keep]
            row_mask = labels.append(slots)
            logits = model(
                input_ids=torch.tensor([[rows[i].tokens[-1]] for i in live], dtype=torch.long).to(device),
                attention_mask=additive_mask(row_mask[:, None, None, :], dtype).to(device),
                position_ids=torch.tensor([[slot.position] for slot in slots], dtype=torch.long).to(device),
                past_key_values=cache, use_cache=True,
            ).logits[:, -1]

    @staticmethod
    def _advance(
        rows: list[_Row], live: list[int], chosen: list[int], raw: list[float], eos: set[int]
    ) -> tuple[list[int], list[TokenSlot]]:
        """Record each live row's new token; return the batch indices still running and their slots."""
        keep, slots = [], []
        for b, (i, token) in enumerate(zip(live, chosen, strict=True)):
            row = rows[i]
            if token in eos:
                row.finish, row.ended = "eos", time.perf_counter()
                continue
            if row.limit is not None and row.limit.refuses(row.tokens, token):
                row.finish, row.ended = "block_limit", time.perf_counter()
                continue
            row.tokens.append(token)
            row.logprobs.append(raw[b])
            slot = row.tracker.push(token)
            if row.limit is not None and row.limit.ends_after(row.tokens, row.tracker):
                row.finish, row.ended = "block_limit", time.perf_counter()
                continue
            if len(row.tokens) >= row.budget:
                row.finish, row.ended = "length", time.perf_counter()
                continue
            keep.append(b)
            slots.append(slot)
        return keep, slots

    @staticmethod
    def _result(engine: Engine, row: _Row, wall_s: float) -> DecodedSample:
        return DecodedSample(
            token_ids=row.tokens,
            text=engine.tokenizer.decode(row.tokens, skip_special_tokens=False),
            finish_reason=row.finish or "length",
            engine_calls=1,
            critical_path_tokens=row.tracker.max_pos + 1 - row.prompt_len,
            logprobs=row.logprobs,
            wall_s=wall_s,
        )
