"""Grade responses: extraction and the paper's checker here, math-verify in worker processes.

The same functions serve the eval scorer and the RL reward, so their verdicts agree by
construction. Three shortcuts keep math-verify's work small without changing any verdict an
honest reading would give: an answer that equals the gold string exactly is correct without a
call; identical (gold, answer) pairs (common among k samples) are checked once; and an answer
far longer than any answer to its gold could be (:func:`too_long_to_check`: over
``max(500, 20 × len(gold))`` characters, degenerate output such as a line of ``{{{…``) is wrong
without a call, where math-verify would spend its whole budget and report a timeout that would
drop the sample from the scores.

Under the ``lenient`` policy a gold that states a set in words (``\\text{no solution}``, ``all
real numbers``) is read as that set (:func:`pr1_eval.grading.intervals.gold_in_words`), as that
policy reads an answer in the same words; the ``paper`` policy hands the gold over as it is.

A blank gold is no gold: there is nothing to compare an answer with, so the sample is *could not
score* (``grade_status='no_gold'``, ``correct`` and ``correct_paper`` None), never wrong. Every
report leaves such a problem out of its metrics and names it
(:mod:`pr1_eval.report.completeness`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, as_completed, wait
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from pr1_eval.grading.extract import ExtractedAnswer
from pr1_eval.grading.intervals import gold_in_words
from pr1_eval.grading.paper import paper_correct
from pr1_eval.grading.policy import DEFAULT_POLICY, check_policy, extract_by_policy
from pr1_eval.grading.pool import GradingPool
from pr1_eval.grading.shared import shared_pool
from pr1_eval.grading.verify import Verdict, inner_timeout, verify_pair
from pr1_eval.processes import check_worker_count

DEFAULT_TIMEOUT_S = 10.0
#: An answer longer than this many characters, and than ``_MAX_ANSWER_RATIO`` times its gold, is
#: wrong without a math-verify call (the longest gold of the packaged benchmarks has 53).
MAX_CHECKED_ANSWER_CHARS = 500
_MAX_ANSWER_RATIO = 20
#: :data:`pr1_eval.records.sample.NO_GOLD`, spelled out: grading workers import this package, and
#: the records module brings pyarrow, which they never need.
NO_GOLD = "no_gold"


@dataclass(frozen=True)
class GradeResult:
    """The grading fields of a ``SampleRecord`` for one response (same names, same meanings):
    ``correct`` is ``None`` exactly when math-verify could not score (``timeout``/``error``), or
    there was no gold to score against (``no_gold``, when ``correct_paper`` is ``None`` too)."""

    extracted_answer: str | None
    answer_source: str
    correct: bool | None
    correct_paper: bool | None
    grade_status: str
    grade_error: str | None = None

    def fill(self, record: Any) -> None:
        """Copy these fields onto ``record`` (a ``SampleRecord`` or anything with the fields)."""
        for name in ("extracted_answer", "answer_source", "correct", "correct_paper", "grade_status", "grade_error"):
            setattr(record, name, getattr(self, name))


@dataclass(frozen=True)
class _Prepared:
    """The caller-side part of grading one response."""

    extracted: ExtractedAnswer
    paper: bool | None
    key: tuple[str, str] | None  # (gold, answer) still to check with math-verify


def _prepare(response: str, gold: str, end_texts: tuple[str, ...] = (),
             policy: str = DEFAULT_POLICY) -> tuple[_Prepared, Verdict | None]:
    """Everything that runs in the caller: extraction (under the answer ``policy``,
    :mod:`pr1_eval.grading.policy`), paper checker, the exact-match shortcut."""
    gold = "" if gold is None else str(gold)
    extracted = extract_by_policy(response, policy, end_texts)
    if not gold.strip():
        return _Prepared(extracted, None, None), Verdict(NO_GOLD, None, "no gold answer to compare with")
    paper = paper_correct(response, gold, end_texts=end_texts)
    if extracted.text is None:
        return _Prepared(extracted, paper, None), Verdict("no_answer", False)
    if extracted.text.strip() == gold.strip() and gold.strip():
        return _Prepared(extracted, paper, None), Verdict("ok", True)
    if too_long_to_check(extracted.text, gold):
        return _Prepared(extracted, paper, None), Verdict("ok", False)
    if policy == "lenient":  # a set the gold states in words, read as the lenient reading reads answers
        gold = gold_in_words(gold)
    return _Prepared(extracted, paper, (gold, extracted.text)), None


def too_long_to_check(answer: str, gold: str) -> bool:
    """Whether ``answer`` is too long to be an answer to ``gold`` (see the module docstring)."""
    return len(answer) > max(MAX_CHECKED_ANSWER_CHARS, _MAX_ANSWER_RATIO * len(gold))


def _result(prepared: _Prepared, verdict: Verdict) -> GradeResult:
    """Join the caller-side part with the math-verify verdict."""
    return GradeResult(
        extracted_answer=prepared.extracted.text,
        answer_source=prepared.extracted.source,
        correct=verdict.correct,
        correct_paper=prepared.paper,
        grade_status=verdict.status,
        grade_error=verdict.error,
    )


def grade_responses(
    pairs: Sequence[tuple[str, str]],
    workers: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = False,
    end_texts: Sequence[str] = (),
    policy: str = DEFAULT_POLICY,
) -> list[GradeResult]:
    """Grade ``(response, gold)`` pairs; results in input order.

    ``workers=None`` uses the process-wide pool (no start-up cost after the first call);
    ``workers=N`` starts a dedicated pool of up to N processes for this call; ``workers=0``
    grades in this process, on the main thread only, without hang protection (for debugging
    and the benchmark). No item can take much longer than ``timeout_s`` of a worker's time.
    Each check is queued as soon as its response is extracted, so workers start (and grade)
    while the rest is still being extracted. ``end_texts`` adds end-of-turn texts (e.g. the
    tokenizer's EOS text) to :data:`~pr1_eval.grading.extract.END_OF_TURN_TEXTS`. ``policy`` is
    the answer policy (:data:`~pr1_eval.grading.policy.ANSWER_POLICIES`); the paper checker ignores it.
    """
    check_policy(policy, "answer policy")
    prepared: list[_Prepared] = []
    verdicts: list[Verdict | None] = []
    futures: dict[tuple[str, str], Future[Verdict]] = {}
    with _checker(workers) as checker:
        ends = tuple(end_texts)
        for response, gold in pairs:
            item, verdict = _prepare(response, gold, ends, policy)
            prepared.append(item)
            verdicts.append(verdict)
            if item.key is not None and item.key not in futures:
                futures[item.key] = checker.submit(item.key[0], item.key[1], timeout_s)
        checked = dict(zip(futures, _wait(list(futures.values()), progress), strict=True))
    results = []
    for item, verdict in zip(prepared, verdicts, strict=True):
        if verdict is None:
            assert item.key is not None
            verdict = checked[item.key]
        results.append(_result(item, verdict))
    return results


class _Checker(Protocol):
    """What grading needs from a pool: ``submit`` returning a future verdict."""

    def submit(self, gold: str, answer: str, timeout_s: float = ...) -> Future[Verdict]: ...


class _InProcess:
    """Checks at once on this thread: the ``workers=0`` stand-in for a pool."""

    def submit(self, gold: str, answer: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Future[Verdict]:
        future: Future[Verdict] = Future()
        future.set_result(verify_pair(gold, answer, inner_timeout(timeout_s)))
        return future


@contextmanager
def _checker(workers: int | None) -> Iterator[_Checker]:
    """The checker ``workers`` asks for (see :func:`grade_responses`)."""
    if workers == 0:
        if threading.current_thread() is not threading.main_thread():
            raise ValueError("workers=0 grades in-process and needs the main thread; use workers=None")
        yield _InProcess()
    elif workers is None:
        yield shared_pool()
    else:
        with GradingPool(check_worker_count(workers, "workers", "grading", zero="grades in this process")) as pool:
            yield pool


def _wait(futures: list[Future[Verdict]], progress: bool) -> list[Verdict]:
    """Results of ``futures`` in order, optionally with a progress bar as they complete.

    The bar's clock starts at the first answer: before it, the grading workers start (seconds),
    and a rate taken over that wait promised a 20-minute ETA for what took one second."""
    if progress and futures:
        from tqdm import tqdm

        with tqdm(total=len(futures), desc="grading (starting workers)", unit="answer") as bar:
            done = as_completed(futures)
            next(done)
            bar.reset()
            bar.initial = bar.n = bar.last_print_n = 1
            bar.set_description("grading")
            for _ in done:
                bar.update(1)
    else:  # one wake when the last is done, not one per future (20,000 thread switches in ``analyze``)
        wait(futures)
    return [f.result() for f in futures]


def grade_response(
    response: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S, end_texts: Sequence[str] = (),
    policy: str = DEFAULT_POLICY,
) -> GradeResult:
    """Grade one response through the process-wide pool; safe from any thread (VERL calls
    reward functions from a worker thread, where math-verify's own alarms cannot work)."""
    item, verdict = _prepare(response, gold, tuple(end_texts), check_policy(policy, "answer policy"))
    if verdict is None:
        assert item.key is not None
        verdict = shared_pool().submit(item.key[0], item.key[1], timeout_s).result()
    return _result(item, verdict)


def answer_classes(answers: Sequence[str | None], timeout_s: float = DEFAULT_TIMEOUT_S) -> list[int | None]:
    """Group answers into math-equivalence classes (for majority voting): class ids number the
    classes in order of first appearance; a missing answer gets ``None``.

    Identical strings share a class without a check. Then, round by round, the first answer
    not yet placed founds a class and every other unplaced answer is checked against it in
    parallel. A check that times out or fails counts as "not equal", so the worst a hard
    input can do is split a class, never merge two.
    """
    return answer_classes_many([answers], timeout_s)[0]


class VerdictStore(Protocol):
    """Known ``(gold, answer) -> equal`` verdicts (e.g. an on-disk cache) for :func:`answer_classes_many`."""

    def get(self, key: tuple[str, str], /) -> bool | None: ...

    def __setitem__(self, key: tuple[str, str], value: bool, /) -> None: ...


def answer_classes_many(
    groups: Sequence[Sequence[str | None]], timeout_s: float = DEFAULT_TIMEOUT_S, known: VerdictStore | None = None
) -> list[list[int | None]]:
    """:func:`answer_classes` of each group, with the same classes, in far fewer round trips.

    Why: grouping blocks one by one waits on the pool once per round of every group (the
    analysis of a sweep spent most of its time waiting). Here every group's round ``r`` is
    submitted at once and collected together, and a ``(head, other)`` pair that recurs in many
    groups (conclusions are gold-free, so ``"12"`` vs ``"13"`` recurs everywhere) is checked
    once. Each group still makes exactly the comparisons :func:`answer_classes` would, in the
    same order, so its classes are identical. ``known`` supplies verdicts already computed and
    receives the new ones (only successful checks: a timeout is not remembered).
    """
    kinds: dict[tuple[str | None, ...], int] = {}  # a group's classes depend on its keys alone: each kind once
    kind_of = [kinds.setdefault(key, len(kinds)) for key in _group_keys(groups)]
    classes = _classes_of_distinct(list(kinds), timeout_s, known)
    return [list(classes[kind]) for kind in kind_of]


def _answer_key(answer: str | None) -> str | None:
    """What an answer is compared as: stripped, ``None`` when missing or blank."""
    if not isinstance(answer, str):
        return None
    stripped = answer.strip()
    return stripped or None


class _KeyMemo(dict[Any, "str | None"]):
    """answer -> :func:`_answer_key` of it, each distinct answer worked out once (a sweep's 741,000
    answers are a few thousand distinct strings). Equal keys of different types (``1``, ``1.0``,
    ``True``) are all non-strings, whose key is ``None`` alike."""

    def __missing__(self, answer: Any) -> str | None:
        key = self[answer] = _answer_key(answer)
        return key


def _group_keys(groups: Sequence[Sequence[str | None]]) -> list[tuple[str | None, ...]]:
    """Each group's :func:`_answer_key` tuple (through :class:`_KeyMemo`; one by one where an answer
    cannot be a dict key)."""
    memo = _KeyMemo()
    try:
        return [tuple(map(memo.__getitem__, group)) for group in groups]
    except TypeError:  # an unhashable answer (never a string: its key is None)
        return [tuple(_answer_key(a) for a in group) for group in groups]


def _classes_of_distinct(groups: Sequence[tuple[str | None, ...]], timeout_s: float,
                         known: VerdictStore | None) -> list[list[int | None]]:
    """:func:`answer_classes_many` of groups of answer keys (:func:`_answer_key`)."""
    unplaced = [_distinct_answers(group) for group in groups]
    class_of: list[dict[str, int]] = [{} for _ in groups]
    n_classes = [0] * len(groups)
    active = [g for g, rest in enumerate(unplaced) if rest]
    while active:
        wanted = list(dict.fromkeys((unplaced[g][0], other) for g in active for other in unplaced[g][1:]))
        equal = _equal_verdicts(wanted, timeout_s, known)
        for g in active:
            head, rest = unplaced[g][0], unplaced[g][1:]
            class_of[g][head] = n_classes[g]
            unplaced[g] = []
            for other in rest:
                if equal[(head, other)]:
                    class_of[g][other] = n_classes[g]
                else:
                    unplaced[g].append(other)
            n_classes[g] += 1
        active = [g for g in active if unplaced[g]]
    # a key that is None (no answer) is no class's key: get gives it None
    return [list(map(classes.get, group)) for classes, group in zip(class_of, groups, strict=True)]  # type: ignore[arg-type]


def _distinct_answers(group: tuple[str | None, ...]) -> list[str]:
    """The group's answer keys, each once, in order of first appearance, ``None`` left out."""
    first = dict.fromkeys(group)
    first.pop(None, None)
    return list(first)  # type: ignore[arg-type]


#: An integer written plainly (no sign on zero, no leading zero, no separators, at most 12 digits):
#: two such strings are math-equal exactly when they are the same string, as math-verify parses
#: each to a sympy ``Integer`` and compares Integers exactly (checked against math-verify in
#: ``tests/analysis/test_fast_paths.py``), so these pairs skip the pool.
_PLAIN_INTEGER = re.compile(r"-?[1-9][0-9]{0,11}|0")
#: A plain decimal: optional ``-``, at most 8 integer digits (no leading zero), at most 6 decimals.
_PLAIN_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,7})(?:\.[0-9]{1,6})?")


