"""Path diversity (claim c): are sibling paths genuinely different?

Two measures per pair of sibling paths, as in the paper (mean pairwise BLEU 0.0627, embedding
cosine 0.6083): sacrebleu sentence BLEU, symmetrised as the mean of both directions (BLEU is
asymmetric: hypothesis vs reference) and divided by 100 to the paper's 0–1 scale; and cosine
similarity of sentence embeddings.

Embedding is the expensive part, so each *distinct* path text is embedded exactly once per
analysis, and :class:`analysis.pipeline.scheduled.Embedder` keeps the vectors on disk by the text's sha256:
re-analysing a run loads no model at all. The functions here are the plain computation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from analysis.diversity.bleu import pair_bleu
from analysis.diversity.bleu import symmetric_bleu as symmetric_bleu  # re-exported: the reference computation

_KEYS = ["run", "task", "problem_id", "sample_idx", "block_idx", "model_family", "step", "decoding"]
#: Columns of the pairs frame (one row per unordered pair of sibling paths).
PAIR_COLUMN_DOCS: dict[str, str] = {
    **{k: f"Same as the blocks frame's {k}." for k in _KEYS},
    "path_i": "Index of the first path of the pair.",
    "path_j": "Index of the second path (path_i < path_j).",
    "bleu": "Symmetrised sentence BLEU / 100 (0–1); null when either path is empty.",
    "cosine": "Cosine similarity of the two paths' embeddings; null when either is empty or embeddings are off.",
}
PAIR_COLUMNS: tuple[str, ...] = tuple(PAIR_COLUMN_DOCS)


#: The most paths of one block whose pairs are scored (the first ones, in order), and the most pairs
#: scored in one response. Why: pairs grow as the square of the paths, and one response of 4,000
#: paths in one block (56 KB) took 46 s and 2.9 GB, 20,000 blocks of 20 paths ran out of memory.
#: The paper's blocks hold 2-4 paths, so the bound never touches a real response; where it does,
#: the analysis says how many blocks it cut (:func:`pair_bound_note`).
MOST_PATHS_PER_BLOCK = 32
MOST_PAIRS_PER_RESPONSE = 2_000
_RESPONSE = ["run", "task", "problem_id", "sample_idx"]


def scored_path_counts(blocks: pd.DataFrame) -> list[int]:
    """How many of each block's paths have their pairs scored: all of them, unless the block holds
    more than :data:`MOST_PATHS_PER_BLOCK` or its response has used up
    :data:`MOST_PAIRS_PER_RESPONSE` in earlier blocks (then as many as still fit, maybe none).

    When no response's blocks come to more than :data:`MOST_PAIRS_PER_RESPONSE` pairs with every
    block cut to :data:`MOST_PATHS_PER_BLOCK` alone (every real sweep), no block meets the second
    bound and the counts are those cuts, computed over arrays; only otherwise are the responses'
    pairs counted block by block (:func:`_bounded_counts`), a Python loop of 2.9 s on a sweep."""
    sizes = np.fromiter(map(len, blocks["path_texts"].tolist()), dtype=np.int64, count=len(blocks))
    if not len(sizes):
        return []
    cut = np.minimum(sizes, MOST_PATHS_PER_BLOCK)
    cut = np.where(cut >= 2, cut, np.minimum(sizes, 1))
    # responses grouped by their keys' values (NaN with NaN): never apart where the loop's dict has them together
    response = blocks.groupby(_RESPONSE, sort=False, dropna=False).ngroup().to_numpy()
    if np.bincount(response, weights=cut * (cut - 1) // 2).max() <= MOST_PAIRS_PER_RESPONSE:
        return cut.tolist()  # type: ignore[no-any-return]
    return _bounded_counts(blocks, sizes.tolist())


def _bounded_counts(blocks: pd.DataFrame, sizes: list[int]) -> list[int]:
    """:func:`scored_path_counts` block by block, each response's pairs counted as they are used."""
    responses = zip(*(blocks[k].tolist() for k in _RESPONSE), strict=True)
    used: dict[tuple[object, ...], int] = {}
    counts = []
    for n, response in zip(sizes, responses, strict=True):
        left = MOST_PAIRS_PER_RESPONSE - used.get(response, 0)
        fits = int((1 + math.isqrt(1 + 8 * max(left, 0))) // 2)  # the most m with m (m - 1) / 2 <= left
        m = min(n, MOST_PATHS_PER_BLOCK, fits)
        m = m if m >= 2 else min(n, 1)
        used[response] = used.get(response, 0) + m * (m - 1) // 2
        counts.append(m)
    return counts


def pair_bound_note(blocks: pd.DataFrame) -> str | None:
    """The note an analysis carries when :func:`scored_path_counts` left some paths' pairs out."""
    sizes = [len(p) for p in blocks["path_texts"].tolist()]
    cut = sum(m < n for m, n in zip(scored_path_counts(blocks), sizes, strict=True))
    if not cut:
        return None
    return (f"{cut} block(s) held more paths than are scored (at most {MOST_PATHS_PER_BLOCK} per block, "
            f"{MOST_PAIRS_PER_RESPONSE:,} pairs per response): their BLEU/cosine and roles are over the first "
            "paths only (and a response's consistency over its first 256 path answers)")


class Embeds(Protocol):
    """What embeds texts: :class:`analysis.pipeline.scheduled.Embedder` (vectors kept on disk), or any object
    with this method (a test's fake)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def diversity(blocks: pd.DataFrame, embedder: Embeds | None = None) -> pd.DataFrame:
    """The pairs frame (:data:`PAIR_COLUMNS`) of every block; cosine is null when ``embedder`` is
    ``None`` (the plain computation; :func:`analysis.pipeline.scheduled.pairs_of` gives the same with its
    BLEU scores kept on disk, and ``analyze`` scores them in worker processes)."""
    pairs, texts = sibling_pairs(blocks)
    return scored_pairs(pairs, texts, pair_bleu(texts), embedder)


def sibling_pairs(blocks: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Every unordered pair of sibling paths: the pairs frame without its scores (keys, ``path_i``,
    ``path_j``), and the two texts of each pair, in the frame's order (block by block, ``i`` then ``j``)."""
    paths = blocks["path_texts"].tolist()
    firsts, seconds, owners = _sibling_pairs(scored_path_counts(blocks))  # bounded per block and response
    first, second = firsts.tolist(), seconds.tolist()
    texts = [(paths[b][i], paths[b][j]) for b, i, j in zip(owners.tolist(), first, second, strict=True)]
    columns = {k: blocks[k].to_numpy(dtype=object)[owners].tolist() for k in _KEYS}  # as row tuples would give
    pairs = pd.DataFrame({**columns, "path_i": first, "path_j": second}, columns=list(PAIR_COLUMNS[:-2]))
    return pairs, texts


def scored_pairs(pairs: pd.DataFrame, texts: Sequence[tuple[str, str]], bleu: Sequence[float | None],
                 embedder: Embeds | None) -> pd.DataFrame:
    """:func:`sibling_pairs`' frame with ``bleu`` (each pair's :func:`analysis.diversity.bleu.symmetric_bleu`)
    and ``cosine`` (from ``embedder``; null without one), typed."""
    pairs["bleu"] = pd.Series(list(bleu), index=pairs.index, dtype=object)
    pairs["cosine"] = pd.Series([None] * len(pairs), index=pairs.index, dtype=object)
    if embedder is not None and texts:
        pairs["cosine"] = pair_cosines(texts, embedder)
    return pairs.astype({"bleu": "float64", "cosine": "float64", "step": "Int64"})


def _sibling_pairs(n_paths: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ``(i, j)`` with ``i < j`` of each block (``n_paths[b]`` paths), block by block, and the
    block of each: the pairs' order, ``i`` then ``j``. Over arrays: each pair's place within its
    block indexes a table of every block size's pairs in that order."""
    sizes = np.asarray(n_paths, dtype=np.int64)
    counts = np.where(sizes >= 2, sizes * (sizes - 1) // 2, 0)
    owners = np.repeat(np.arange(len(sizes), dtype=np.int64), counts)
    if not len(owners):
        return owners, owners.copy(), owners.copy()
    place = np.arange(len(owners), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    largest = int(sizes.max())
    firsts, seconds = np.zeros((largest + 1, int(counts.max())), dtype=np.int64), np.zeros(
        (largest + 1, int(counts.max())), dtype=np.int64)
    for n in np.unique(sizes[counts > 0]).tolist():
        i, j = np.triu_indices(n, k=1)  # row-major: i then j
        firsts[n, :len(i)], seconds[n, :len(j)] = i, j
    of = sizes[owners]
    return firsts[of, place], seconds[of, place], owners


def pair_cosines(pairs: Sequence[tuple[str, str]], embedder: Embeds) -> list[float | None]:
    """Cosine of each pair; every distinct non-empty text is embedded once, in one call."""
    distinct = list(dict.fromkeys(t for pair in pairs for t in pair if t.strip()))
    index = {t: i for i, t in enumerate(distinct)}
    vectors = embedder.embed(distinct)
    out: list[float | None] = []
    for a, b in pairs:
        if a in index and b in index:
            out.append(float(np.clip(vectors[index[a]] @ vectors[index[b]], -1.0, 1.0)))
        else:
            out.append(None)
    return out


def block_diversity(blocks: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """``blocks`` with ``bleu_mean`` and ``cosine_mean``: the mean over the block's pairs
    (null for a block with fewer than two non-empty paths)."""
    keys = ["run", "task", "problem_id", "sample_idx", "block_idx"]
    out = blocks.drop(columns=[c for c in ("bleu_mean", "cosine_mean") if c in blocks])
    if pairs.empty:
        return out.assign(bleu_mean=np.nan, cosine_mean=np.nan)
    means = pairs.groupby(keys, sort=False)[["bleu", "cosine"]].mean().rename(
        columns={"bleu": "bleu_mean", "cosine": "cosine_mean"}).reset_index()
    out = out.merge(means, on=keys, how="left")
    return out.astype({"bleu_mean": "float64", "cosine_mean": "float64"})
