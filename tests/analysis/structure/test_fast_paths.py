"""The analysis's fast paths give today's exact numbers: BLEU with n-grams counted once equals
``sacrebleu.sentence_bleu`` bit for bit; batched equivalence classes equal the one-group-at-a-time
greedy classes computed with math-verify directly; the on-disk caches return what was computed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest
import sacrebleu
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from analysis.diversity import bleu as fast_bleu
from analysis.engine.cache import KINDS, fingerprint
from analysis.engine.shards import ResultCache, hash_key
from analysis.pipeline.scheduled import VerdictCache, bleu_scores, classify, conclude, roles_of
from analysis.structure.conclusions import path_conclusion
from analysis.structure.roles import assign_roles, path_conclusions
from pr1_eval.grading.grade import answer_classes, answer_classes_many
from pr1_eval.grading.verify import verify_pair

CACHE_ENV = KINDS["analysis"]
_WORDS = ["the", "sum", "is", "12", "so", "x", "=", "3", ".", "we", "get", "$\\frac{1}{2}$", "∑", "数学", "é", "🙂",
          "check:", "again", "(a+b)", "2^{10}", "-", "1,000", "0.5"]


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["", "   ", "a", "a .", "12", "数学 数学 数学", "🙂", "x\n\ny = 3.\n", "the the the the the"]
    for _ in range(n):
        length = rng.choice([1, 2, 3, 5, 10, 40, 120])
        texts.append(" ".join(rng.choice(_WORDS) for _ in range(length)) + rng.choice(["", ".", " .", "\n"]))
    return texts


def _reference_bleu(a: str, b: str) -> float | None:
    """The previous computation: two independent sacrebleu.sentence_bleu calls."""
    if not a.strip() or not b.strip():
        return None
    return (sacrebleu.sentence_bleu(a, [b]).score + sacrebleu.sentence_bleu(b, [a]).score) / 200.0


def test_fast_bleu_equals_sacrebleu_exactly(tmp_path: Path) -> None:
    texts = _texts(0, 120)
    rng = random.Random(1)
    pairs = [(a, b) for a in texts[:12] for b in texts[:12]] + [(rng.choice(texts), rng.choice(texts)) for _ in range(400)]
    expected = [_reference_bleu(a, b) for a, b in pairs]
    assert any(e is None for e in expected) and any(e and 0 < e < 1 for e in expected)
    cache = ResultCache(tmp_path / "bleu")
    assert bleu_scores(pairs, cache=cache).result() == expected  # ==: identical floats, not approx
    assert fast_bleu.pair_bleu(pairs) == expected  # the plain computation, no cache
    again = ResultCache(tmp_path / "bleu")  # from disk only
    assert bleu_scores(pairs, cache=again).result() == expected and len(again) == len(ResultCache(tmp_path / "bleu"))


def test_ngram_counts_equal_sacrebleu_s() -> None:
    bleu = fast_bleu.scorer()
    for text in _texts(2, 60):
        if text.strip():
            expected, _ = extract_all_word_ngrams(bleu._preprocess_segment(text), 1, 4)
            assert fast_bleu.ngram_counts(text) == expected


def test_fast_tokenizer_equals_sacrebleu_s_13a() -> None:
    """Every ASCII character (each of the first rule's class among them), the entities, line breaks
    and the digit/period/comma/dash contexts the other rules look at, in random strings."""
    bleu = fast_bleu.scorer()
    assert fast_bleu._tokenizer() is fast_bleu.tokenize_13a  # the installed sacrebleu's rules are the expected ones
    pieces = [chr(c) for c in range(32, 127)] + ["\n", "\t", "é", "—", "数", "&quot;", "&amp;", "&lt;", "&gt;",
                                                  "<skipped>", "-\n", "1.5", "a.,b", "3-4", "  ", ".."]
    rng = random.Random(3)
    texts = _texts(4, 200) + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 80))) for _ in range(5000)]
    for text in texts:
        assert fast_bleu.tokenize_13a(text) == bleu._preprocess_segment(text), repr(text)


def test_ngrams_are_counted_once_per_text(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = fast_bleu.TokenIds.encode

    def counting(self: fast_bleu.TokenIds, texts: list[str]) -> object:
        calls.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(fast_bleu.TokenIds, "encode", counting)
    texts = ["a b c d", "a b c e", "b c d e f", "z y"]
    pairs = [(a, b) for i, a in enumerate(texts) for b in texts[i + 1 :]]
    bleu_scores(pairs, cache=ResultCache(None)).result()
    assert sorted(calls) == sorted(texts)  # sentence_score would count 2 per pair direction: 24


def _reference_classes(answers: list[str | None]) -> list[int | None]:
    """The greedy rounds of the old answer_classes, one check at a time, math-verify in process."""
    keys = [a.strip() if isinstance(a, str) and a.strip() else None for a in answers]
    unplaced = list(dict.fromkeys(k for k in keys if k is not None))
    class_of: dict[str, int] = {}
    n = 0
    while unplaced:
        head, rest = unplaced[0], unplaced[1:]
        class_of[head] = n
        unplaced = []
        for other in rest:
            verdict = verify_pair(head, other)
            if verdict.status == "ok" and verdict.correct:
                class_of[other] = n
            else:
                unplaced.append(other)
        n += 1
    return [None if k is None else class_of[k] for k in keys]


GROUPS = [["1/2", "0.5", "\\frac{1}{2}", "3"], ["3", "0.5", "1/2"], [None, " 7 ", "7", None], [], [None],
          ["x", "2x", "x", "4/2", "2", "2.0"], ["12", "13", "12", "\\boxed{13}", "14"], ["(1, 2)", "(2, 1)", "1,2"],
          ["10%", "0.1", "10"], ["3", "3", "3"], ["π", "\\pi", "3.14159"]]


def test_batched_classes_equal_the_one_by_one_greedy_classes(tmp_path: Path) -> None:
    expected = [_reference_classes(g) for g in GROUPS]
    known: dict[tuple[str, str], bool] = {}
    assert answer_classes_many(GROUPS, known=known) == expected
    assert known  # the checks made were remembered
    assert answer_classes_many(GROUPS, known=known) == expected  # all from the store now
    store = VerdictCache(ResultCache(tmp_path / "verdicts"))
    assert classify(GROUPS, store) == expected
    assert classify(GROUPS, VerdictCache(ResultCache(tmp_path / "verdicts"))) == expected


def test_each_distinct_pair_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.grading import grade

    asked: list[tuple[str, str]] = []
    real = grade._equal_verdicts

    def spy(pairs: list[tuple[str, str]], timeout_s: float, known: object) -> dict[tuple[str, str], bool]:
        asked.extend(pairs)
        return real(pairs, timeout_s, None)

    monkeypatch.setattr(grade, "_equal_verdicts", spy)
    groups = [["12", "13"]] * 50 + [["13", "12"]] * 50 + [["12", "12"]] * 10
    assert answer_classes_many(groups) == [[0, 1]] * 100 + [[0, 0]] * 10
    assert sorted(asked) == [("12", "13"), ("13", "12")]  # one round, two distinct pairs, for 100 groups


def test_groups_alike_after_stripping_are_classed_once_and_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups whose answers are the same once stripped (blank and None alike) are classed once;
    each still gets the classes answer_classes gives it alone, in a list of its own."""
    from pr1_eval.grading import grade

    groups = [["1/2", " 0.5", None, "x"], ["1/2", "0.5 ", "", "x"], ["0.5", "1/2"], ["1/2", "0.5", None, "x"]]
    alone = [answer_classes(group) for group in groups]
    seen: list[tuple[str | None, ...]] = []
    real = grade._classes_of_distinct

    def spy(distinct: list[tuple[str | None, ...]], timeout_s: float, known: object) -> list[list[int | None]]:
        seen.extend(distinct)
        return real(distinct, timeout_s, known)  # type: ignore[arg-type]

    monkeypatch.setattr(grade, "_classes_of_distinct", spy)
    together = answer_classes_many(groups)
    assert together == alone == [[0, 0, None, 1], [0, 0, None, 1], [0, 0], [0, 0, None, 1]]
    assert seen == [("1/2", "0.5", None, "x"), ("0.5", "1/2")]
    together[0].append(9)
    assert together[1] == [0, 0, None, 1]  # not one list shared by the alike groups


def test_conclusion_cache_returns_the_reader_s_conclusions(tmp_path: Path) -> None:
    texts = ["so 5 * 15 = 75 berries.", "Final Answer: 12", "", "no value here", "\\boxed{3}", "数学 = 7", "x"] * 3
    expected = [path_conclusion(t) for t in texts]
    assert conclude(texts, cache=ResultCache(tmp_path / "c")).result() == expected
    cache = ResultCache(tmp_path / "c")
    assert len(cache) == len(set(texts))
    assert conclude(texts, cache=cache).result() == expected
    assert path_conclusions([texts[:2], [], texts[2:5]]) == [expected[:2], [], expected[2:5]]


def test_cache_folder_follows_the_code_and_survives_bad_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    cache = ResultCache.named("x", ["analysis.structure.roles"], ["sacrebleu"])
    assert cache.directory == tmp_path / f"x-{fingerprint(['analysis.structure.roles'], ['sacrebleu'])}"
    assert fingerprint(["analysis.structure.roles"]) != fingerprint(["analysis.diversity.bleu"])
    cache.put("k", [1, "a"])
    cache.flush()
    assert cache.directory is not None
    (cache.directory / "shard-bad.json").write_text("{not json")
    assert ResultCache(cache.directory).get("k") == [1, "a"]
    for i in range(20):  # many shards are merged into one
        more = ResultCache(cache.directory)
        more.put(f"k{i}", i)
        more.flush()
    shards = list(cache.directory.glob("shard-*.json"))
    assert len(shards) <= 17 and ResultCache(cache.directory).get("k19") == 19
    assert json.loads(max(shards, key=lambda p: p.stat().st_size).read_text())["keys"]
    monkeypatch.setenv(CACHE_ENV, "off")
    assert ResultCache.named("x", ["analysis.structure.roles"]).directory is None
    assert hash_key("a", "b") != hash_key("ab") and hash_key("a", "b") != hash_key("b", "a")


def test_roles_cold_warm_and_plain_give_the_same_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    blocks = pd.DataFrame({"path_texts": [["Final Answer: 1/2", "so x = 0.5"], ["Final Answer: 3", "we get 4."],
                                          ["nothing", "Final Answer: 7"], []]})
    cold = roles_of(blocks)
    assert cold["role"].tolist() == ["verification", "exploration", "undetermined", "undetermined"]
    warm = roles_of(blocks)
    pd.testing.assert_frame_equal(cold, warm)
    pd.testing.assert_frame_equal(assign_roles(blocks), cold)  # the plain measure: the same table
    assert {p.name.split("-")[0] for p in tmp_path.iterdir()} == {"conclusions", "verdicts"}


def test_plain_integer_shortcut_agrees_with_math_verify() -> None:
    from pr1_eval.grading.grade import _PLAIN_INTEGER

    rng = random.Random(3)
    numbers = ["0", "1", "-1", "10", "100", "12", "-12", "999999999999", "999999999998", "7", "70", "1000"]
    numbers += [str(rng.randint(-10**6, 10**6)) for _ in range(20)]
    pairs = [(a, b) for a in numbers[:12] for b in numbers[:12]] + [(rng.choice(numbers), rng.choice(numbers))
                                                                     for _ in range(60)]
    assert all(_PLAIN_INTEGER.fullmatch(n) for n in numbers)
    for a, b in pairs:
        verdict = verify_pair(a, b)
        assert verdict.status == "ok" and verdict.correct == (a == b), (a, b)
    for not_plain in ("012", "-0", "1,000", "1000000000000", "+5", "5.0", " 5"):
        assert not _PLAIN_INTEGER.fullmatch(not_plain)


def _decimals(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        digits = rng.choice([0, 1, 2, 3, 6, 8])
        whole = str(rng.randint(0, 10 ** digits - 1)) if digits else "0"
        decimals = "".join(rng.choice("0123456789") for _ in range(rng.choice([0, 0, 1, 2, 3, 6])))
        out.append(("-" if rng.random() < 0.3 else "") + whole + ("." + decimals if decimals else ""))
    return out


def test_plain_decimal_shortcut_agrees_with_math_verify() -> None:
    """Every pair the shortcut decides gets math-verify's own verdict: random decimals, the same
    value spelled otherwise (``0.5``/``0.50``, ``12``/``12.0``, ``-0``/``0``), values 1e-6 apart,
    and the largest and smallest forms it accepts."""
    from decimal import Decimal

    from pr1_eval.grading.grade import known_without_check

    rng = random.Random(7)
    numbers = _decimals(rng, 300) + ["0", "-0", "0.0", "-0.0", "99999999.999999", "-99999999.999999", "0.000001",
                                     "12", "12.0", "12.000000", "0.5", "0.50", "0.500001", "1", "1.000001"]
    pairs = [(rng.choice(numbers), rng.choice(numbers)) for _ in range(1600)]
    for a in numbers[:150]:
        respelt = a + "0" if "." in a and len(a.split(".")[1]) < 6 else (a + ".0" if "." not in a else a)
        pairs += [(a, respelt), (respelt, a), (a, str(Decimal(a) + Decimal("0.000001")))]
    decided = 0
    for a, b in pairs:
        verdict = known_without_check(a, b)
        if verdict is None:  # e.g. str(Decimal) of a tiny value: "-1E-6" goes to math-verify
            continue
        decided += 1
        expected = verify_pair(a, b)
        assert expected.status == "ok" and expected.correct is verdict, (a, b, expected)
    assert decided >= 2000 and any(known_without_check(a, b) for a, b in pairs if a != b)


def test_shortcut_leaves_everything_else_to_math_verify() -> None:
    from pr1_eval.grading.grade import known_without_check

    others = ["\\frac{m}{n}  7", "x^2", "\\frac{1}{2}", "1/2", "1e5", ".5", "5.", "+5", "1,000", "00.5", "0.1234567",
              "123456789.5", "１２", "5%", "2 2", "7 3", " 5", "5 ", "π", "\\pi", "(1, 2)", "x = 5", "-", ""]
    for other in others:
        for number in ("12", "595", "0.5", "-3.25"):
            assert known_without_check(other, number) is None and known_without_check(number, other) is None
    assert known_without_check("12", "12") is True and known_without_check("595", "12") is False
