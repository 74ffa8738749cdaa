"""Batched BLEU gives sacrebleu's numbers bit for bit: the batch tokens equal the per-text 13a
tokenisation, the integer-array clipped matches equal ``Counter`` arithmetic, the score from the
statistics equals sacrebleu's ``_compute_score_from_stats``, and the pairs' scores equal
``sentence_score`` symmetrised, across batch boundaries and on the ``Counter`` fallback."""

from __future__ import annotations

import math
import random
import sys
from collections import Counter

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

import analysis.pipeline.scheduled
from analysis.diversity import bleu as fast_bleu
from analysis.diversity import bleu_counts
from analysis.diversity.bleu_counts import TokenIds, clipped_matches, exact_score, score_function
from analysis.engine.shards import ResultCache
from analysis.pipeline.scheduled import bleu_scores

#: Pieces that reach every 13a rule at a raw token's edges: '.', ',' and '-' next to digits and
#: letters, the entities, ``<skipped>``, a dash before a line break, white space of every kind.
_PIECES = [".", ",", "-", "1", "9", "0.5", "1,000", "3-4", "a.", ".a", ",b", "b,", "x-", "-7", "7-", "..", ",,",
           "&quot;", "&amp;", "&lt;", "&gt;", "&amp;quot;", "<skipped>", "<skip<skipped>ped>", "-\n", "\n", "\t",
           "  ", "\xa0", "\u2003", "\x1c", "é", "数学", "🙂", "$\\frac{1}{2}$", "(a+b)", "word", "the", "'s", "e.g.",
           "\x00", "\ue000"] + [chr(c) for c in range(33, 127)]


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["", " ", "a", ".", ",", "-", "1", "1.", ".1", "-1", "1-", "&quot;", "<skipped>", "-\n", "a-\nb", "x\n"]
    for _ in range(n):
        length = rng.choice([1, 2, 3, 5, 12, 40])
        glue = rng.choice(["", " ", "", " \n"])
        texts.append(glue.join(rng.choice(_PIECES) for _ in range(length)))
    return texts


def _decode(ids: TokenIds, tokens: np.ndarray, lengths: np.ndarray) -> list[list[str]]:
    names = {i: t for t, i in ids._ids.items()}
    words = [names[i] for i in tokens.tolist()]
    ends = np.cumsum(lengths).tolist()
    return [words[end - n : end] for end, n in zip(ends, lengths.tolist(), strict=True)]


def test_13a_splits_raw_tokens_alike() -> None:
    """The rules on a whole prepared text give the tokens of its whitespace pieces, piece by piece."""
    for text in _random_texts(0, 3000):
        prepared = fast_bleu.prepare_13a(text)
        pieces = [token for raw in prepared.split() for token in fast_bleu.split_13a(raw)]
        assert fast_bleu.split_13a(prepared) == pieces, repr(text)


@pytest.mark.parametrize(("source", "separators", "whole"), [
    ("compiled", None, False), ("compiled", None, True), ("arrow", None, False), ("arrow", None, True),
    ("str.split", None, False), ("str.split", ("a", "\x00"), False), ("str.split", None, True)])
def test_batch_tokens_equal_per_text_tokenisation(monkeypatch: pytest.MonkeyPatch, source: str,
                                                  separators: tuple[str, ...] | None, whole: bool) -> None:
    """``source`` of the raw tokens: the compiled kernel (its layout of the ids too), or pyarrow
    (as where numba is not installed: numpy lays the ids out), where either splits alike (chunks
    holding other white space fall back); else always ``str.split``. Separators (``str.split``):
    the module's, or none free (each candidate occurs: text by text). ``whole``: the scorer's whole
    tokenisation per text (the splitter used when its rules are not the 13a ones)."""
    if source == "compiled":
        assert bleu_counts._token_kernels() is not None, "numba is a dependency: the kernel must import"
    else:
        monkeypatch.setattr(bleu_counts, "_token_kernels", lambda: None)
    if source == "str.split":
        monkeypatch.setattr(bleu_counts, "_arrow_raw_tokens", lambda prepared: None)
    if separators is not None:
        monkeypatch.setattr(bleu_counts, "_SEPARATORS", separators)
    bleu = fast_bleu.scorer()
    texts = _random_texts(1, 1500)
    rng = random.Random(2)
    prepare, split = (bleu._preprocess_segment, str.split) if whole else (fast_bleu.prepare_13a, fast_bleu.split_13a)
    ids = TokenIds(prepare, split, max_memo=300)  # the memo is cleared on the way
    start = 0
    while start < len(texts):
        chunk = texts[start : start + rng.choice([1, 2, 7, 100, 400])]
        start += len(chunk)
        tokens, lengths = ids.encode(chunk)
        assert tokens.dtype == np.int64 and len(lengths) == len(chunk) and int(tokens.max(initial=-1)) < ids.size
        assert _decode(ids, tokens, lengths) == [bleu._preprocess_segment(t).split() for t in chunk]


