"""Training of the trained tiny models: a fixed number of steps, on one thread, bit-reproducible.

Why it is written this way:

* **Step count, never a deadline.** A time cap makes the weights depend on how busy the machine
  was; the recipe runs exactly ``steps`` optimiser steps.
* **One intra-op thread.** With two threads PyTorch splits large float32 reductions (loss means,
  gradient sums) into per-thread partial sums, so the low bits, and after a few hundred steps the
  sampled text, depend on the thread count. :func:`train_tiny_model` trains under
  ``torch.set_num_threads(1)`` and restores the caller's setting afterwards; a model this small
  loses nothing by it (it trained faster on one thread than on two shared cores).
* **The prompt prefix runs once per batch.** All rows of a step share the chat header and the
  instruction (about 150 tokens for the paper's template); :func:`_step_loss` runs that prefix at
  batch size 1 and gives its key/value cache to every row, and computes the LM head only where a
  label is, which together make a step several times cheaper.
* **Numbers weigh less.** The traces' numbers are random; at full weight their unlearnable loss
  drowns the format. At a quarter weight the same steps give markedly better-formed samples (see
  the measurements below :class:`Recipe`).
* **Two masks, one code path.** ``mask="causal"`` is ordinary causal-LM training; ``"structured"``
  trains the Unseen way, with :func:`pr1_eval.protocol.mask.build_mask_and_positions` (the function
  repro's structured actor trains with and the structured decoder decodes with) giving each row's
  4-D mask and position ids.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pr1_eval.protocol.tags import resolve_tag_ids
from pr1_eval.testing import tiny_traces

MASKS = ("causal", "structured")
ProgressFn = Callable[[int, int, float], None]
"""``progress(step, steps, loss)``, called after every optimiser step."""


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the trained weights besides the seed and the template.

    Part of the cache key (through ``tiny_model.CACHE_VERSION``): change a field, bump the version.
    """

    steps: int = 300
    lr: float = 6e-3
    batch_size: int = 8
    long_fraction: float = 0.5
    mask: str = "causal"
    number_weight: float = 0.25
    """Loss weight of number tokens (see :func:`token_weights`)."""
    causal_fraction: float = 0.0
    """With the structured mask: the share of batches trained under the causal mask instead (same
    Unseen traces). Why: a real Unseen model is a causal LM before its structured SFT, and the Unseen
    rollout (fork-join) writes the summary after the paths laid end to end, a causal layout; a model
    that never saw it writes ``</Path>`` inside the summary on some seeds (see STRUCTURED_RECIPE)."""


# How the recipes were chosen (seed 0, one thread; "quality" = share of 32 samples at temperature 1.0
# that are well formed with a block, for "What is 3 + 4?" with the paper's template / the short one /
# a long competition problem). Causal, numbers at full weight: batch 24 x 150 steps 0.75/0.69/0.75 in
# 25 CPU s of training; batch 12 x 250 0.81/0.81/0.81 in 26 s; batch 8 x 300 0.88/0.84/0.91 in 22 s;
# batch 4 x 400 0.84/0.78/0.88 in 20 s: many small steps beat few large ones at equal compute (the
# old recipe, batch 24 x 300, spent three times as much). Numbers at weight 0.25: batch 8 x 300
# 0.97/0.91/0.94, x 220 0.88/0.91/0.94 in 13 s, hence 220 steps for the causal kind. The Unseen kind
# (structured decoding, 4 problems x 8, 200 new tokens): 0.91/0.81 (short/paper template) at 300
# steps, 0.63/0.75 at 220, 0.56/0.44 at 300 with numbers at full weight, hence 300 steps. Under
# the Unseen stage's fork-join rollout (two paths end to end, 96 tokens, paper template, 64 samples):
# well formed 0.31-0.80 by seed with the structured mask alone, 0.92-0.94 with a third of the batches
# causal two-path traces (causal_fraction=0.3; 500 structured-only steps: 0.22 for seed 1002).


def _encode(tokenizer: Any, traces: list[tiny_traces.Trace], prompt_cache: dict[str, list[int]]) -> list[tuple[list[int], list[int]]]:
    """For each trace, the token ids of its chat prompt and of its response followed by eos.

    Prompts are rendered exactly as the harness renders them (chat template, generation prompt).
    There are few distinct prompts, so their ids are cached; responses are encoded in one call.
    """
    missing = sorted({t.user for t in traces} - prompt_cache.keys())
    if missing:
        rendered = [
            tokenizer.apply_chat_template([{"role": "user", "content": m}], tokenize=False, add_generation_prompt=True)
            for m in missing
        ]
        prompt_cache.update(zip(missing, tokenizer(rendered, add_special_tokens=False)["input_ids"], strict=True))
    responses = tokenizer([t.response for t in traces], add_special_tokens=False)["input_ids"]
    return [(prompt_cache[t.user], [*r, tokenizer.eos_token_id]) for t, r in zip(traces, responses, strict=True)]


