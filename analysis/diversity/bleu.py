"""Symmetrised sentence BLEU of sibling paths, many pairs at once, each text tokenised once.

Why not ``BLEU.sentence_score`` per pair: it re-tokenises and re-counts both texts' n-grams
for every pair and both directions, building every n-gram tuple in a Python loop; and counting
each text's n-grams once in ``Counter`` objects still costs a tuple and a dict entry per n-gram
(a sweep's 200,000 pairs of 325,000 paths spent ~100 s there, a tenth of it freeing them). Here
pairs are scored in batches: the batch's distinct texts are tokenised together (sacrebleu's
``13a`` rules run once per distinct raw token, :func:`split_13a`), the tokens become integer ids,
the clipped matches of every pair are counted with integer arrays (:mod:`analysis.diversity.bleu_counts`;
the same for both directions: ``min(count_a, count_b)``), and the score comes from exactly the
statistics ``sentence_score`` would build, through a copy of sacrebleu's ``compute_bleu`` that is
checked against it, so every number equals ``sacrebleu.sentence_bleu`` to the last bit
(``tests/analysis/test_bleu_batch.py``, ``tests/analysis/test_fast_paths.py``). How ``analyze``
keeps the scores on disk and scores in worker processes: :mod:`analysis.pipeline.scheduled`.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

from analysis.diversity.bleu_counts import (
    KeysTooLarge,
    TokenIds,
    clipped_matches,
    exact_score,
    probe_stats,
    score_function,
)

#: The code a score depends on (with sacrebleu's version: what a kept score is valid for).
BLEU_SOURCES = ("analysis.diversity.bleu", "analysis.diversity.bleu_counts")


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


def prepare_13a(text: str) -> str:
    """The first steps of sacrebleu's ``13a`` tokenisation (trailing white space, ``<skipped>``,
    line breaks, the four entities): the text whose whitespace-separated raw tokens the padding
    and the rules then split (:func:`split_13a`)."""
    line = text.rstrip().replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return line


def split_13a(raw: str) -> list[str]:
    """The ``13a`` tokens of ``raw``, the output of :func:`prepare_13a` or any whitespace-separated
    piece of it: every pattern looks at two adjacent characters, and white space is a non-digit
    that is neither ``.``, ``,`` nor ``-`` and never the second character of a match that could
    start at the character before it, so no match spans a space and pieces split alike
    (``tests/analysis/test_bleu_batch.py`` checks this on random texts)."""
    line = f" {raw} "
    for char in _PADDED:
        if char in line:
            line = line.replace(char, f" {char} ")
    for pattern, replace in _RULES:
        line = pattern.sub(replace, line)
    return line.split()


def tokenize_13a(text: str) -> str:
    """sacrebleu's ``13a`` tokenisation of ``text`` as ``BLEU._preprocess_segment`` applies it
    (trailing white space stripped first), the same string, faster (``tests/analysis/test_fast_paths.py``)."""
    return " ".join(split_13a(prepare_13a(text)))


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
    with ``Counter(zip(...))`` so the counting runs in C: the path for a batch whose integer keys
    would not fit int64 (:class:`~analysis.diversity.bleu_counts.KeysTooLarge`), and the tests' reference."""

    __slots__ = ("by_order", "length", "totals")

    def __init__(self, text: str) -> None:
        bleu = scorer()
        tokens = _tokenizer()(text).split()
        self.length = len(tokens)
        orders = range(1, bleu.max_ngram_order + 1)
        self.by_order = [Counter(zip(*(tokens[i:] for i in range(n)), strict=False)) for n in orders]
        self.totals = [max(0, self.length - n + 1) for n in range(1, bleu.max_ngram_order + 1)]


def _pair_bleu(a: _Counted, b: _Counted) -> float:
    """Both directions from one count of the clipped matches (``min`` is symmetric)."""
    correct = []
    for ca, cb in zip(a.by_order, b.by_order, strict=True):
        correct.append(sum(min(ca[g], cb[g]) for g in ca.keys() & cb.keys()))
    score = _score_function()
    return (score(a.length, b.length, correct) + score(b.length, a.length, correct)) / 200.0


@lru_cache(maxsize=1)
def _score_function() -> Callable[[int, int, Sequence[int]], float]:
    return score_function(scorer())


@lru_cache(maxsize=1)
def _token_splitter() -> tuple[Callable[[str], str], Callable[[str], list[str]]]:
    """(prepare, split) for :class:`~analysis.diversity.bleu_counts.TokenIds`: the 13a steps where
    :func:`_tokenizer` is :func:`tokenize_13a`, else the scorer's whole tokenisation per text."""
    tokenize = _tokenizer()
    if tokenize is tokenize_13a:
        return prepare_13a, split_13a
    return tokenize, str.split


