"""Clipped n-gram matches of many text pairs at once, as integer arrays: sentence BLEU's statistics
without a Python object per n-gram.

Why: counting each text's n-grams in ``Counter`` objects costs a tuple and a dict entry per
n-gram (about 650 per path of a sweep, 325,000 paths), and freeing them costs as much again.
Here a chunk of pairs is laid out as one array of token ids, pair after pair (first text, then
second), and for each order the n-grams become integers: an order-1 key is ``pair * V + token``,
an order-n key is ``code(n-1) * V + token`` (``V`` the vocabulary size, the codes dense, so the
keys fit int64 exactly, checked before use: no hashing, no collisions). Keys are numbered with
a hash table (``pandas.factorize``, exact: it compares values); ``bincount`` gives each key's count
in either text, and the clipped matches of a pair are the sums of ``min`` over its keys (what
sacrebleu's ``_compute_segment_statistics`` adds per n-gram). An n-gram can only be shared when
both its (n-1)-gram prefix and suffix are, so each order looks only at those positions.

The score from those statistics (:func:`exact_score`) repeats sacrebleu's ``compute_bleu`` float
operation for float operation (``BLEUScore`` builds display strings per call, most of its cost);
:func:`score_function` checks it against sacrebleu's own on a probe set before using it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, count
from typing import Any

import numpy as np
import pandas as pd
from sacrebleu.metrics import BLEU

#: The n-gram orders sentence BLEU counts.
ORDERS = 4
#: Separator candidates (control and private-use characters: neither white space nor 13a-relevant).
_SEPARATORS = ("\x00", "\x01", "\x02", "\x03", "\x04", "\x05", "\x06", "\x07", "\x08", "\ue000", "\U000f0000")
#: Largest key value allowed (keys are products of a code and the vocabulary size plus a token id).
_KEY_LIMIT = 2**62


class KeysTooLarge(ValueError):
    """The chunk's keys would not fit int64 exactly (the caller counts with Counters instead)."""


