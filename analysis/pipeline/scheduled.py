"""The measures, run through the engine: cached on disk, in worker processes, overlapped.

Each measure is a plain function in its own module (:func:`analysis.structure.conclusions.path_conclusion`,
:func:`analysis.diversity.bleu.batch_bleu`, :func:`pr1_eval.grading.grade.answer_classes_many`, a sentence
model's ``encode``); this module is the only place that says how each is run at scale: which
cache keeps its values and what that cache's values depend on (the code and libraries named
here: editing them starts a fresh cache), how many items go to a worker at once, and which steps
start now and are collected later (:mod:`analysis.engine.tasks`). The values are those of the
plain functions, wherever they ran (``tests/analysis/test_fast_paths.py``,
``tests/analysis/test_workers.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.common.defaults import DEFAULT_EMBEDDING_MODEL
from analysis.diversity.bleu import BLEU_SOURCES, batch_bleu_here
from analysis.diversity.embedding import load_embedding_model, model_folder
from analysis.diversity.paths import Embeds, scored_pairs, sibling_pairs
from analysis.engine.cache import cache_folder
from analysis.engine.shards import EmbeddingCache, ResultCache, hash_key, text_key
from analysis.engine.tasks import Pending, in_background, map_chunks
from analysis.engine.workers import Workers
from analysis.structure.conclusions import Conclusion, conclude_all
from analysis.structure.roles import conclusion_groups, regrouped, with_conclusions, with_roles
from pr1_eval.grading.grade import answer_classes_many
from pr1_eval.grading.shared import shared_pool

#: Paths per call to a worker: enough that pickling them is a small part of reading them.
CONCLUDE_CHUNK = 2_000
#: Pairs scored at once: their tokens' arrays take tens of bytes per token (a few megabytes), and a
#: pair's texts are sibling paths, neighbours in the list, so few texts straddle two batches.
BLEU_CHUNK = 2048


def conclusions_cache() -> ResultCache:
    """Path conclusions by the hash of the path text, for the reader's current code."""
    return ResultCache.named("conclusions", ("analysis.structure.conclusions", "pr1_eval.grading.answer_text"))


def bleu_cache() -> ResultCache:
    """Pair BLEU scores by the pair's text hashes, for this code and sacrebleu's version."""
    return ResultCache.named("bleu", BLEU_SOURCES, ("sacrebleu",))


def conclude(texts: Sequence[str | None], workers: Workers | None = None,
             cache: ResultCache | None = None) -> Pending[list[Conclusion]]:
    """:func:`~analysis.structure.conclusions.path_conclusion` of each text, begun: each distinct text read
    once, ever (``cache``, default :func:`conclusions_cache`), the rest in ``workers``."""
    plain = [t if isinstance(t, str) else ("" if t is None else str(t)) for t in texts]
    return map_chunks(conclude_all, plain, workers=workers, chunk=CONCLUDE_CHUNK,  # type: ignore[return-value]
                      cache=conclusions_cache() if cache is None else cache, keys=text_keys,
                      encode=conclusion_value, decode=value_conclusion)


def text_keys(texts: list[str]) -> list[str]:
    """:func:`~analysis.engine.shards.hash_key` of each text (the conclusions' keys)."""
    return [hash_key(text) for text in texts]


def conclusion_value(conclusion: Conclusion) -> list[str | None]:
    """A conclusion as the cache keeps it."""
    return [conclusion.text, conclusion.source]


def value_conclusion(value: list[Any]) -> Conclusion:
    """A conclusion from the cache (``[text or None, source]``)."""
    return Conclusion(value[0], value[1])


def bleu_scores(pairs: Sequence[tuple[str, str]], workers: Workers | None = None,
                cache: ResultCache | None = None) -> Pending[list[float | None]]:
    """:func:`~analysis.diversity.bleu.symmetric_bleu` of each pair, begun: ``None`` where a text is empty,
    each pair scored once, ever (``cache``, default :func:`bleu_cache`), in batches in ``workers``."""
    return map_chunks(batch_bleu_here, pairs, workers=workers, chunk=BLEU_CHUNK,
                      cache=bleu_cache() if cache is None else cache, keys=pair_keys, encode=float, decode=float,
                      skip=has_empty_text)


def pair_keys(pairs: list[tuple[str, str]]) -> list[str]:
    """Each pair's key: its two texts' :func:`~analysis.engine.shards.hash_key`, the smaller first (the
    score is symmetric), each distinct text hashed once."""
    hashes: dict[str, str] = {}
    out = []
    for a, b in pairs:
        if (first := hashes.get(a)) is None:
            first = hashes[a] = hash_key(a)
        if (second := hashes.get(b)) is None:
            second = hashes[b] = hash_key(b)
        out.append(first + second if first <= second else second + first)
    return out


def has_empty_text(pair: tuple[str, str]) -> bool:
    """Whether either text of a pair is blank (its BLEU is null, never scored)."""
    return not pair[0].strip() or not pair[1].strip()