def _row_layout(prompt: list[int], response: list[int], tag_ids: dict[str, int] | None) -> tuple[Any, Any]:
    """``(mask [L, L] bool, positions [L])`` of one full row: causal, or the structured mask."""
    import torch

    length = len(prompt) + len(response)
    if tag_ids is None:
        return torch.ones(length, length, dtype=torch.bool).tril(), torch.arange(length)
    from pr1_eval.protocol.mask import build_mask_and_positions

    mask, positions = build_mask_and_positions(prompt + response, tag_ids, response_start=len(prompt))
    return mask, positions


def _batch(encoded: list[tuple[list[int], list[int]]], pad_id: int, tag_ids: dict[str, int] | None) -> dict[str, Any]:
    """Tensors for one step: the prompt prefix all rows share, and the right-padded rest of each
    row with its labels (response tokens only), 4-D additive mask and position ids.

    Mask columns span prefix + row; a padding row sees itself only, so no softmax row is empty.
    """
    import torch

    from pr1_eval.protocol.mask import additive_mask

    prompts = [p for p, _ in encoded]
    shared = min(len(os.path.commonprefix(prompts)), min(len(p) for p in prompts) - 1)
    width = max(len(p) + len(r) for p, r in encoded) - shared
    allowed = torch.zeros(len(encoded), 1, width, shared + width, dtype=torch.bool)
    allowed[:, 0, :, shared:] = torch.eye(width, dtype=torch.bool)
    positions = torch.zeros(len(encoded), width, dtype=torch.long)
    ids, labels = [], []
    for row, (prompt, response) in enumerate(encoded):
        mask, pos = _row_layout(prompt, response, tag_ids)
        length = len(prompt) + len(response) - shared
        allowed[row, 0, :length, : shared + length] = mask[shared:]
        positions[row, :length] = pos[shared:]
        pad = width - length
        ids.append(prompt[shared:] + response + [pad_id] * pad)
        labels.append([-100] * (len(prompt) - shared) + response + [-100] * pad)
    return {
        "prefix": torch.tensor([prompts[0][:shared]], dtype=torch.long),
        "input_ids": torch.tensor(ids),
        "labels": torch.tensor(labels),
        "attention_mask": additive_mask(allowed, torch.float32),
        "position_ids": positions,
    }


