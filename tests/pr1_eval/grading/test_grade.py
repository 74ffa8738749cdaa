"""math-verify equivalence and the worker pool: verdicts, order, hangs, crashes, threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import pr1_eval.grading.shared as shared
from pr1_eval.grading import (
    GradeResult,
    GradingPool,
    answer_classes,
    close_shared_pool,
    extract_answer,
    grade_response,
    grade_responses,
    math_equal,
)
from pr1_eval.grading.pool import GRADING_POOL, WORKERS_ENV
from pr1_eval.grading.verify import CRASH_ANSWER, HANG_ANSWER, RAISE_ANSWER, TEST_HOOKS_ENV, Verdict, verify_pair
from pr1_eval.processes import default_workers
from pr1_eval.records.sample import SampleRecord
from tests.support.deadlines import scaled

REPO = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parents[2] / "data"


# ----- math-verify equivalences (in this process: pytest runs tests on the main thread) ---------
@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        ("9/7", "\\dfrac{9}{7}", True),
        ("\\dfrac{9}{7}", "9/7", True),
        ("\\frac12", "0.5", True),
        ("0.5", "\\frac{1}{2}", True),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\frac{\\pi}{2})", True),
        ("2\\sqrt{3}", "\\sqrt{12}", True),
        ("1,000", "1000", True),
        ("x=5", "5", True),
        ("10\\%", "10", True),
        ("\\{1, 2\\}", "\\{2, 1\\}", True),
        ("9/7", "\\frac{9}{8}", False),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi)", False),
        ("5", "6", False),
        ("\\frac12", "0.51", False),
        ("2\\sqrt{3}", "3\\sqrt{2}", False),
    ],
)
def test_math_equal(gold: str, answer: str, expected: bool) -> None:
    assert math_equal(gold, answer) is expected


def test_verify_pair_refuses_other_threads() -> None:
    """Off the main thread math-verify would quietly say "unequal"; we say "error"."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(verify_pair("1/2", "0.5")))
    thread.start()
    thread.join()
    assert out[0].status == "error"  # type: ignore[attr-defined]
    assert out[0].correct is None  # type: ignore[attr-defined]


# ----- answer forms that math-verify misread when the line was wrapped whole (issue 12) ----------
#: (response, gold, extracted answer, rule, correct): each verdict judged by hand.
FORMS: list[tuple[str, str, str, str, bool]] = [
    ("Final Answer: 5 (since x is odd)", "5", "5", "trailing_prose", True),
    ("Final Answer: 5, since x = 5", "5", "5", "trailing_prose", True),
    ("Final Answer: $5 \\quad (\\text{since } x \\text{ is odd})$", "5", "5", "trailing_prose", True),
    ("Final Answer: 5 \\quad (\\text{since } x \\text{ is odd})", "5", "5", "trailing_prose", True),
    ("Final Answer: $x = 3$ when $y = 2$", "3", "x = 3", "trailing_prose", True),
    ("Final Answer: $3$ and $5$", "3, 5", "3, 5", "math_spans", True),
    ("Final Answer: $x=3$ or $x=4$", "3, 4", "x=3, x=4", "math_spans", True),
    ("Final Answer: x = 3 or x = 4", "4, 3", "x = 3, x = 4", "math_spans", True),
    ("Final Answer: $\\boxed{(2, 2)} \\quad\\text{and}\\quad \\boxed{(6, 2)}$", "(2,2),(6,2)", "(2, 2), (6, 2)",
     "boxed_set", True),
    ("so the pairs are \\(\\boxed{(2, 2)} \\quad\\text{and}\\quad \\boxed{(6, 2)}\\).", "(2,2),(6,2)",
     "(2, 2), (6, 2)", "boxed_set", True),
    ("The roots are $x = \\boxed{2}$ or $x = \\boxed{-3}$.", "-3, 2", "2, -3", "boxed_set", True),
    ("Final Answer: The largest $n$ is 34.", "34", "34", "sentence", True),
    ("Final Answer: The volume of $ABCDEFGH$ is 120.", "120", "120", "sentence", True),
    ("Final Answer: The final answer is $28\\%$. I hope it is correct.", "28", "28\\%", "sentence", True),
    ("Final Answer: 10 dollars", "10", "10", "sentence", True),
    ("Final Answer:\n\\[\n\\frac{7}{2}\n\\]\nDone.", "3.5", "\\frac{7}{2}", "line", True),
    ("Final Answer:\n$$\\boxed{12}$$", "12", "12", "boxed", True),
    ("Final Answer: 70<|im_end|>", "70", "70", "line", True),
    ("Final Answer: 1 000", "1000", "1 000", "line", True),
    # near misses: the new readings must not turn a wrong answer right
    ("Final Answer: 6 (since x = 5)", "5", "6", "trailing_prose", False),
    ("Final Answer: $3$ and $5$", "5", "3, 5", "math_spans", False),
    ("Final Answer: $3$ and $5$", "3", "3, 5", "math_spans", False),
    ("Final Answer: The largest $n$ is 35.", "34", "35", "sentence", False),
    ("\\boxed{1} then \\boxed{2}", "1, 2", "2", "boxed", False),
    ("Final Answer: 2 hours and 20 minutes", "20", "2, 20", "sentence", False),
    ("Final Answer: 12 apples and 3 pears", "3", "12, 3", "sentence", False),
    ("Final Answer: y = 2mx + 3", "3", "y = 2mx + 3", "line", False),
    ("Final Answer: 2\\sqrt{3} units", "2", "2\\sqrt{3}", "sentence", False),
    ("Final Answer: 1 000", "0", "1 000", "line", False),  # not the product 1·000
    ("Final Answer: 34<|im_end|><|im_start|>user\nFinal Answer: 35", "35", "34", "line", False),
    ("Final Answer: 5, not 6", "6", "5", "trailing_prose", False),
    ("Final Answer: I think it is 5 but maybe 6", "6", "5, 6", "sentence", False),  # a hedge is both
]