def test_other_whitespace_is_what_pyarrow_does_not_split_at() -> None:
    """Every character ``str.split`` splits at, less pyarrow's six ASCII ones, and pyarrow indeed
    splits at those six and not at the others."""
    import pyarrow as pa
    import pyarrow.compute as pc

    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert sorted(bleu_counts.OTHER_WHITESPACE) == sorted(set(spaces) - set(" \t\n\v\f\r"))
    split = pc.ascii_split_whitespace(pa.array([f"a{c}b" for c in spaces])).to_pylist()
    assert [len(pieces) == 2 for pieces in split] == [c not in bleu_counts.OTHER_WHITESPACE for c in spaces]


def test_arrow_raw_tokens_equal_str_split_or_decline() -> None:
    """Where pyarrow answers, its raw tokens (less the empty ones) are ``str.split``'s, text by
    text; it declines on other white space and on a lone surrogate."""
    texts = [t for t in _random_texts(7, 2000) if not any(c in t for c in bleu_counts.OTHER_WHITESPACE)]
    texts += ["", "   ", " lead", "trail ", "a\t\tb", "\r\n\x0b\x0c x"]
    codes, uniques, per_text = bleu_counts._arrow_raw_tokens(texts)
    tokens = [uniques[c] for c in codes.tolist()]
    ends = np.cumsum(per_text).tolist()
    got = [[t for t in tokens[end - n : end] if t] for end, n in zip(ends, per_text.tolist(), strict=True)]
    assert got == [t.split() for t in texts]
    assert len(set(uniques)) == len(uniques)
    for odd in [*bleu_counts.OTHER_WHITESPACE, "\ud800"]:  # inside a token, a token of its own, at either end
        for text in (f"a{odd}b", f"a {odd} b", f"{odd}a", f"a{odd}", odd, f" {odd}{odd} "):
            assert bleu_counts._arrow_raw_tokens(["plain text", text]) is None, repr(text)


def _long_and_many_texts(seed: int) -> list[str]:
    """Texts whose tokens are many and distinct (the kernel's table grows several times) and often
    longer than 8 bytes (keyed by hash, confirmed byte for byte), some alike but for one byte."""
    rng = random.Random(seed)
    stems = ["".join(rng.choice("abcdefghij\u00e9\u6570") for _ in range(rng.randint(1, 24))) for _ in range(6000)]
    stems += [stem[:-1] + "z" for stem in stems[:500] if len(stem) > 9]
    return [" ".join(rng.choice(stems) for _ in range(rng.randint(0, 60))) for _ in range(400)]


