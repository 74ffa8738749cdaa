"""Symmetrised sentence BLEU of sibling paths, with each path's n-grams counted once.

Why not ``BLEU.sentence_score`` per pair: it re-tokenises and re-counts both texts' n-grams
for every pair and both directions (a sweep's 150,000 pairs spent most of BLEU's time there),
and its n-gram extraction builds every n-gram tuple in a Python loop. Here each text is
tokenised once with sacrebleu's own tokenizer and its n-grams counted once per order in C
(the same counts as ``extract_all_word_ngrams``), the clipped matches of a pair are counted
once (they are the same in both directions: ``min(count_a, count_b)``), and the score comes from sacrebleu's own
``_compute_score_from_stats`` on exactly the statistics ``sentence_score`` would build, so every
number equals ``sacrebleu.sentence_bleu`` to the last bit (``tests/analysis/test_fast_paths.py``).
Scores are also cached on disk by the pair's text hashes (:mod:`analysis.result_cache`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

from analysis.result_cache import ResultCache, hash_key

#: What a cached score depends on (this module's code and sacrebleu's version).
SOURCES = ("analysis.bleu",)
PACKAGES = ("sacrebleu",)
#: Texts whose n-gram counts are held at once: counts take ~100 bytes per n-gram, so holding every
#: path of a sweep would take gigabytes, while a pair's texts are always sibling paths, seen together.
_MAX_COUNTED = 256


@lru_cache(maxsize=1)
def scorer() -> BLEU:
    """The one configuration used everywhere: sentence BLEU with effective order."""
    return BLEU(effective_order=True)


#: sacrebleu's 13a rules, as its ``TokenizerRegexp`` holds them (checked at import: when another
#: sacrebleu holds other rules, its own tokenizer is used).
_SACRE = [(p.pattern, r) for p, r in TokenizerRegexp()._re]
_EXPECTED = [(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "), (r"([^0-9])([\.,])", r"\1 \2 "),
             (r"([\.,])([^0-9])", r" \1 \2"), (r"([0-9])(-)", r"\1 \2 ")]
#: The first rule pads each character of its class (ASCII punctuation and the space) with spaces,
#: one character at a time; ``str.replace`` per character does the same, the space first (so the
#: spaces the others add are not padded again).
_PADDED = [chr(c) for c in range(128) if re.fullmatch(_EXPECTED[0][0], chr(c))]
assert _PADDED[0] == " "
#: The other rules: the same patterns, their replacements written as functions (Python's ``re``
#: expands a ``\\1`` template through Python code on every match: most of sacrebleu's tokenising time).
_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (re.compile(_EXPECTED[1][0]), lambda m: f"{m[1]} {m[2]} "),
    (re.compile(_EXPECTED[2][0]), lambda m: f" {m[1]} {m[2]}"),
    (re.compile(_EXPECTED[3][0]), lambda m: f"{m[1]} {m[2]} "),
)


def tokenize_13a(text: str) -> str:
    """sacrebleu's ``13a`` tokenisation of ``text`` as ``BLEU._preprocess_segment`` applies it
    (trailing white space stripped first), the same string, faster (``tests/analysis/test_fast_paths.py``)."""
    line = text.rstrip().replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for char in _PADDED:
        if char in line:
            line = line.replace(char, f" {char} ")
    for pattern, replace in _RULES:
        line = pattern.sub(replace, line)
    return " ".join(line.split())


@lru_cache(maxsize=1)
def _tokenizer() -> Callable[[str], str]:
    """:func:`tokenize_13a` where it is exactly the scorer's tokenisation, else the scorer's own."""
    bleu = scorer()
    if _SACRE == _EXPECTED and type(bleu.tokenizer) is Tokenizer13a and not bleu.lowercase:
        return tokenize_13a
    return bleu._preprocess_segment


def symmetric_bleu(a: str, b: str) -> float | None:
    """Mean of BLEU(a | ref b) and BLEU(b | ref a), on a 0–1 scale; ``None`` if either is empty
    (the reference computation: two ``sentence_score`` calls)."""
    if not a.strip() or not b.strip():
        return None
    bleu = scorer()
    return (bleu.sentence_score(a, [b]).score + bleu.sentence_score(b, [a]).score) / 200.0


class _Counted:
    """A text's n-gram counts per order, per-order totals and length, as sacrebleu computes them
    (``extract_all_word_ngrams``: whitespace tokens of the tokenised text, orders 1..4), built
    with ``Counter(zip(...))`` so the counting runs in C."""

    __slots__ = ("by_order", "length", "totals")

    def __init__(self, text: str) -> None:
        bleu = scorer()
        tokens = _tokenizer()(text).split()
        self.length = len(tokens)
        orders = range(1, bleu.max_ngram_order + 1)
        self.by_order = [Counter(zip(*(tokens[i:] for i in range(n)), strict=False)) for n in orders]
        self.totals = [max(0, self.length - n + 1) for n in range(1, bleu.max_ngram_order + 1)]


def _score(hyp: _Counted, ref: _Counted, correct: list[int]) -> float:
    return float(scorer()._compute_score_from_stats([hyp.length, ref.length, *correct, *hyp.totals]).score)


def _pair_bleu(a: _Counted, b: _Counted) -> float:
    """Both directions from one count of the clipped matches (``min`` is symmetric)."""
    correct = []
    for ca, cb in zip(a.by_order, b.by_order, strict=True):
        correct.append(sum(min(ca[g], cb[g]) for g in ca.keys() & cb.keys()))
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
            if len(self._texts) >= _MAX_COUNTED:  # pairs come block by block: recent texts are the ones reused
                self._texts.clear()
            self._texts[text] = _Counted(text) if text.strip() else None
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
        self._texts.clear()
        self._keys.clear()
        return out


def ngram_counts(text: str) -> Counter[tuple[str, ...]]:
    """All n-gram counts of ``text`` as one counter (what sacrebleu's ``extract_all_word_ngrams``
    returns; for tests)."""
    total: Counter[tuple[str, ...]] = Counter()
    for counts in _Counted(text).by_order:
        total.update(counts)
    return total
