"""Clipped n-gram matches of many text pairs, compiled: one small hash table per pair.

Why: the array version (:func:`analysis.diversity.bleu_counts.clipped_matches`) numbers every
n-gram of a chunk in one pandas hash table keyed ``pair * V + token``; a sweep's 208,667 sibling
pairs spent most of BLEU's time there (``docs/performance.md``, "(i57, cold analyze)"). A pair's
two texts are short (a few hundred tokens), so counting them alone in a table that fits the CPU's
cache, in compiled code, does the same arithmetic about four times faster (``docs/performance.md``,
"(i57, night)").

The algorithm per pair, for each order ``n`` = 1..4: every n-gram of both texts becomes an
integer key, ``token`` at order 1 and ``code(n-1) * V + next token`` above it, where ``code`` is
the dense number the previous order's table gave the (n-1)-gram (``V`` the vocabulary size;
codes are below the pair's token count, so the key fits int64 exactly, checked by the caller:
no hashing of text, no collisions that could change a count). An open-addressing table counts
each key in either text; the clipped matches are ``sum(min(count_a, count_b))`` over its keys,
what sacrebleu's ``_compute_segment_statistics`` adds. The counts are integers, so they equal
the array version's exactly (``tests/analysis/diversity/test_bleu_batch.py``); the float
score is still computed in Python (:func:`analysis.diversity.bleu_counts.exact_score`), so no
BLEU value moves by a bit.

numba compiles :func:`_pair_matches` on its first call (``cache=True``: once per installation,
kept in ``__pycache__`` beside this file or in numba's user cache, then loaded in a quarter of a
second). :func:`analysis.diversity.bleu_counts.clipped_matches` imports this module on first use;
where that import fails (no numba wheel for the platform, or no writable cache folder) it counts with
the array version.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numba
import numpy as np

#: Fibonacci hashing's multiplier (2**64 / golden ratio, odd): spreads consecutive keys over the table.
_MULTIPLIER = 0x9E3779B97F4A7C15


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(keys: np.ndarray, count_a: np.ndarray, count_b: np.ndarray, code_of_slot: np.ndarray,
          used: np.ndarray, n_used: int, key: int, mask: int, shift: Any) -> tuple[Any, int]:
    """(the slot of ``key`` in the open-addressing table, the number of slots in use): found, or
    claimed with the next dense code (a slot is free when neither text has counted in it)."""
    slot = np.int64((np.uint64(key) * np.uint64(_MULTIPLIER)) >> shift)
    while count_a[slot] != 0 or count_b[slot] != 0:
        if keys[slot] == key:
            return slot, n_used
        slot = (slot + 1) & mask
    keys[slot] = key
    code_of_slot[slot] = n_used
    used[n_used] = slot
    return slot, n_used + 1


@numba.njit(cache=True, nogil=True)
def _unigram_matches(ids: np.ndarray, start_a: int, len_a: int, start_b: int, len_b: int, count_a: np.ndarray,
                     count_b: np.ndarray, codes: np.ndarray) -> int:  # pragma: no cover - compiled
    """Order 1 by direct addressing (a count per token id, reset after): the clipped matches; each
    position's code in ``codes`` (a's positions, then b's) is its token where that token is in
    both texts, else -1."""
    for i in range(len_a):
        count_a[ids[start_a + i]] += 1
    matched = 0
    for i in range(len_b):
        token = ids[start_b + i]
        if count_b[token] < count_a[token]:  # a's occurrences not yet matched: min(count_a, count_b) grows
            matched += 1
        count_b[token] += 1
    for i in range(len_a):
        token = ids[start_a + i]
        codes[i] = token if count_b[token] > 0 else -1
    for i in range(len_b):
        token = ids[start_b + i]
        codes[len_a + i] = token if count_a[token] > 0 else -1
    for i in range(len_a):
        count_a[ids[start_a + i]] = 0
    for i in range(len_b):
        count_b[ids[start_b + i]] = 0
    return matched


@numba.njit(cache=True, nogil=True)
def _pair_matches(ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first: np.ndarray,
                  second: np.ndarray, vocab: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Write each pair's clipped matches per order into ``out`` (shape (pairs, orders), zeros on entry).

    ``codes[n % 2]`` holds each position's (n-1)-gram code (text a's positions first, then b's;
    -1 where that (n-1)-gram is not in both texts) while order ``n`` writes its own into the other
    row. An n-gram can be in both texts only if its (n-1)-gram prefix and suffix are, so only those
    positions are counted, and an order with no match ends the pair (none above it can match).
    The table is sized per pair (a power of two at least twice the pair's tokens: short probes,
    slots in cache) and emptied after each order by resetting only the slots it used."""
    longest = 0
    for p in range(first.shape[0]):
        longest = max(longest, lengths[first[p]] + lengths[second[p]])
    size = 16
    while size < 2 * longest:
        size *= 2
    keys = np.empty(size, dtype=np.int64)
    count_a = np.zeros(max(size, vocab), dtype=np.int32)
    count_b = np.zeros(max(size, vocab), dtype=np.int32)
    code_of_slot = np.empty(size, dtype=np.int64)
    used = np.empty(longest + 1, dtype=np.int64)
    slot_at = np.empty(longest + 1, dtype=np.int64)
    codes = np.empty((2, longest + 1), dtype=np.int64)
    for p in range(first.shape[0]):
        len_a, len_b = lengths[first[p]], lengths[second[p]]
        start_a, start_b = starts[first[p]], starts[second[p]]
        if len_a == 0 or len_b == 0:
            continue
        matched = _unigram_matches(ids, start_a, len_a, start_b, len_b, count_a, count_b, codes[1])
        out[p, 0] = matched
        bits = 4
        while (1 << bits) < 2 * (len_a + len_b):
            bits += 1
        mask, shift = (1 << bits) - 1, np.uint64(64 - bits)
        for n in range(2, out.shape[1] + 1):
            if matched == 0 or len_a < n or len_b < n:
                break
            prev, cur = codes[(n + 1) % 2], codes[n % 2]
            n_used, matched = 0, 0
            for side in range(2):
                start, length, offset = (start_a, len_a, 0) if side == 0 else (start_b, len_b, len_a)
                for i in range(length - n + 1):
                    at = offset + i
                    if prev[at] < 0 or prev[at + 1] < 0:  # prefix or suffix in one text only
                        slot_at[at] = -1
                        continue
                    key = prev[at] * vocab + ids[start + i + n - 1]
                    slot, n_used = _slot(keys, count_a, count_b, code_of_slot, used, n_used, key, mask, shift)
                    if side == 0:
                        count_a[slot] += 1
                    else:
                        if count_b[slot] < count_a[slot]:
                            matched += 1
                        count_b[slot] += 1
                    slot_at[at] = slot
            out[p, n - 1] = matched
            for at in range(len_a + len_b):
                slot = slot_at[at] if at < len_a - n + 1 or len_a <= at < len_a + len_b - n + 1 else -1
                cur[at] = code_of_slot[slot] if slot >= 0 and count_a[slot] > 0 and count_b[slot] > 0 else -1
            for u in range(n_used):
                count_a[used[u]] = 0
                count_b[used[u]] = 0