def batch_bleu(pairs: Sequence[tuple[str, str]], ids: TokenIds | None = None) -> list[float]:
    """:func:`symmetric_bleu` of each pair of non-empty texts, all at once: each distinct text
    tokenised once, the clipped matches counted with integer arrays (:mod:`analysis.diversity.bleu_counts`),
    the scores from exactly the statistics ``sentence_score`` builds. ``ids``: a tokeniser to reuse
    (it remembers the raw tokens it has split)."""
    if ids is None:
        ids = TokenIds(*_token_splitter())
    index: dict[str, int] = {}
    first = np.fromiter((index.setdefault(a, len(index)) for a, _ in pairs), dtype=np.int64, count=len(pairs))
    second = np.fromiter((index.setdefault(b, len(index)) for _, b in pairs), dtype=np.int64, count=len(pairs))
    tokens, lengths = ids.encode(list(index))
    try:
        matches = clipped_matches(tokens, lengths, first, second, ids.size)
    except KeysTooLarge:
        counted = {text: _Counted(text) for text in index}
        return [_pair_bleu(counted[a], counted[b]) for a, b in pairs]
    return pair_scores(lengths[first], lengths[second], matches)


def pair_scores(len_a: np.ndarray, len_b: np.ndarray, matches: np.ndarray) -> list[float]:
    """Each pair's symmetrised score from its two lengths and its clipped matches per order: in
    compiled code where it gives this machine's Python floats (:func:`_compiled_scores`), else
    through :func:`_score_function` pair by pair."""
    compiled = _compiled_scores()
    if compiled is not None:
        return compiled(len_a, len_b, matches).tolist()  # type: ignore[no-any-return]
    score = _score_function()
    out = []
    for hyp, ref, correct in zip(len_a.tolist(), len_b.tolist(), matches.tolist(), strict=True):
        out.append((score(hyp, ref, correct) + score(ref, hyp, correct)) / 200.0)
    return out


@lru_cache(maxsize=1)
def _compiled_scores() -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None:
    """:func:`analysis.diversity.bleu_kernel.compiled_pair_scores`, where the scorer's statistics go
    through :func:`~analysis.diversity.bleu_counts.exact_score` and the compiled version gives the
    very floats it gives (``==``) on every probe statistic and 4,000 random ones: its ``exp``,
    ``log`` and ``sum`` are then this machine's Python's. Else ``None`` (the Python loop): the
    kernel only makes scoring faster (a fifth of BLEU's time in Python)."""
    if _score_function() is not exact_score:
        return None
    try:
        from analysis.diversity.bleu_kernel import compiled_pair_scores
    except (ImportError, RuntimeError, OSError):
        return None
    stats = _score_probes()
    len_a = np.array([s[0] for s in stats], dtype=np.int64)
    len_b = np.array([s[1] for s in stats], dtype=np.int64)
    matches = np.array([s[2] for s in stats], dtype=np.int64)
    want = [(exact_score(a, b, c) + exact_score(b, a, c)) / 200.0 for a, b, c in stats]
    return compiled_pair_scores if compiled_pair_scores(len_a, len_b, matches).tolist() == want else None


def _score_probes() -> list[tuple[int, int, list[int]]]:
    """The probe statistics of :func:`~analysis.diversity.bleu_counts.score_function` and 4,000 drawn
    ones (lengths up to 600, matches up to each order's count in the shorter text), seeded."""
    rng = random.Random(13)
    stats = [(hyp, ref, list(correct)) for hyp, ref, correct in probe_stats()]
    for _ in range(4000):
        a, b = rng.randint(0, 600), rng.randint(0, 600)
        stats.append((a, b, [rng.randint(0, max(0, min(a, b) - n)) for n in range(4)]))
    return stats


#: This process's tokeniser, kept from batch to batch (it remembers the raw tokens it split).
_PROCESS_IDS: list[TokenIds] = []


def batch_bleu_here(pairs: Sequence[tuple[str, str]]) -> list[float]:
    """:func:`batch_bleu` of one batch with this process's own tokeniser, kept for the next batch
    (the unit a worker process is handed; token ids differ from process to process, match counts
    and so scores do not)."""
    if not _PROCESS_IDS:
        _PROCESS_IDS.append(TokenIds(*_token_splitter()))
    return batch_bleu(pairs, _PROCESS_IDS[0])


def pair_bleu(pairs: Sequence[tuple[str, str]]) -> list[float | None]:
    """:func:`symmetric_bleu` of each pair (``None`` where a text is empty), all at once through
    :func:`batch_bleu` (the plain computation; :func:`analysis.pipeline.scheduled.bleu_scores` gives the
    same, scored in worker processes and kept on disk)."""
    scored = iter(batch_bleu_here([p for p in pairs if p[0].strip() and p[1].strip()]))
    return [next(scored) if a.strip() and b.strip() else None for a, b in pairs]


def ngram_counts(text: str) -> Counter[tuple[str, ...]]:
    """All n-gram counts of ``text`` as one counter (what sacrebleu's ``extract_all_word_ngrams``
    returns; for tests)."""
    total: Counter[tuple[str, ...]] = Counter()
    for counts in _Counted(text).by_order:
        total.update(counts)
    return total