def test_compiled_raw_tokens_equal_str_split_or_decline() -> None:
    """Where the kernel answers, its raw tokens are ``str.split``'s, text by text, each distinct
    token numbered once, in the order tokens first occur; it declines where pyarrow does."""
    texts = [t for t in _random_texts(7, 2000) if not any(c in t for c in bleu_counts.OTHER_WHITESPACE)]
    texts += ["", "   ", " lead", "trail ", "a\t\tb", "\r\n\x0b\x0c x", *_long_and_many_texts(8)]
    codes, uniques, per_text = bleu_counts._compiled_raw_tokens(texts)
    tokens = [uniques[c] for c in codes.tolist()]
    ends = np.cumsum(per_text).tolist()
    assert [tokens[end - n : end] for end, n in zip(ends, per_text.tolist(), strict=True)] == [t.split() for t in texts]
    assert uniques == list(dict.fromkeys(token for text in texts for token in text.split()))
    assert len(uniques) > 5000
    assert bleu_counts._compiled_raw_tokens(["", " \n "])[1] == []
    for odd in [*bleu_counts.OTHER_WHITESPACE, "\ud800"]:  # inside a token, a token of its own, at either end
        for text in (f"a{odd}b", f"a {odd} b", f"{odd}a", f"a{odd}", odd, f" {odd}{odd} "):
            assert bleu_counts._compiled_raw_tokens(["plain text", text]) is None, repr(text)


