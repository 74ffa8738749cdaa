"""Path diversity and block roles of the selected blocks, on a bounded random sample.

Why a sample: BLEU costs a few hundred microseconds per pair and roles may call math-verify
(both kept on disk once computed: :mod:`analysis.pipeline.scheduled`),
so all 150,000 blocks of a 96,000-response sweep would take minutes. A uniform random sample
of at most ``max_blocks`` blocks per run × task (seed 0, so every rerun and every page shows the
same numbers) estimates each mean well (200 blocks: standard error ≈ 0.07 σ); ``0`` takes them
all, and runs smaller than the cap are always complete. Pages say which they show.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.diversity.paths import block_diversity
from analysis.pipeline.scheduled import Embedder, pairs_of, roles_of
from dashboards.data import MEMO, Context

SEED = 0
_RUN_TASK = ["run", "task"]


def sampled_blocks(blocks: pd.DataFrame, max_blocks: int) -> pd.DataFrame:
    """At most ``max_blocks`` blocks per run × task (all when ``max_blocks`` is 0), in their original order."""
    if not max_blocks or blocks.empty or blocks.groupby(_RUN_TASK).size().max() <= max_blocks:
        return blocks
    parts = [group if len(group) <= max_blocks else group.sample(n=max_blocks, random_state=SEED)
             for _, group in blocks.groupby(_RUN_TASK, sort=False)]
    return pd.concat(parts).sort_index()


def embedder() -> Embedder:
    """One embedder per process (the model loads on the first cache miss only)."""
    return MEMO.get(("embedder",), lambda: Embedder())


def pair_sample(ctx: Context, max_blocks: int, embeddings: bool = False) -> pd.DataFrame:
    """The pairs frame (BLEU, and cosine when ``embeddings``) of the sampled blocks (memoised)."""
    return ctx.cached("pairs", lambda: pairs_of(sampled_blocks(ctx.blocks(), max_blocks),
                                                 embedder() if embeddings else None), max_blocks, embeddings)


def role_sample(ctx: Context, max_blocks: int, embeddings: bool = False) -> pd.DataFrame:
    """The sampled blocks with their roles and per-block diversity (memoised)."""

    def compute() -> pd.DataFrame:
        blocks = roles_of(sampled_blocks(ctx.blocks(), max_blocks))
        return block_diversity(blocks, pair_sample(ctx, max_blocks, embeddings))

    return ctx.cached("roles", compute, max_blocks, embeddings)


def sample_note(ctx: Context, max_blocks: int) -> str:
    """What the diversity numbers are computed on, for a caption."""
    sizes: Any = ctx.blocks().groupby(_RUN_TASK).size()
    if not max_blocks or sizes.empty or sizes.max() <= max_blocks:
        return "every block of the selection"
    return (f"a random sample (seed {SEED}) of at most {max_blocks} blocks per run × task, "
            f"of {int(sizes.sum())} blocks in all")
