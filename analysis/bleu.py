"""Symmetrised sentence BLEU of sibling paths, with each path's n-grams counted once.

Why not ``BLEU.sentence_score`` per pair: it re-tokenises and re-counts both texts' n-grams
for every pair and both directions (a sweep's 150,000 pairs spent most of BLEU's time there).
Here each distinct text is tokenised and counted once (sacrebleu's own tokenizer and
``extract_all_word_ngrams``), the clipped matches of a pair are counted once (they are the same
in both directions: ``min(count_a, count_b)``), and the score comes from sacrebleu's own
``_compute_score_from_stats`` on exactly the statistics ``sentence_score`` would build, so every
number equals ``sacrebleu.sentence_bleu`` to the last bit (``tests/test_analysis_bleu.py``).
Scores are also cached on disk by the pair's text hashes (:mod:`analysis.result_cache`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from sacrebleu.metrics import BLEU
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from analysis.result_cache import ResultCache, hash_key

#: What a cached score depends on (this module's code and sacrebleu's version).
SOURCES = ("analysis/bleu.py",)
PACKAGES = ("sacrebleu",)


@lru_cache(maxsize=1)
def scorer() -> BLEU:
    """The one configuration used everywhere: sentence BLEU with effective order."""
    return BLEU(effective_order=True)


def symmetric_bleu(a: str, b: str) -> float | None:
    """Mean of BLEU(a | ref b) and BLEU(b | ref a), on a 0–1 scale; ``None`` if either is empty
    (the reference computation: two ``sentence_score`` calls)."""
    if not a.strip() or not b.strip():
        return None
    bleu = scorer()
    return (bleu.sentence_score(a, [b]).score + bleu.sentence_score(b, [a]).score) / 200.0


class _Counted:
    """A text's n-gram counts, per-order totals and length, as sacrebleu computes them."""

    __slots__ = ("key", "length", "ngrams", "totals")

    def __init__(self, text: str, key: str) -> None:
        bleu = scorer()
        ngrams, length = extract_all_word_ngrams(bleu._preprocess_segment(text), 1, bleu.max_ngram_order)
        totals = [0] * bleu.max_ngram_order
        for ngram, count in ngrams.items():
            totals[len(ngram) - 1] += count
        self.key, self.ngrams, self.length, self.totals = key, ngrams, length, totals


def _score(hyp: _Counted, ref: _Counted, correct: list[int]) -> float:
    return float(scorer()._compute_score_from_stats([hyp.length, ref.length, *correct, *hyp.totals]).score)


def _pair_bleu(a: _Counted, b: _Counted) -> float:
    small, large = (a.ngrams, b.ngrams) if len(a.ngrams) <= len(b.ngrams) else (b.ngrams, a.ngrams)
    correct = [0] * scorer().max_ngram_order
    for ngram, count in small.items():
        other = large.get(ngram)
        if other:
            correct[len(ngram) - 1] += min(count, other)
    return (_score(a, b, correct) + _score(b, a, correct)) / 200.0


class PairBleu:
    """:func:`symmetric_bleu` of many pairs: n-grams once per distinct text, scores cached."""

    def __init__(self, cache: ResultCache | None = None) -> None:
        self.cache = cache if cache is not None else ResultCache.named("bleu", SOURCES, PACKAGES)
        self._texts: dict[str, _Counted | None] = {}
        self._keys: dict[str, str] = {}

    def _key(self, text: str) -> str:
        key = self._keys.get(text)
        if key is None:
            key = self._keys[text] = hash_key(text)
        return key

    def _counted(self, text: str) -> _Counted | None:
        if text not in self._texts:
            self._texts[text] = _Counted(text, self._key(text)) if text.strip() else None
        return self._texts[text]

    def score(self, a: str, b: str) -> float | None:
        """The symmetrised BLEU of one pair (``None`` if either text is empty)."""
        if not a.strip() or not b.strip():
            return None
        key = hash_key(*sorted((self._key(a), self._key(b))))  # the score is symmetric
        cached = self.cache.get(key)
        if cached is not None:
            return float(cached)
        first, second = self._counted(a), self._counted(b)
        assert first is not None and second is not None
        value = _pair_bleu(first, second)
        self.cache.put(key, value)
        return value

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """:meth:`score` of each pair, then the new scores written to the cache."""
        out = [self.score(a, b) for a, b in pairs]
        self.cache.flush()
        self._texts.clear()  # the counts are big; the scores are kept
        return out


def ngram_counts(text: str) -> Counter[tuple[str, ...]]:
    """The n-gram counts sacrebleu extracts from ``text`` (for tests and inspection)."""
    return Counter(_Counted(text, "").ngrams)
