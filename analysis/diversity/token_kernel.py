"""BLEU's raw tokens of many texts, compiled: split at ASCII white space and numbered, then laid out
as the scorer's token ids, each in one pass over the bytes.

Why: :class:`~analysis.diversity.bleu_counts.TokenIds` splits a batch's prepared texts into raw
tokens (white-space separated pieces), numbers the distinct ones, splits each distinct one by the
13a rules once (in Python, remembered), and lays every text out as token ids. Done by pyarrow
(``ascii_split_whitespace``, ``dictionary_encode``) and a numpy gather, that took 2.2 s of the 3.3 s
a sweep's 38.5 million raw tokens cost to tokenise, in three passes that each wrote a copy of every
token (``docs/performance.md``, "(i57, BLEU's raw tokens compiled)"). Here one pass over the UTF-8
bytes splits and numbers (an open-addressing table keyed by the token's bytes: FNV-1a, compared
byte for byte on a hash match, so two distinct tokens never share a number), and one pass writes
the ids.

What it splits at: the six bytes pyarrow's ``ascii_split_whitespace`` does (``\\t \\n \\v \\f \\r``
and the space). ``str.split`` also splits at other white space; the caller declines a batch whose
distinct tokens hold any (as it does for pyarrow's), so the tokens are always ``str.split``'s.
Every token is non-empty (pyarrow keeps an empty one at each end of a text that starts or ends
with white space); distinct tokens are numbered in the order they first occur, as
``dictionary_encode`` numbers them, so the ids that follow are the same
(``tests/analysis/diversity/test_bleu_batch.py``).

numba compiles on first use and keeps the machine code (``cache=True``), as for
:mod:`analysis.diversity.bleu_kernel`; where this module cannot be imported the caller uses pyarrow.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

#: FNV-1a's 64-bit offset basis and prime.
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
#: Fibonacci hashing's multiplier (2**64 / golden ratio, odd): spreads the hashes over the table.
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _is_space(byte: Any) -> bool:  # pragma: no cover - compiled
    return byte == 32 or 9 <= byte <= 13


@numba.njit(cache=True, nogil=True)
def _grown(keys: np.ndarray, n_unique: int, bits: int) -> np.ndarray:  # pragma: no cover - compiled
    """A table of ``2**bits`` slots holding the first ``n_unique`` tokens by their ``keys``."""
    size = 1 << bits
    table = np.full(size, -1, dtype=np.int64)
    shift = np.uint64(64 - bits)
    mask = size - 1
    for u in range(n_unique):
        slot = np.int64((keys[u] * _MULTIPLIER) >> shift)
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = u
    return table


@numba.njit(cache=True, nogil=True)
def _number_raw_tokens(data: np.ndarray, offsets: np.ndarray, codes: np.ndarray, per_text: np.ndarray,
                       unique_start: np.ndarray, unique_len: np.ndarray) -> tuple[int, int]:  # pragma: no cover
    """Split each text (``data[offsets[t]:offsets[t + 1]]``) at ASCII white space; write each token's
    number into ``codes`` (in order), each text's token count into ``per_text``, and each distinct
    token's first byte offset and length into ``unique_start`` / ``unique_len``. Returns (distinct
    tokens, tokens).

    A token's key: its bytes themselves, packed into 64 bits, when it has at most 8 (most tokens:
    equal keys and lengths are equal tokens, no bytes compared); else its FNV-1a hash, and a key
    match is confirmed byte for byte."""
    keys = np.empty(unique_start.shape[0], dtype=np.uint64)
    bits = 10
    table = np.full(1 << bits, -1, dtype=np.int64)
    n_unique = 0
    n_tokens = 0
    for t in range(offsets.shape[0] - 1):
        i, end, count = offsets[t], offsets[t + 1], 0
        while True:
            while i < end and _is_space(data[i]):
                i += 1
            if i >= end:
                break
            start = i
            key = np.uint64(0)
            while i < end and not _is_space(data[i]):
                key = (key << np.uint64(8)) | np.uint64(data[i])
                i += 1
            length = i - start
            if length > 8:
                key = _FNV_OFFSET
                for k in range(start, i):
                    key = (key ^ np.uint64(data[k])) * _FNV_PRIME
            if 2 * (n_unique + 1) > (1 << bits):
                bits += 1
                table = _grown(keys, n_unique, bits)
            mask = (1 << bits) - 1
            slot = np.int64((key * _MULTIPLIER) >> np.uint64(64 - bits))
            while True:
                u = table[slot]
                if u < 0:
                    u = n_unique
                    table[slot] = u
                    keys[u], unique_start[u], unique_len[u] = key, start, length
                    n_unique += 1
                    break
                if keys[u] == key and unique_len[u] == length and (length <= 8 or _same_bytes(data, unique_start[u],
                                                                                             start, length)):
                    break
                slot = (slot + 1) & mask
            codes[n_tokens] = u
            n_tokens += 1
            count += 1
        per_text[t] = count
    return n_unique, n_tokens


@numba.njit(cache=True, nogil=True, inline="always")
def _same_bytes(data: np.ndarray, first: int, second: int, length: int) -> bool:  # pragma: no cover - compiled
    for k in range(length):  # noqa: SIM110 - a loop numba compiles (all() of a generator it may not)
        if data[first + k] != data[second + k]:
            return False
    return True


def number_raw_tokens(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(each raw token's number, each text's raw token count, each distinct token's first byte offset,
    its byte length) of the texts whose UTF-8 bytes are ``data[offsets[t]:offsets[t + 1]]``."""
    n_texts = max(0, len(offsets) - 1)
    bound = (int(offsets[-1] - offsets[0]) + n_texts) // 2 + 1 if n_texts else 1  # a token and a space each
    codes = np.empty(bound, dtype=np.int64)
    per_text = np.empty(n_texts, dtype=np.int64)
    unique_start = np.empty(bound, dtype=np.int64)
    unique_len = np.empty(bound, dtype=np.int64)
    n_unique, n_tokens = _number_raw_tokens(np.ascontiguousarray(data, dtype=np.uint8),
                                            np.ascontiguousarray(offsets, dtype=np.int64), codes, per_text,
                                            unique_start, unique_len)
    return codes[:n_tokens], per_text, unique_start[:n_unique], unique_len[:n_unique]