class TokenIds:
    """The scorer's tokens of many texts as integer ids, each distinct raw token split once.

    ``prepare`` maps a text to the string whose whitespace-separated raw tokens ``split`` turns into
    the scorer's tokens, one raw token at a time: for the 13a rules, :func:`analysis.diversity.bleu.prepare_13a`
    and :func:`analysis.diversity.bleu.split_13a` (``tests/analysis/test_bleu_batch.py`` checks the tokens
    equal the per-text tokenisation). Ids are consistent within one :meth:`encode` call; the raw
    token memo is bounded by ``max_memo`` entries (cleared when full, between calls).
    """

    def __init__(self, prepare: Callable[[str], str], split: Callable[[str], list[str]],
                 max_memo: int = 200_000) -> None:
        self._prepare = prepare
        self._split = split
        self._max_memo = max_memo
        self._raw: dict[str, list[int]] = {}
        self._ids: dict[str, int] = {}

    @property
    def size(self) -> int:
        """The number of token ids handed out (every id is below it)."""
        return len(self._ids)

    def _sub(self, raw: str) -> list[int]:
        ids = self._ids
        sub = [ids.setdefault(token, len(ids)) for token in self._split(raw)]
        self._raw[raw] = sub
        return sub

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the token ids of ``texts`` one after another, each text's token count).

        The prepared texts are split into raw tokens and the distinct raw tokens numbered by the
        compiled kernel (:func:`_compiled_raw_tokens`), else in pyarrow (:func:`_arrow_raw_tokens`,
        C++), else in one ``str.split`` call (:meth:`_python_raw_tokens`); each distinct raw token
        is split by the rules once (memo), and the texts laid out as ids.
        """
        if len(self._raw) > self._max_memo:
            self._raw.clear()
            self._ids.clear()
        prepared = [self._prepare(text) for text in texts]
        if not prepared:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        kernels = _token_kernels()
        # the kernel declines where pyarrow would (the same conversion, the same white space): no second try
        raw = (_compiled_raw_tokens(prepared) if kernels is not None else _arrow_raw_tokens(prepared)) \
            or self._python_raw_tokens(prepared)
        codes, uniques, per_text = raw
        memo = self._raw
        subs = [memo.get(u) or self._sub(u) if u else [] for u in uniques]
        unique_len = np.fromiter(map(len, subs), dtype=np.int64, count=len(subs))
        flat = np.fromiter(chain.from_iterable(subs), dtype=np.int64, count=int(unique_len.sum()))
        if kernels is not None:
            return kernels.lay_out(codes, per_text, unique_len, flat)  # type: ignore[no-any-return]
        per_raw = unique_len[codes]
        ends = np.cumsum(per_raw)
        bounds = np.concatenate(([0], np.cumsum(per_text)))
        lengths = np.diff(np.concatenate(([0], ends))[bounds])
        starts = (np.cumsum(unique_len) - unique_len)[codes]
        if bool((unique_len <= 1).all()):  # each raw token one token (or none): no gather
            return flat[starts[per_raw == 1]], lengths
        return flat[_ragged(starts, per_raw, ends)], lengths

    @staticmethod
    def _python_raw_tokens(prepared: list[str]) -> tuple[np.ndarray, list[str], np.ndarray]:
        """:func:`_arrow_raw_tokens` by ``str.split``: the texts split in one call, joined by a
        separator token (a character none of them holds, which maps to no token):
        ``" S ".join(ts).split()`` is ``split(t0) + [S] + split(t1) + ...``; each raw token numbered
        by ``dict.setdefault`` in C (the position where it first occurs, made dense after)."""
        sep = _separator(prepared)
        if sep is None:  # every candidate occurs: split text by text
            splits = [text.split() for text in prepared]
            per_text = np.fromiter(map(len, splits), dtype=np.int64, count=len(splits))
            raw = list(chain.from_iterable(splits))
        else:
            raw = f" {sep} ".join(prepared).split()
        first: dict[str, int] = {}
        at_first = np.fromiter(map(first.setdefault, raw, count()), dtype=np.int64, count=len(raw))
        dense = np.zeros(len(raw), dtype=np.int64)
        dense[np.fromiter(first.values(), dtype=np.int64, count=len(first))] = np.arange(len(first))
        codes = dense[at_first]
        uniques = ["" if u == sep else u for u in first]
        if sep is not None:  # a text's raw tokens end at its separator (the separator counted with it)
            cuts = np.flatnonzero(at_first == first.get(sep, -1))
            per_text = np.diff(np.concatenate(([0], cuts + 1, [len(raw)])))
        return codes, uniques, per_text


#: The characters ``str.split`` splits at that pyarrow's ``ascii_split_whitespace`` does not (it
#: splits at ``\t \n \v \f \r`` and the space only); ``tests/analysis/test_bleu_batch.py``
#: checks this is every other character ``str.isspace`` holds.
OTHER_WHITESPACE = ("\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_OTHER_WHITESPACE_RE = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in OTHER_WHITESPACE) + "]"


def _arrow_raw_tokens(prepared: list[str]) -> tuple[np.ndarray, list[str], np.ndarray] | None:
    """(each raw token's number, the distinct raw tokens in that order, each text's raw token
    count) of ``prepared``, the tokens of ``str.split`` (the empty string may be among them, as
    pyarrow keeps one at each end of a text: it stands for no token). Why pyarrow: its split and
    hash run in C++, about twice as fast as ``str.split`` and a ``dict`` per token. ``None`` when
    pyarrow would split otherwise (other white space) or cannot encode a text (lone surrogates)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        texts = pa.array(prepared, type=pa.large_string())
    except (UnicodeEncodeError, pa.ArrowException):
        return None
    split = pc.ascii_split_whitespace(texts)
    encoded = pc.dictionary_encode(split.flatten())
    # other white space stays inside the raw tokens: looked for among the distinct ones (a few
    # thousand per batch), not in every text (a third of a second per sweep)
    if len(encoded.dictionary) and pc.any(pc.match_substring_regex(encoded.dictionary, _OTHER_WHITESPACE_RE)).as_py():
        return None
    per_text = np.diff(split.offsets.to_numpy())
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, encoded.dictionary.to_pylist(), per_text


@lru_cache(maxsize=1)
def _token_kernels() -> Any:
    """:mod:`analysis.diversity.token_kernel`, or ``None`` where it cannot be imported (no numba, or
    no writable cache folder: see :func:`_compiled_kernel`); pyarrow and numpy then do its work."""
    try:
        from analysis.diversity import token_kernel
    except (ImportError, RuntimeError, OSError):
        return None
    return token_kernel


_OTHER_WHITESPACE_SEARCH = re.compile("[" + re.escape(OTHER_WHITESPACE) + "]").search