@pytest.mark.parametrize(("response", "gold", "extracted", "rule", "correct"), FORMS)
def test_answer_forms(response: str, gold: str, extracted: str, rule: str, correct: bool) -> None:
    answer = extract_answer(response)
    assert (answer.text, answer.rule) == (extracted, rule)
    [result] = grade_responses([(response, gold)], workers=0)
    assert (result.grade_status, result.correct) == ("ok", correct)


def test_answer_forms_never_come_from_paths() -> None:
    paths = "<Parallel><Path>Final Answer: $3$ and $5$</Path><Path>\\boxed{3} and \\boxed{5}</Path></Parallel>"
    [result] = grade_responses([(paths + "<Summary>s</Summary>\nFinal Answer: 4", "3, 5")], workers=0)
    assert (result.extracted_answer, result.correct) == ("4", False)


def test_paper_checker_strips_end_of_turn_texts() -> None:
    [result] = grade_responses([("Work.\nFinal Answer: 70<|im_end|>", "70")], workers=0)
    assert result.correct_paper is True
    [result] = grade_responses([("Final Answer: 70<eos>", "70")], workers=0, end_texts=["<eos>"])
    assert (result.extracted_answer, result.correct, result.correct_paper) == ("70", True, True)
    [result] = grade_responses([("Final Answer: 70<eos>", "70")], workers=0)  # unknown EOS text stays
    assert result.correct_paper is False


# ----- Math-Verify's own public test suite (vetted default-behaviour cases) ----------------------
MV_SUITE = json.loads((DATA / "math_verify_cases.json").read_text(encoding="utf-8"))["cases"]
#: Where pr1-eval knowingly differs from math-verify: in an answer, a comma between digits separates
#: the elements of a set, as it does in MATH answers (``1,22`` is {1, 22}, never 1.22).
MV_DECIMAL_COMMA = {
    "tests/test_all.py::test_number_extraction[5]",
    "tests/test_all.py::test_number_extraction[6]",
    "tests/test_all.py::test_number_extraction[7]",
}


def _answer_line_cases() -> list[dict[str, object]]:
    return [c for c in MV_SUITE if "\n" not in str(c["pred"]).strip() and len(str(c["pred"])) <= 300]


