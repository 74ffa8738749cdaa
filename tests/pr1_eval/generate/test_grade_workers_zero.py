"""``run --grade-workers 0`` (audit round six, M18): the help offers 0 ("grade in this process"), but
the run graded on its grader thread, where in-process grading cannot time a check, so every sample
was generated, then the run failed and stored nothing. Now the chunks are graded between
generations on the main thread: the run completes, and its verdicts equal a pooled run's."""

from __future__ import annotations

from pathlib import Path

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.runner import _grades_inline
from pr1_eval.grading.grade import grade_response
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.report.completeness import check_run
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model


def test_grade_workers_zero_completes_and_grades_like_the_grader(tmp_path: Path) -> None:
    out = tmp_path / "zero"
    assert main(["run", "--model", str(cached_tiny_model("trained")), "--tasks", "aime24", "-k", "2", "--limit", "2",
                 "--max-new-tokens", "8", "--engine", "hf", "--seed", "1", "--out", str(out),
                 "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "0"]) == 0
    frame = RunStore(out).read_frame()
    assert check_run(out).complete and len(frame) == 4
    expected = [bool(grade_response(r, g).correct) for r, g in zip(frame["response"], frame["gold"], strict=True)]
    assert frame["correct"].astype(bool).tolist() == expected


def test_grade_workers_zero_off_the_main_thread_is_refused_before_generating() -> None:
    import threading

    failure: list[BaseException] = []
    config = RunConfig(model="m", tasks=["aime24"], grade_workers=0)

    def call() -> None:
        try:
            _grades_inline(config)
        except Pr1EvalError as exc:
            failure.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert failure and "--grade-workers 1" in str(failure[0])
    assert _grades_inline(config) is True
    assert _grades_inline(RunConfig(model="m", tasks=["aime24"], grade_workers=2)) is False
