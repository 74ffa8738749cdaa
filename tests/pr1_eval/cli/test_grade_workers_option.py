"""``--grade-workers`` is checked alike on every command that grades, and as
``$PR1_EVAL_GRADING_WORKERS`` is: a negative count or one past the limit is one line and exit 2
(the audit found ``-1`` and ``-3`` taken silently); 0 (grade in this process) is allowed."""

from __future__ import annotations

import os

import pytest

from pr1_eval.cli.main import build_parser

_COMMANDS = {
    "run": ["run", "--model", "m", "--tasks", "aime24", "--out", "o"],
    "sweep": ["sweep", "ckpts", "--tasks", "aime24", "--out", "o"],
    "import": ["import", "f.jsonl", "--out", "o"],
    "import-verl": ["import-verl", "dump", "--out", "o"],
    "regrade": ["regrade", "o"],
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@pytest.mark.parametrize("value", ["-1", "-3", "17", "99999"])
def test_a_count_out_of_range_is_one_line_and_exit_2(command: str, value: str, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the limit: max(16, 4 x 2) = 16
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*_COMMANDS[command], f"--grade-workers={value}"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument --grade-workers: got {value}: ask for 0 to 16 grading processes" in last


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_zero_and_the_limit_are_taken(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert build_parser().parse_args([*_COMMANDS[command], "--grade-workers", "0"]).grade_workers == 0
    assert build_parser().parse_args([*_COMMANDS[command], "--grade-workers", "16"]).grade_workers == 16