def _step_loss(model: Any, batch: dict[str, Any]) -> Any:
    """Mean next-token cross-entropy over the response tokens of a :func:`_batch`.

    The shared prefix runs once (batch 1) and its key/value cache, repeated per row, is every
    row's context; gradients flow through it, so this is the loss of the full rows. The LM head
    runs on labelled positions only (the response is a fraction of each row).
    """
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    if batch["prefix"].shape[1]:
        model.model(input_ids=batch["prefix"], past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(batch["input_ids"].shape[0])
    hidden = model.model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    targets = batch["labels"][:, 1:]
    keep = targets != -100
    logits = model.lm_head(hidden[:, :-1][keep])
    losses = torch.nn.functional.cross_entropy(logits, targets[keep], reduction="none")
    weights = batch["token_weights"][targets[keep]]
    return (losses * weights).sum() / weights.sum()


def _lr_at(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over 10 steps, then cosine decay to 5% of ``peak``: a short run needs both."""
    warm = min(1.0, (step + 1) / 10)
    return peak * warm * max(0.05, 0.5 * (1 + math.cos(math.pi * step / max(1, steps))))


def _batches(
    tokenizer: Any, rng: random.Random, recipe: Recipe, long_template: str, tag_ids: dict[str, int] | None
) -> Iterator[dict[str, Any]]:
    """Endless training batches; all rows of a batch share a template and maybe a filler.

    Sharing is what lets :func:`_step_loss` run the prompt prefix once per batch. Mixing the long
    template with a short one teaches the model to answer in format whatever instruction precedes
    the problem; filler (:func:`tiny_traces.filler_text`, in a share
    :data:`tiny_traces.FILLER_FRACTION` of batches) does the same for long, LaTeX-laden benchmark
    problems. Rows are drawn four batches at a time and sorted by length, so little compute goes
    to padding.
    """
    pool_batches = 4
    unseen = tag_ids is not None
    weights = token_weights(tokenizer, recipe.number_weight)
    prompt_cache: dict[str, list[int]] = {}
    while True:
        template = long_template if rng.random() < recipe.long_fraction else tiny_traces.SHORT_TEMPLATE
        filler = tiny_traces.filler_text(rng) if rng.random() < tiny_traces.FILLER_FRACTION else None
        causal = unseen and recipe.causal_fraction > 0 and rng.random() < recipe.causal_fraction
        pool = [tiny_traces.make_trace(rng, template, filler, unseen and not causal)
                for _ in range(recipe.batch_size * pool_batches)]
        encoded = sorted(_encode(tokenizer, pool, prompt_cache), key=lambda pair: len(pair[0]) + len(pair[1]))
        chunks = [encoded[i : i + recipe.batch_size] for i in range(0, len(encoded), recipe.batch_size)]
        rng.shuffle(chunks)
        for chunk in chunks:
            yield {**_batch(chunk, tokenizer.pad_token_id, None if causal else tag_ids), "token_weights": weights}


def token_weights(tokenizer: Any, number_weight: float) -> Any:
    """Loss weight per vocabulary id: ``number_weight`` for tokens that are digits (with an optional
    leading space), 1 for the rest.

    Why: the numbers in the traces are random and cannot be learnt; at full weight their noisy
    gradients make up most of the loss and slow down learning the format, which is what the tiny
    model is for.
    """
    import torch

    weights = torch.ones(len(tokenizer))
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id]).strip()
        if text.isdigit():
            weights[token_id] = number_weight
    return weights


def _fit(model: Any, batches: Iterator[dict[str, Any]], recipe: Recipe, progress: ProgressFn | None) -> list[float]:
    """The optimisation loop: AdamW, clipped gradients, :func:`_lr_at` schedule, ``recipe.steps``
    steps exactly. Returns the per-step losses."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), weight_decay=0.0)
    model.train()
    losses: list[float] = []
    for step in range(recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, recipe.steps, recipe.lr)
        loss = _step_loss(model, next(batches))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.item()))
        if progress is not None:
            progress(step + 1, recipe.steps, losses[-1])
    model.eval()
    return losses


def train_tiny_model(
    model: Any, tokenizer: Any, long_template: str, recipe: Recipe, seed: int, progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Fit ``model`` in place on synthetic traces; returns the manifest fields that describe the run.

    Deterministic: the traces come from ``random.Random(seed)``, torch's RNG is seeded (and the
    caller's restored), and everything runs on one intra-op thread (see the module docstring).
    """
    import torch

    if recipe.mask not in MASKS:
        raise ValueError(f"unknown training mask {recipe.mask!r}; expected one of {MASKS}")
    tag_ids = None
    if recipe.mask == "structured":
        tag_ids = resolve_tag_ids(tokenizer)
    start, cpu_start = time.perf_counter(), time.process_time()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            batches = _batches(tokenizer, random.Random(seed), recipe, long_template, tag_ids)
            losses = _fit(model, batches, recipe, progress)
    finally:
        torch.set_num_threads(threads)
    tail = losses[-20:]
    return {
        "steps": len(losses),
        "train": {**dataclasses.asdict(recipe), "intra_op_threads": 1},
        "loss_first": round(losses[0], 4),
        "loss_final": round(sum(tail) / len(tail), 4),
        "loss_curve": [round(sum(w) / len(w), 3) for w in (losses[i : i + 25] for i in range(0, len(losses), 25))],
        "train_seconds": round(time.perf_counter() - start, 3),
        "train_cpu_seconds": round(time.process_time() - cpu_start, 3),
    }


class StepReporter:
    """Progress of a training run on stderr: a tqdm bar on a terminal, else a line every 5 s
    (logs and pipes get news too, never a flood)."""

    def __init__(self, label: str, every_seconds: float = 5.0) -> None:
        self.label = label
        self.every = every_seconds
        self.started = time.perf_counter()
        self.last = self.started
        self.bar: Any = None
        if sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(desc=label, unit="step", file=sys.stderr, leave=False)

    def __call__(self, step: int, steps: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.total = steps
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            self.bar.update(1)
            if step == steps:
                self.bar.close()
            return
        now = time.perf_counter()
        if now - self.last >= self.every or step == steps:
            self.last = now
            elapsed = now - self.started
            left = elapsed / step * (steps - step)
            print(f"{self.label}: step {step}/{steps}, loss {loss:.3f}, {elapsed:.0f} s elapsed, ~{left:.0f} s left",
                  file=sys.stderr, flush=True)