def roles_of(blocks: pd.DataFrame, workers: Workers | None = None) -> pd.DataFrame:
    """:func:`analysis.structure.roles.assign_roles` of ``blocks``, its conclusions and verdicts kept on disk."""
    texts = blocks["path_texts"].tolist()
    concluded = with_conclusions(blocks, regrouped(conclude([t for p in texts for t in p], workers).result(), texts))
    return with_roles(concluded, classify(conclusion_groups(concluded)))


def pairs_of(blocks: pd.DataFrame, embedder: Embeds | None = None, workers: Workers | None = None) -> pd.DataFrame:
    """:func:`analysis.diversity.paths.diversity` of ``blocks``, its BLEU scores kept on disk."""
    pairs, texts = sibling_pairs(blocks)
    return scored_pairs(pairs, texts, bleu_scores(texts, workers).result(), embedder)


class VerdictCache:
    """math-verify verdicts of gold-free ``(a, b)`` pairs on disk, for the code and library
    versions that computed them (the ``known`` store of
    :func:`~pr1_eval.grading.grade.answer_classes_many`)."""

    SOURCES = ("pr1_eval.grading.verify", "pr1_eval.grading.fast_verdict")
    LIBRARIES = ("math-verify", "latex2sympy2_extended", "sympy")

    def __init__(self, cache: ResultCache | None = None) -> None:
        self.cache = cache if cache is not None else ResultCache.named("verdicts", self.SOURCES, self.LIBRARIES)
        self._missed: dict[tuple[str, str], str] = {}  # pairs looked up and not found: their keys

    def get(self, key: tuple[str, str], /) -> bool | None:
        hashed = hash_key(*key)
        value = self.cache.get(hashed)
        if value is None:
            self._missed[key] = hashed  # its verdict is stored next: hashed once, not twice
            return None
        return bool(value)

    def __setitem__(self, key: tuple[str, str], value: bool, /) -> None:
        hashed = self._missed.pop(key, None)
        self.cache.put(hash_key(*key) if hashed is None else hashed, bool(value))

    def flush(self) -> None:
        self.cache.flush()


def classify(groups: Sequence[Sequence[str | None]], verdicts: VerdictCache | None = None) -> list[list[int | None]]:
    """:func:`~pr1_eval.grading.grade.answer_classes_many` of ``groups``, its verdicts remembered
    in ``verdicts`` (default: on disk) so a pair is checked once, ever."""
    store = VerdictCache() if verdicts is None else verdicts
    classes = answer_classes_many(groups, known=store)
    store.flush()
    return classes


def classify_in_background(groups: Sequence[Sequence[str | None]],
                           verdicts: VerdictCache | None = None) -> Future[list[list[int | None]]]:
    """:func:`classify`, begun on a daemon thread: it mostly waits on the grading pool."""
    return in_background(classify, groups, verdicts, name="pr1-analysis-classes")


def start_grading_early(n_texts: int, workers: Workers | None) -> None:
    """Start math-verify's grading process now, before any check is asked of it, when the path
    conclusions (``n_texts`` path texts) go to the ``workers``. Why: its start, a Python process
    importing math-verify (about a second of CPU), otherwise comes after the conclusions, on the
    analysis' critical path (the verdicts wait for it, the consistency table for the verdicts); begun
    here it overlaps the conclusions. A small analysis (fewer texts than one worker chunk, which
    :class:`~analysis.engine.workers.Chunked` keeps in this process) starts it only if some check
    needs it, as before."""
    if workers is not None and n_texts >= CONCLUDE_CHUNK:
        shared_pool().start()


class Embedder:
    """Embeds texts once each, ever: vectors kept on disk per model; the model is loaded only on a
    cache miss.

    ``cache_dir``: ``None`` for the default (the ``embeddings`` cache folder of
    :mod:`analysis.engine.cache`, one folder per model), a folder, or ``False`` for memory only.
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
        self.cache = EmbeddingCache(_embedding_folder(model_name, cache_dir))
        self.n_encoded = 0
        self.n_from_cache = 0
        self.encode_seconds = 0.0  # model time plus cache writes, for the texts in n_encoded
        self.model_loaded = False

    @property
    def model(self) -> Any:
        """The sentence model, loaded on first use, saying so on stderr (what, why, how to skip it,
        how long it took): the load takes seconds and used to show only transformers' bare bar."""
        if self._model is None:
            print(f"[pr1-eval] loading the embedding model {self.model_name} for the paths' cosine similarity "
                  "(--no-embeddings skips it)", file=sys.stderr, flush=True)
            started = time.monotonic()
            self._model = load_embedding_model(self.model_name, self.device)
            self.model_loaded = True
            print(f"[pr1-eval] embedding model loaded in {time.monotonic() - started:.1f}s", file=sys.stderr,
                  flush=True)
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
        known = self.cache.lookup(unique)
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


def embedding_cache_dir(model_name: str) -> Path | None:
    """Where ``model_name``'s vectors are kept by default: its folder (:func:`analysis.diversity.embedding.
    model_folder`) in the ``embeddings`` cache folder; ``None`` when that cache is off."""
    root = cache_folder("embeddings")
    return None if root is None else root / model_folder(model_name)


def _embedding_folder(model_name: str, cache_dir: Path | str | bool | None) -> Path | None:
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        return embedding_cache_dir(model_name)
    return Path(str(cache_dir))