def _compiled_raw_tokens(prepared: list[str]) -> tuple[np.ndarray, list[str], np.ndarray] | None:
    """:func:`_arrow_raw_tokens` by the compiled kernel (:mod:`analysis.diversity.token_kernel`: one
    pass over the UTF-8 bytes; no empty token), declining where pyarrow does (other white space, a
    lone surrogate); the caller has checked the kernel imports (:func:`_token_kernels`)."""
    import pyarrow as pa

    try:
        texts = pa.array(prepared, type=pa.large_string())
    except (UnicodeEncodeError, pa.ArrowException):
        return None
    _, offsets, data = texts.buffers()
    offsets_np = np.frombuffer(offsets, dtype=np.int64)[texts.offset : texts.offset + len(texts) + 1]
    data_np = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    codes, per_text, starts, lengths = _token_kernels().number_raw_tokens(data_np, offsets_np)
    view = data_np.data  # each distinct token decoded from its bytes in place: no copy of the batch
    uniques = [str(view[s : s + n], "utf-8") for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
    if _OTHER_WHITESPACE_SEARCH("\x00".join(uniques)):
        return None
    return codes, uniques, per_text


def _separator(texts: list[str]) -> str | None:
    """A character that is no white space, in none of ``texts`` (``None`` if each candidate is)."""
    blob = "".join(texts)
    return next((c for c in _SEPARATORS if c not in blob), None)


def _ragged(starts: np.ndarray, lengths: np.ndarray, ends: np.ndarray | None = None) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``, without the loop."""
    if ends is None:
        ends = np.cumsum(lengths)
    total = int(ends[-1]) if ends.size else 0
    return np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)


@lru_cache(maxsize=1)
def _compiled_kernel() -> Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int], np.ndarray] | None:
    """:func:`analysis.diversity.bleu_kernel.compiled_matches`, or ``None`` where numba cannot be
    imported or cannot keep its cache (numba raises ``RuntimeError`` when neither the package's
    folder nor a user cache folder is writable): the kernel only makes counting faster, and the
    array version gives the same integers."""
    try:
        from analysis.diversity.bleu_kernel import compiled_matches
    except (ImportError, RuntimeError, OSError):
        return None
    return compiled_matches


def clipped_matches(ids: np.ndarray, lengths: np.ndarray, first: np.ndarray, second: np.ndarray,
                    vocab: int) -> np.ndarray:
    """Per pair ``(first[p], second[p])`` of texts (indices into ``lengths``; ``ids`` holds the texts'
    tokens one after another, all below ``vocab``), ``sum(min(count_a(g), count_b(g)))`` over the
    n-grams ``g`` of each order 1..4: an int64 array of shape (pairs, 4). Counted by the compiled
    kernel (:mod:`analysis.diversity.bleu_kernel`, a small hash table per pair) where numba is
    installed, else by :func:`array_matches`; both give the same integers. Raises
    :class:`KeysTooLarge` where the array version's keys would not fit int64 (for either, so the
    fallback does not depend on numba)."""
    kernel = _compiled_kernel()
    if kernel is None or len(first) == 0:
        return array_matches(ids, lengths, first, second, vocab)
    _check_keys_fit(int(lengths[first].sum() + lengths[second].sum()), len(first), vocab)
    return kernel(ids, lengths, first, second, vocab, ORDERS)


def _check_keys_fit(total: int, n_pairs: int, vocab: int) -> None:
    """Raise :class:`KeysTooLarge` when the array version's keys (``code * vocab + token``, codes
    below ``total + n_pairs + 1``) would not fit int64 exactly."""
    if (total + n_pairs + 1) * max(vocab, 1) >= _KEY_LIMIT:
        raise KeysTooLarge(f"{total} positions x {vocab} token ids")


def array_matches(ids: np.ndarray, lengths: np.ndarray, first: np.ndarray, second: np.ndarray,
                  vocab: int) -> np.ndarray:
    """:func:`clipped_matches` with integer arrays and one pandas hash table per chunk and order
    (the module docstring's method): where numba is not installed, and the compiled kernel's reference."""
    n_pairs = len(first)
    out = np.zeros((n_pairs, ORDERS), dtype=np.int64)
    if n_pairs == 0:
        return out
    starts = np.cumsum(lengths) - lengths
    seg_len = np.empty(2 * n_pairs, dtype=np.int64)
    seg_len[0::2], seg_len[1::2] = lengths[first], lengths[second]
    seg_start = np.empty(2 * n_pairs, dtype=np.int64)
    seg_start[0::2], seg_start[1::2] = starts[first], starts[second]
    seg_end = np.cumsum(seg_len)
    total = int(seg_end[-1])
    _check_keys_fit(total, n_pairs, vocab)
    vocab = max(vocab, 1)
    if total == 0:
        return out
    tokens = ids[_ragged(seg_start, seg_len, seg_end)]
    left = np.repeat(seg_end, seg_len) - np.arange(total, dtype=np.int64)  # tokens left in the text, itself included
    second_text = np.repeat(np.tile(np.array([False, True]), n_pairs), seg_len)
    pair = np.repeat(np.arange(n_pairs, dtype=np.int64), seg_len[0::2] + seg_len[1::2])
    codes, shared, owner = _count(pair * vocab + tokens, second_text, None, vocab, out[:, 0])
    for n in range(2, ORDERS + 1):
        at = np.flatnonzero(shared[:-1] & shared[1:] & (left[:-1] >= n))  # prefix and suffix shared
        if at.size == 0:
            break
        found, found_shared, owner = _count(codes[at] * vocab + tokens[at + n - 1], second_text[at], owner, vocab,
                                            out[:, n - 1])
        codes = np.zeros(total, dtype=np.int64)
        codes[at] = found
        shared = np.zeros(total, dtype=bool)
        shared[at] = found_shared
    return out


def _count(keys: np.ndarray, second_text: np.ndarray, owner: np.ndarray | None, vocab: int,
           into: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Number ``keys`` (``code * vocab + token``) and write each pair's clipped matches into ``into``.

    ``owner``: the pair of each previous-order code (``None`` at order 1, where ``code`` is the
    pair). Returns each position's code, whether its n-gram is in both texts, and each code's pair.
    """
    codes, uniques = pd.factorize(keys)
    size = len(uniques)
    in_second = np.bincount(codes[second_text], minlength=size)
    clipped = np.minimum(np.bincount(codes, minlength=size) - in_second, in_second)
    prefix = uniques // vocab
    pairs = prefix if owner is None else owner[prefix]
    into[:] = np.bincount(pairs, weights=clipped, minlength=len(into))  # float64: exact below 2**53
    return codes, (clipped > 0)[codes], pairs


#: ``math.exp`` and ``math.log`` as module globals (one lookup each where :func:`exact_score` uses them).
_exp, _ln = math.exp, math.log


def exact_score(hyp_len: int, ref_len: int, correct: Sequence[int]) -> float:
    """``BLEU(effective_order=True)._compute_score_from_stats(...).score`` (smoothing ``exp``, orders
    1..4) on ``[hyp_len, ref_len, *correct, *totals]``: the same float operations in the same order.

    Unrolled over the four orders (a sweep scores both directions of 200,000 pairs: the loop, its
    lists and per-precision ``my_log`` calls were half of the scoring's time). What the unrolling relies on: with
    no match at any order, or no token (``hyp_len`` 0, where sacrebleu's ``my_log(0)`` sends the
    score to 0), the score is 0 (the brevity penalty, computed first there, changes nothing);
    order ``n`` counts while ``hyp_len - n + 1 > 0``; and no precision is 0, so sacrebleu's
    ``my_log`` is ``math.log`` (:func:`score_function` checks the result against sacrebleu's)."""
    c1, c2, c3, c4 = correct
    if not (c1 or c2 or c3 or c4) or hyp_len <= 0:
        return 0.0
    bp = _exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    smooth = 1.0
    logs = []
    for total, matched in ((hyp_len, c1), (hyp_len - 1, c2), (hyp_len - 2, c3), (hyp_len - 3, c4)):
        if total <= 0:
            break
        if matched:
            logs.append(_ln(100.0 * matched / total))
        else:
            smooth *= 2
            logs.append(_ln(100.0 / (smooth * total)))
    return bp * _exp(sum(logs) / len(logs))


def probe_stats() -> list[tuple[int, int, list[int]]]:
    """Statistics that reach every branch of ``compute_bleu``: empty and one-token texts, brevity
    penalty either way, no matches, zero matches at some orders, full matches."""
    stats = []
    for hyp_len in (0, 1, 2, 3, 4, 5, 9, 57, 400):
        for ref_len in (0, 1, 3, 4, 8, 57, 1000):
            totals = [max(0, hyp_len - n) for n in range(ORDERS)]
            for pattern in ((0, 0, 0, 0), (1, 0, 0, 0), (1, 1, 0, 0), (1, 0, 1, 0), (1, 1, 1, 1), (9, 5, 2, 1)):
                stats.append((hyp_len, ref_len, [min(p * max(1, t // 9), t) for p, t in zip(pattern, totals, strict=True)]))
    return stats


def score_function(bleu: BLEU) -> Callable[[int, int, Sequence[int]], float]:
    """``(hyp_len, ref_len, correct) -> score`` of ``bleu``: :func:`exact_score` where ``bleu`` is the
    configuration it repeats and it agrees with ``bleu`` on every probe (``==`` on floats), else
    ``bleu``'s own ``_compute_score_from_stats``."""

    def own(hyp_len: int, ref_len: int, correct: Sequence[int]) -> float:
        totals = [max(0, hyp_len - n) for n in range(bleu.max_ngram_order)]
        return float(bleu._compute_score_from_stats([hyp_len, ref_len, *correct, *totals]).score)

    same_config = (bleu.smooth_method == "exp" and bleu.effective_order and bleu.max_ngram_order == ORDERS)
    if same_config and all(exact_score(*s) == own(*s) for s in probe_stats()):
        return exact_score
    return own