@numba.njit(cache=True, nogil=True)
def _lay_out(codes: np.ndarray, per_text: np.ndarray, sub_start: np.ndarray, sub_len: np.ndarray,
             flat: np.ndarray, tokens: np.ndarray, lengths: np.ndarray) -> None:  # pragma: no cover - compiled
    """Write each raw token's ids (``flat[sub_start[c]:sub_start[c] + sub_len[c]]`` for its number
    ``c``) into ``tokens``, one after another, and each text's id count into ``lengths``."""
    at = 0
    position = 0
    for t in range(per_text.shape[0]):
        n = 0
        for _ in range(per_text[t]):
            code = codes[position]
            position += 1
            first, count = sub_start[code], sub_len[code]
            for k in range(count):
                tokens[at + k] = flat[first + k]
            at += count
            n += count
        lengths[t] = n


def lay_out(codes: np.ndarray, per_text: np.ndarray, sub_len: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the token ids of every text one after another, each text's count): raw token ``i`` of the
    texts in order has number ``codes[i]``, text ``t`` holds ``per_text[t]`` of them, and the distinct
    token ``c`` stands for the ``sub_len[c]`` ids that follow those of ``c - 1`` in ``flat``."""
    codes64 = np.ascontiguousarray(codes, dtype=np.int64)
    sub_len64 = np.ascontiguousarray(sub_len, dtype=np.int64)
    sub_start = np.cumsum(sub_len64) - sub_len64
    tokens = np.empty(int(sub_len64[codes64].sum()) if codes64.size else 0, dtype=np.int64)
    lengths = np.empty(len(per_text), dtype=np.int64)
    _lay_out(codes64, np.ascontiguousarray(per_text, dtype=np.int64), sub_start, sub_len64,
             np.ascontiguousarray(flat, dtype=np.int64), tokens, lengths)
    return tokens, lengths
