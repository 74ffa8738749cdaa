"""math-verify equivalence and the worker pool: verdicts, order, hangs, crashes, threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pr1_eval.grading import (
    GradeResult,
    GradingPool,
    answer_classes,
    close_shared_pool,
    grade_response,
    grade_responses,
    math_equal,
)
from pr1_eval.grading.verify import CRASH_ANSWER, HANG_ANSWER, RAISE_ANSWER, TEST_HOOKS_ENV, verify_pair
from pr1_eval.records import SampleRecord

REPO = Path(__file__).resolve().parents[1]


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
    assert elapsed < 30  # two 2 s timeouts plus worker restarts, never an unbounded stall


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
        [sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=120, env=_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("SCRIPT-BODY-RAN") == 1
    assert "RESULT ok True" in done.stdout


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env