def test_compiled_layout_equals_the_arrays() -> None:
    """The kernel's layout of the ids equals numpy's gather, raw tokens of zero, one and many ids."""
    from analysis.diversity import token_kernel

    rng = np.random.default_rng(4)
    sub_len = rng.integers(0, 4, size=300)
    flat = rng.integers(0, 1000, size=int(sub_len.sum()))
    per_text = rng.integers(0, 30, size=200)
    codes = rng.integers(0, 300, size=int(per_text.sum()))
    tokens, lengths = token_kernel.lay_out(codes, per_text, sub_len, flat)
    starts = np.cumsum(sub_len) - sub_len
    runs = [flat[starts[c] : starts[c] + sub_len[c]] for c in codes]
    bounds = np.concatenate(([0], np.cumsum(per_text)))
    assert tokens.tolist() == np.concatenate(runs).tolist()
    assert lengths.tolist() == [int(sub_len[codes[a:b]].sum()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _counter_matches(a: list[int], b: list[int]) -> list[int]:
    out = []
    for n in range(1, 5):
        ca = Counter(tuple(a[i : i + n]) for i in range(len(a) - n + 1))
        cb = Counter(tuple(b[i : i + n]) for i in range(len(b) - n + 1))
        out.append(sum(min(c, cb[g]) for g, c in ca.items()))
    return out


@pytest.fixture(params=["compiled", "arrays"])
def counting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that uses it runs with the compiled kernel and again as where numba is not installed."""
    if request.param == "arrays":
        monkeypatch.setattr(bleu_counts, "_compiled_kernel", lambda: None)
    else:
        assert bleu_counts._compiled_kernel() is not None, "numba is a dependency: the kernel must import"
    return str(request.param)


def test_clipped_matches_equal_counter_arithmetic(counting: str) -> None:
    rng = random.Random(3)
    texts = [[], [0], [0, 0], [1, 2, 3, 4], [1, 2, 3, 4, 1, 2, 3, 4], [5] * 9]
    for _ in range(300):
        vocab = rng.choice([2, 3, 10, 1000])
        texts.append([rng.randrange(vocab) for _ in range(rng.choice([1, 2, 3, 4, 5, 8, 30, 200]))])
    pairs = [(rng.randrange(len(texts)), rng.randrange(len(texts))) for _ in range(2000)] + [(3, 4), (4, 4), (0, 5)]
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    ids = np.array([i for t in texts for i in t], dtype=np.int64)
    first, second = (np.array(side, dtype=np.int64) for side in zip(*pairs, strict=True))
    got = clipped_matches(ids, lengths, first, second, 1000)
    assert got.tolist() == [_counter_matches(texts[a], texts[b]) for a, b in pairs]
    assert got[-3].tolist() == [4, 3, 2, 1] and got[-2].tolist() == [8, 7, 6, 5]


def _random_stats(rng: random.Random) -> tuple[int, int, list[int]]:
    hyp, ref = rng.choice([0, 1, 2, 3, 4, 5, 6, 10, 80, 500]), rng.choice([0, 1, 2, 3, 4, 5, 6, 10, 80, 500])
    correct = []
    for n in range(4):
        total = max(0, hyp - n)
        correct.append(0 if total == 0 or rng.random() < 0.3 else rng.randint(0, total))
    return hyp, ref, correct


def test_exact_score_equals_sacrebleu_s() -> None:
    bleu = fast_bleu.scorer()
    rng = random.Random(4)
    stats = [_random_stats(rng) for _ in range(20000)] + [(1, 1, [1, 0, 0, 0]), (1, 9, [1, 0, 0, 0]), (9, 1, [1, 0, 0, 0]),
                                                          (4, 4, [0, 0, 0, 0]), (3, 7, [3, 2, 1, 0]), (5, 5, [5, 0, 3, 0])]
    for hyp, ref, correct in stats:
        totals = [max(0, hyp - n) for n in range(4)]
        expected = bleu._compute_score_from_stats([hyp, ref, *correct, *totals]).score
        assert exact_score(hyp, ref, correct) == expected, (hyp, ref, correct)
    assert any(0 < exact_score(*s) < 100 for s in stats) and exact_score(3, 7, [3, 2, 1, 0]) < exact_score(3, 3, [3, 2, 1, 0])
    assert score_function(bleu) is exact_score
    other = BLEU(effective_order=True, smooth_method="floor")  # not the configuration exact_score repeats
    assert score_function(other) is not exact_score
    assert score_function(other)(5, 5, [5, 0, 3, 0]) == other._compute_score_from_stats([5, 5, 5, 0, 3, 0, 5, 4, 3, 2]).score


def _reference(a: str, b: str) -> float | None:
    if not a.strip() or not b.strip():
        return None
    return (sacrebleu.sentence_bleu(a, [b]).score + sacrebleu.sentence_bleu(b, [a]).score) / 200.0


def _sibling_pairs(seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    texts = _random_texts(seed, 400)
    pairs = []
    for _ in range(150):
        block = [rng.choice(texts) for _ in range(rng.choice([2, 2, 3, 4]))]
        pairs += [(block[i], block[j]) for i in range(len(block)) for j in range(i + 1, len(block))]
    return pairs


def test_compiled_kernel_equals_the_arrays_on_long_texts_and_large_vocabularies() -> None:
    """Tables that grow past their smallest size, keys that collide in a slot (many equal and
    near-equal n-grams), token ids near a large vocabulary's top: the same counts either way."""
    from analysis.diversity.bleu_kernel import compiled_matches

    rng = np.random.default_rng(11)
    texts = [rng.integers(0, vocab, size=length) for vocab, length in
             [(2, 3000), (3, 900), (50_000, 2000), (7, 1), (7, 0), (1_000_000, 400), (5, 4000), (2, 1)] * 3]
    texts += [np.repeat(rng.integers(0, 4, size=40), rng.integers(1, 9, size=40)) for _ in range(20)]
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    ids = np.concatenate(texts).astype(np.int64)
    first = rng.integers(0, len(texts), size=600)
    second = rng.integers(0, len(texts), size=600)
    got = compiled_matches(ids, lengths, first, second, 1_000_000, bleu_counts.ORDERS)
    assert got.tolist() == bleu_counts.array_matches(ids, lengths, first, second, 1_000_000).tolist()
    some = [(int(a), int(b)) for a, b in zip(first[:25], second[:25], strict=True)]
    assert got[:25].tolist() == [_counter_matches(texts[a].tolist(), texts[b].tolist()) for a, b in some]
    assert got.sum() > 0 and (got[:, 3] > 0).any()


class _Refusing:
    """A meta path finder whose import of the kernel fails as numba does with no writable cache folder."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "analysis.diversity.bleu_kernel":
            raise RuntimeError("cannot cache function '_slot': no locator available for file")


def test_a_kernel_that_cannot_load_leaves_the_array_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "analysis.diversity.bleu_kernel", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Refusing(), *sys.meta_path])
    bleu_counts._compiled_kernel.cache_clear()
    try:
        assert bleu_counts._compiled_kernel() is None
        ids, lengths = np.array([1, 2, 3, 1, 2], dtype=np.int64), np.array([3, 2], dtype=np.int64)
        pair = np.array([0], dtype=np.int64), np.array([1], dtype=np.int64)
        assert clipped_matches(ids, lengths, *pair, 4).tolist() == [[2, 1, 0, 0]]
    finally:
        bleu_counts._compiled_kernel.cache_clear()


@pytest.mark.parametrize("limit", [None, 10])  # 10: every batch's keys are "too large", the Counter path scores
def test_pair_bleu_equals_sentence_score_across_batches(monkeypatch: pytest.MonkeyPatch, limit: int | None,
                                                        counting: str) -> None:
    monkeypatch.setattr(analysis.pipeline.scheduled, "BLEU_CHUNK", 7)  # blocks straddle batches
    if limit is not None:
        monkeypatch.setattr(bleu_counts, "_KEY_LIMIT", limit)
    pairs = _sibling_pairs(5)
    expected = [_reference(a, b) for a, b in pairs]
    assert any(e is None for e in expected) and any(e and 0 < e < 1 for e in expected)
    assert bleu_scores(pairs, cache=ResultCache(None)).result() == expected  # ==: identical floats
    assert [fast_bleu.pair_bleu([pair])[0] for pair in pairs[:40]] == expected[:40]
    assert fast_bleu.pair_bleu(pairs) == expected


def _neumaier_score(hyp_len: int, ref_len: int, correct: list[int]) -> float:
    """``exact_score`` with Python 3.12's ``sum`` of floats (Neumaier's compensation), written out."""
    if not any(correct) or hyp_len <= 0:
        return 0.0
    bp = math.exp(1 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    smooth, logs = 1.0, []
    for total, matched in zip(range(hyp_len, hyp_len - 4, -1), correct, strict=True):
        if total <= 0:
            break
        if matched:
            logs.append(math.log(100.0 * matched / total))
        else:
            smooth *= 2
            logs.append(math.log(100.0 / (smooth * total)))
    high, low = 0 + logs[0], 0.0
    for x in logs[1:]:
        t = high + x
        low += (high - t) + x if abs(high) >= abs(x) else (x - t) + high
        high = t
    if low and math.isfinite(low):
        high += low
    return bp * math.exp(high / len(logs))


@pytest.mark.parametrize("compensated", [False, True])
def test_compiled_scores_equal_python_arithmetic_under_either_sum(compensated: bool) -> None:
    """The compiled scorer repeats ``exact_score`` with the running Python's ``sum``: plain addition
    before 3.12, Neumaier's compensated sum from 3.12 on (each checked here, whichever runs)."""
    from analysis.diversity import bleu_kernel

    stats = fast_bleu._score_probes()
    len_a = np.array([s[0] for s in stats], dtype=np.int64)
    len_b = np.array([s[1] for s in stats], dtype=np.int64)
    matches = np.array([s[2] for s in stats], dtype=np.int64)
    out = np.empty(len(stats))
    bleu_kernel._pair_scores(len_a, len_b, matches, compensated, out)
    one = _neumaier_score if compensated else exact_score
    want = [(one(a, b, c) + one(b, a, c)) / 200.0 for a, b, c in stats]
    assert out.tolist() == want
    if (sys.version_info >= (3, 12)) == compensated:
        assert want == [(exact_score(a, b, c) + exact_score(b, a, c)) / 200.0 for a, b, c in stats]


def test_scores_are_compiled_only_where_they_equal_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled scorer is used here (numba is a dependency), and refused when it gives other floats."""
    from analysis.diversity import bleu_kernel

    fast_bleu._compiled_scores.cache_clear()
    assert fast_bleu._compiled_scores() is bleu_kernel.compiled_pair_scores
    real = bleu_kernel.compiled_pair_scores
    monkeypatch.setattr(bleu_kernel, "compiled_pair_scores", lambda a, b, m: np.nextafter(real(a, b, m), 2.0))
    fast_bleu._compiled_scores.cache_clear()
    try:
        assert fast_bleu._compiled_scores() is None
        pairs = [("the cat sat on the mat", "the cat sat on a mat"), ("a b c d", "a b c e")]
        assert fast_bleu.pair_bleu(pairs) == [fast_bleu.symmetric_bleu(a, b) for a, b in pairs]
    finally:
        monkeypatch.undo()
        fast_bleu._compiled_scores.cache_clear()