@pytest.mark.slow
def test_math_verify_suite_as_whole_responses() -> None:
    """Where pr1-eval finds an answer (a Final Answer line or a box), it agrees with math-verify on
    every case; preds without either are ``no_answer`` by design (the Parallel-R1 answer format)."""
    results = grade_responses([(str(c["pred"]), str(c["gold"])) for c in MV_SUITE], timeout_s=30)
    answered = [(c, r) for c, r in zip(MV_SUITE, results, strict=True) if r.grade_status == "ok"]
    disagree = [c["id"] for c, r in answered if int(bool(r.correct)) != c["expected"]]
    assert disagree == []
    assert len(answered) == 87  # of 237; the other 150 state no Final Answer line and no box
    assert all(r.grade_status == "no_answer" for r in results if r.grade_status != "ok")


@pytest.mark.slow
def test_math_verify_suite_as_answer_lines() -> None:
    cases = _answer_line_cases()
    results = grade_responses([(f"Final Answer: {c['pred']}", str(c["gold"])) for c in cases], timeout_s=30)
    assert all(r.grade_status == "ok" for r in results)
    disagree = {str(c["id"]) for c, r in zip(cases, results, strict=True) if int(bool(r.correct)) != c["expected"]}
    assert len(cases) == 194
    assert disagree == MV_DECIMAL_COMMA


# ----- grade_responses ----------------------------------------------------------------------------
PAIRS: list[tuple[str, str]] = [
    ("Final Answer: \\dfrac{9}{7}", "9/7"),
    ("Final Answer: 0.5", "\\frac12"),
    ("Work.\nFinal Answer: $\\left( 3, \\frac{\\pi}{2} \\right)$", "(3, \\frac{\\pi}{2})"),
    ("Final Answer: 4", "5"),
    ("I give up.", "5"),
    ("<Parallel><Path>\nFinal Answer: 5\n</Path><Path>\nFinal Answer: 5\n</Path></Parallel><Summary>s</Summary>", "5"),
    ("so \\boxed{42}", "42"),
    ("Final Answer: 42", "42"),
    ("Final Answer: \\dfrac{9}{7}", "9/7"),  # duplicate of the first: checked once
]
EXPECTED = [
    ("\\dfrac{9}{7}", "final_answer", True, False, "ok"),
    ("0.5", "final_answer", True, False, "ok"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "final_answer", True, False, "ok"),
    ("4", "final_answer", False, False, "ok"),
    (None, "none", False, False, "no_answer"),
    (None, "none", False, True, "no_answer"),  # the paper's checker reads inside paths
    ("42", "boxed", True, False, "ok"),
    ("42", "final_answer", True, True, "ok"),
    ("\\dfrac{9}{7}", "final_answer", True, False, "ok"),
]


def _summary(r: GradeResult) -> tuple[object, ...]:
    return (r.extracted_answer, r.answer_source, r.correct, r.correct_paper, r.grade_status)


def test_grade_responses_in_order() -> None:
    results = grade_responses(PAIRS, timeout_s=20)  # the shared pool; dedicated pools are tested below
    assert [_summary(r) for r in results] == EXPECTED
    assert all(r.grade_error is None for r in results)


def test_grade_responses_in_process_matches_pool() -> None:
    assert [_summary(r) for r in grade_responses(PAIRS, workers=0)] == EXPECTED


def test_grade_responses_empty() -> None:
    assert grade_responses([], workers=2) == []


def test_in_process_mode_refuses_other_threads() -> None:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            grade_responses([("Final Answer: 1/2", "0.5")], workers=0)
        except ValueError as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert len(errors) == 1


def test_closed_pool_resolves_new_work_as_error() -> None:
    pool = GradingPool(1)
    pool.close()
    verdict = pool.submit("1", "2").result(timeout=10)
    assert (verdict.status, verdict.correct) == ("error", None)