@numba.njit(cache=True, nogil=True)
def _one_direction(hyp_len: int, ref_len: int, c1: int, c2: int, c3: int, c4: int,
                   compensated: bool) -> float:  # pragma: no cover - compiled
    """:func:`analysis.diversity.bleu_counts.exact_score`, the same float operations in the same
    order; ``compensated``: Python's ``sum`` of floats is Neumaier's compensated sum (3.12 on),
    else plain left-to-right addition."""
    if (c1 == 0 and c2 == 0 and c3 == 0 and c4 == 0) or hyp_len <= 0:
        return 0.0
    bp = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    smooth = 1.0
    total = 0.0  # sum() starts from the int 0: the first float added to it is itself
    lost = 0.0
    n_logs = 0
    for order in range(4):
        count = hyp_len - order
        if count <= 0:
            break
        matched = c1 if order == 0 else c2 if order == 1 else c3 if order == 2 else c4
        if matched:
            log = math.log(100.0 * matched / count)
        else:
            smooth *= 2
            log = math.log(100.0 / (smooth * count))
        if n_logs == 0 or not compensated:
            total = 0 + log if n_logs == 0 else total + log
        else:
            t = total + log
            if abs(total) >= abs(log):
                lost += (total - t) + log
            else:
                lost += (log - t) + total
            total = t
        n_logs += 1
    if compensated and lost != 0.0 and math.isfinite(lost):
        total += lost
    return bp * math.exp(total / n_logs)


@numba.njit(cache=True, nogil=True)
def _pair_scores(len_a: np.ndarray, len_b: np.ndarray, matches: np.ndarray, compensated: bool,
                 out: np.ndarray) -> None:  # pragma: no cover - compiled
    for p in range(len_a.shape[0]):
        c1, c2, c3, c4 = matches[p, 0], matches[p, 1], matches[p, 2], matches[p, 3]
        out[p] = (_one_direction(len_a[p], len_b[p], c1, c2, c3, c4, compensated)
                  + _one_direction(len_b[p], len_a[p], c1, c2, c3, c4, compensated)) / 200.0


def compiled_pair_scores(len_a: np.ndarray, len_b: np.ndarray, matches: np.ndarray) -> np.ndarray:
    """Each pair's symmetrised score, ``(exact_score(a, b, m) + exact_score(b, a, m)) / 200``, compiled
    (the caller checks it equals the Python version on this machine before using it)."""
    out = np.empty(len(len_a), dtype=np.float64)
    _pair_scores(np.ascontiguousarray(len_a, dtype=np.int64), np.ascontiguousarray(len_b, dtype=np.int64),
                 np.ascontiguousarray(matches, dtype=np.int64), sys.version_info >= (3, 12), out)
    return out


def compiled_matches(ids: np.ndarray, lengths: np.ndarray, first: np.ndarray, second: np.ndarray,
                     vocab: int, orders: int) -> np.ndarray:
    """The clipped matches of :func:`analysis.diversity.bleu_counts.clipped_matches` (its arguments,
    and its n-gram orders as ``orders``; its result) by the compiled kernel; the caller has checked
    the keys fit int64."""
    out = np.zeros((len(first), orders), dtype=np.int64)
    if len(first) == 0:
        return out
    ids64: Any = np.ascontiguousarray(ids, dtype=np.int64)
    lengths64 = np.ascontiguousarray(lengths, dtype=np.int64)
    starts = np.cumsum(lengths64) - lengths64
    _pair_matches(ids64, starts, lengths64, np.ascontiguousarray(first, dtype=np.int64),
                  np.ascontiguousarray(second, dtype=np.int64), max(vocab, 1), out)
    return out