def known_without_check(gold: str, answer: str) -> bool | None:
    """math-verify's verdict on ``(gold, answer)`` where it is decided without running it, else ``None``.

    Two plain integers (:data:`_PLAIN_INTEGER`): equal exactly when the strings are. Two plain
    decimals (:data:`_PLAIN_DECIMAL`, integers among them): equal exactly when their decimal
    values are (``0.5`` = ``0.50``, ``12`` = ``12.0``, ``0.5`` ≠ ``0.500001``). Why, from
    math-verify's source (``grader.py``): each parses (``$d$``, which :func:`~.verify.as_math`
    leaves alone: no space, comma or ``$``) to ``[Float(d) or Integer(d), "d"]``; ``verify`` tries
    every pairing, the string pairings succeeding only on identical strings and the
    string-expression ones never. For two numbers ``sympy_expr_eq`` reaches ``a == b``, then
    ``sympy_numeric_eq``, which with a Float compares ``a.round(6) == b.round(6)`` (else exact
    ``==``), then ``simplify(a - b).is_zero``. A decimal of at most 8 + 6 digits is held by a
    15-digit Float to well under ``0.5e-6``, so rounding to 6 places gives back its own value:
    equal values give equal Floats (every step true), unequal ones differ by at least ``1e-6``
    after rounding and in ``a - b`` (every step false). Checked against math-verify on thousands
    of generated pairs in ``tests/analysis/test_fast_paths.py``.
    """
    if _PLAIN_INTEGER.fullmatch(gold) and _PLAIN_INTEGER.fullmatch(answer):
        return gold == answer  # math-verify compares two Integers exactly
    if _PLAIN_DECIMAL.fullmatch(gold) and _PLAIN_DECIMAL.fullmatch(answer):
        return Decimal(gold) == Decimal(answer)
    return None


def _equal_verdicts(pairs: list[tuple[str, str]], timeout_s: float,
                    known: VerdictStore | None) -> dict[tuple[str, str], bool]:
    """Whether each ``(gold, answer)`` is math-equal (a failed check: not equal); all the
    unknown ones submitted to the shared pool at once."""
    out: dict[tuple[str, str], bool] = {}
    todo: list[tuple[str, str]] = []
    for pair in pairs:
        decided = known_without_check(*pair)
        if decided is not None:
            out[pair] = decided
            continue
        cached = known.get(pair) if known is not None else None
        if cached is None:
            todo.append(pair)
        else:
            out[pair] = bool(cached)
    if todo:
        verdicts = shared_pool().check_all(todo, timeout_s)
        for pair, verdict in zip(todo, verdicts, strict=True):
            ok = verdict.status == "ok"
            out[pair] = bool(ok and verdict.correct)
            if ok and known is not None:
                known[pair] = out[pair]
    return out