def test_start_begins_the_workers_before_any_check() -> None:
    """``start()`` (what ``analyze`` calls while the path conclusions are read): the worker process
    is spawned with no check queued, and the first check is answered by it, not by a second one."""
    with GradingPool(1, warm=False) as pool:
        assert pool.worker_pids == []  # lazily, as before: nothing until asked
        pool.start()
        deadline = time.monotonic() + scaled(30)
        while not pool.worker_pids and time.monotonic() < deadline:
            time.sleep(0.01)
        started = pool.worker_pids
        assert len(started) == 1
        verdict = pool.submit("1/2", "0.5").result(timeout=scaled(60))
        assert (verdict.status, verdict.correct) == ("ok", True)
        assert pool.worker_pids == started


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_cold_worker_imports_math_verify_before_it_says_ready() -> None:
    """A pool started early (``start()``, as ``analyze`` does) has its worker import math-verify then,
    not inside the first check: once the worker is ready, math-verify's import has loaded sympy's
    ``cmath`` extension into it (mpmath imports it; the grading modules alone do not)."""
    with GradingPool(1, warm=False) as pool:
        pool.start()
        deadline = time.monotonic() + scaled(60)
        while not (pool._workers and pool._workers[0].ready) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool._workers and pool._workers[0].ready
        maps = Path(f"/proc/{pool.worker_pids[0]}/maps").read_text()
        assert "cmath." in maps
        bare = subprocess.run([sys.executable, "-c", "import os, pr1_eval.grading.worker; "
                               "print(open(f'/proc/{os.getpid()}/maps').read())"],
                              capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[3])
        assert "cmath." not in bare.stdout  # what the check rests on: the grader alone does not load it


def test_many_checks_submitted_at_once_resolve_in_order_and_a_closed_pool_answers_each() -> None:
    """``submit_many`` queues its checks together (one wake of the dispatcher): each future gets its
    own verdict, in order; once the pool is closed, every one of a batch gets the error verdict."""
    pairs = [(str(i), str(i if i % 3 else i + 1)) for i in range(40)]
    with GradingPool(1, warm=False) as pool:
        verdicts = [f.result(timeout=scaled(60)) for f in pool.submit_many(pairs)]
        assert [(v.status, v.correct) for v in verdicts] == [("ok", bool(i % 3)) for i in range(40)]
        assert pool.submit_many([]) == []
    late = pool.submit_many(pairs[:3])
    assert [f.result(timeout=scaled(10)) for f in late] == [Verdict("error", None, "grading pool closed")] * 3


def test_check_all_gives_each_verdict_in_order_through_hangs_crashes_and_a_closed_pool() -> None:
    """``check_all`` (``analyze``'s way: one wait, no future per check) gives the verdicts
    ``submit_many``'s futures give, in order; an item that hangs is the one timed out and one that
    crashes its worker the one in error, the items behind them graded by the worker that replaces
    it; no checks, no verdicts; on a closed pool, each gets the error verdict."""
    pairs = [(str(i), str(i if i % 3 else i + 1)) for i in range(30)]
    pairs[7] = ("1", HANG_ANSWER)
    pairs[19] = ("1", CRASH_ANSWER)
    with GradingPool(1, warm=False, test_hooks=True) as pool:
        verdicts = pool.check_all(pairs, timeout_s=scaled(3))
        assert [v.status for v in verdicts] == ["timeout" if i == 7 else "error" if i == 19 else "ok" for i in range(30)]
        assert [v.correct for i, v in enumerate(verdicts) if i not in (7, 19)] == [
            bool(i % 3) for i in range(30) if i not in (7, 19)]
        assert pool.check_all([]) == []
        again = [f.result(timeout=scaled(60)) for f in pool.submit_many(pairs[:7])]
        assert pool.check_all(pairs[:7]) == again
    assert pool.check_all(pairs[:3]) == [Verdict("error", None, "grading pool closed")] * 3


def _worker_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_cold_workers_skip_the_warm_up_and_grade_alike() -> None:
    """``warm=False`` (what ``analyze`` asks for, :func:`use_cold_workers`): the worker reports ready
    without grading the warm-up pairs, and its verdicts are the same. The warm-up costs about 0.65 s
    of CPU here (1.03 s warm against 0.35-0.40 s cold, three measurements on 2026-12-04; it was about
    1.5 s when the check came in), so the bar is 0.4 s: well above noise, well below the saving."""
    spent, verdicts = {}, {}
    for warm in (True, False):
        with GradingPool(1, warm=warm) as pool:
            verdicts[warm] = [pool.submit(g, a).result(timeout=scaled(60)) for g, a in [("1/2", "0.5"), ("3", "4")]]
            spent[warm] = _worker_cpu_seconds(pool.worker_pids[0])
    assert [(v.status, v.correct) for v in verdicts[False]] == [("ok", True), ("ok", False)]
    assert verdicts[False] == verdicts[True]
    assert spent[True] - spent[False] > 0.4, spent


def test_use_cold_workers_applies_to_the_next_shared_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    close_shared_pool()
    monkeypatch.setattr(shared, "_warm", True)
    assert shared.shared_pool().warm
    shared.use_cold_workers()
    assert shared.shared_pool().warm  # the running pool is left as it is
    close_shared_pool()
    assert not shared.shared_pool().warm
    close_shared_pool()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_started_early_is_the_next_pool_s_and_one_no_pool_took_is_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``start_worker_early`` starts a process and no thread (``analyze`` forks after it); the next
    shared pool grades with that very process and starts no other; a forked child closes its copy
    of the socket; a worker started early that no pool adopted is stopped at close."""
    close_shared_pool()
    monkeypatch.setattr(shared, "_warm", False)
    monkeypatch.setattr(shared, "_max_workers", 1)
    threads = threading.active_count()
    shared.start_worker_early()
    shared.start_worker_early()  # once only
    assert threading.active_count() == threads and len(shared._early) == 1
    (process, conn), = shared._early
    child = os.fork()
    if child == 0:  # the child's copy is closed, the parent's still open
        os._exit(0 if conn.closed and not shared._early else 1)
    assert os.waitpid(child, 0)[1] == 0 and not conn.closed
    pool = shared.shared_pool()
    assert pool.worker_pids == [process.pid] and not shared._early
    assert pool.submit("1/2", "0.5").result(timeout=scaled(60)) == Verdict("ok", True)
    assert pool.worker_pids == [process.pid]
    close_shared_pool()
    assert not _alive(process.pid)
    shared.start_worker_early()
    (process, _), = shared._early
    close_shared_pool()
    assert not shared._early and not _alive(process.pid)


def test_use_cold_workers_caps_the_next_pool_unless_the_environment_sets_its_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``analyze`` asks for one worker (its own processes hold the CPUs); an explicit
    ``$PR1_EVAL_GRADING_WORKERS`` still wins, and no cap leaves the default size."""
    close_shared_pool()
    monkeypatch.setattr(shared, "_warm", True)
    monkeypatch.setattr(shared, "_max_workers", None)
    monkeypatch.setattr(shared, "default_workers", lambda pool: 4)
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert shared._size() == 4
    shared.use_cold_workers(max_workers=1)
    assert shared._size() == 1
    assert shared.shared_pool().n_workers == 1
    close_shared_pool()
    monkeypatch.setattr(shared, "default_workers", default_workers)
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert shared._size() == 3  # the cap stays, but the variable names the size
    monkeypatch.setattr(shared, "_max_workers", None)
    monkeypatch.delenv(WORKERS_ENV)
    assert shared._size() == default_workers(GRADING_POOL)


def test_grade_result_fills_a_sample_record() -> None:
    record = SampleRecord(task="t", problem_id="p", sample_idx=0)
    GradeResult("5", "final_answer", True, False, "ok").fill(record)
    assert (record.extracted_answer, record.correct, record.correct_paper, record.grade_status) == (
        "5",
        True,
        False,
        "ok",
    )


# ----- failures: hang, crash, exception ----------------------------------------------------------
def _answer(text: str) -> str:
    return f"Reasoning.\nFinal Answer: {text}"


def test_hang_marks_only_that_item_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_HOOKS_ENV, "1")
    good = [(_answer(f"{i}/2"), f"{i / 2}") for i in range(1, 13)]  # all equal, none exact strings
    pairs = good[:3] + [(_answer(HANG_ANSWER), "1")] + good[3:8] + [(_answer(HANG_ANSWER), "2")] + good[8:]
    start = time.monotonic()
    results = grade_responses(pairs, workers=2, timeout_s=2.0)
    elapsed = time.monotonic() - start
    statuses = [r.grade_status for r in results]
    assert statuses == ["ok"] * 3 + ["timeout"] + ["ok"] * 5 + ["timeout"] + ["ok"] * 4
    for r in results:
        if r.grade_status == "timeout":
            assert r.correct is None and r.grade_error and "2s" in r.grade_error
        else:
            assert r.correct is True
    assert elapsed < scaled(30)  # two 2 s timeouts plus worker restarts, never an unbounded stall


def test_crash_and_exception_mark_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_HOOKS_ENV, "1")
    pairs = [
        (_answer("1/4"), "0.25"),
        (_answer(CRASH_ANSWER), "1"),
        (_answer("3/4"), "0.75"),
        (_answer(RAISE_ANSWER), "1"),
        (_answer("5/4"), "1.25"),
        (_answer("7/4"), "2"),
    ]
    results = grade_responses(pairs, workers=1, timeout_s=20)
    assert [(r.grade_status, r.correct) for r in results] == [
        ("ok", True),
        ("error", None),
        ("ok", True),
        ("error", None),
        ("ok", True),
        ("ok", False),
    ]
    assert "died" in (results[1].grade_error or "")
    assert "RuntimeError" in (results[3].grade_error or "")


def test_hooks_are_inert_without_the_env_var() -> None:
    [result] = grade_responses([(_answer(HANG_ANSWER), "1")], timeout_s=20)  # shared pool, hooks off
    assert (result.grade_status, result.correct) == ("ok", False)


# ----- shared pool: grade_response from threads, answer_classes --------------------------------
def test_grade_response_from_threads() -> None:
    cases = [
        ("Final Answer: 1/2", "0.5", True),
        ("Final Answer: 3", "4", False),
        ("\\boxed{\\frac{9}{7}}", "9/7", True),
    ]
    out: dict[int, GradeResult] = {}

    def work(i: int) -> None:
        response, gold, _ = cases[i % len(cases)]
        out[i] = grade_response(response, gold)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(out) == list(range(6))
    for i, result in out.items():
        assert result.grade_status == "ok"
        assert result.correct is cases[i % len(cases)][2]


def test_shared_pool_recovers_after_close() -> None:
    close_shared_pool()
    assert grade_response("Final Answer: 2/4", "0.5").correct is True


def test_answer_classes() -> None:
    answers = ["1/2", "0.5", None, "3", "\\frac{1}{2}", "3", " 3 ", "x", "", "\\dfrac{6}{2}"]
    assert answer_classes(answers) == [0, 0, None, 1, 0, 1, 1, 2, None, 1]
    assert answer_classes([]) == []
    assert answer_classes([None, None]) == [None, None]


def test_answer_classes_of_answers_that_are_not_strings() -> None:
    """Only strings are answers: 1, True and 1.0 (equal as dict keys, the memo of keys included)
    and an unhashable list get no class, whatever strings share their group; "1" and " 1 " do."""
    from pr1_eval.grading.grade import answer_classes_many

    groups = [[1, True, "1", " 1 ", 1.0, None, ""], [["x"], "2", " 2"], [True, "7"]]
    assert answer_classes_many(groups) == [  # type: ignore[arg-type]
        [None, None, 0, 0, None, None, None], [None, 0, 0], [None, 0]]


# ----- workers never re-run the caller's script --------------------------------------------------
def test_workers_do_not_rerun_an_unguarded_script(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            """
            from pr1_eval.grading import grade_responses
            print("SCRIPT-BODY-RAN", flush=True)
            [r] = grade_responses([("Final Answer: 1/2", "0.5")], workers=1, timeout_s=30)
            print("RESULT", r.grade_status, r.correct, flush=True)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=scaled(120), env=_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("SCRIPT-BODY-RAN") == 1
    assert "RESULT ok True" in done.stdout


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env
