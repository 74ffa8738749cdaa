"""Damaged run records and dumps, and numeric values out of range: one clear line each (issue 48:
N10, N15).

Before the fix: a ``run.json`` that is not UTF-8 gave ``UnicodeDecodeError`` in ``report``, one
nested 100,000 deep ``RecursionError`` in ``report`` and ``analyze``, an ``import-verl`` line
nested as deep ``RecursionError``; ``run --batch-size 0`` failed after the model loaded, and
``--seed -1``, ``--seed 2**70``, ``--problems-per-chunk 0`` and a ``PR1_EVAL_PROGRESS_SECONDS``
of ``abc``, ``-1`` or ``0`` were taken without a word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from tests.support.analysis_fixtures import make_record, write_run

DEEP = b"[" * 100_000 + b"]" * 100_000


def _error_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return [line for line in err.splitlines() if "error:" in line or line.startswith("warning: run not loaded")]


@pytest.mark.parametrize(("damage", "words"), [
    (lambda text: b"\x93\xffrandom\x00bytes", ["not UTF-8 text", "0x93"]),
    (lambda text: text[:-2] + b"\xff}", ["not UTF-8 text", "0xff"]),
    (lambda text: DEEP, ["nested too deeply"]),
], ids=["random bytes", "one 0xff byte", "nested 100,000 deep"])
@pytest.mark.parametrize("command", [["report", "{run}"], ["analyze", "{run}", "--no-embeddings", "--out", "{out}"],
                                     ["leaderboard", "{run}"]])
def test_a_damaged_run_json_is_one_line_in_every_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, damage: object,
                                                          words: list[str], command: list[str]) -> None:
    monkeypatch.setenv("PR1_CACHE", "off")
    run = write_run(tmp_path, "r", [make_record("t", "p", 0, "Final Answer: 5", correct=True)])
    record = run / "run.json"
    record.write_bytes(damage(record.read_bytes()))  # type: ignore[operator]
    status = main([a.format(run=run, out=tmp_path / "o") for a in command])
    lines = _error_lines(capsys)
    assert status in (1, 2) and 1 <= len(lines) <= 2, lines  # analyze: the run not loaded, then "no run"
    assert str(record) in lines[0] and all(w in lines[0] for w in words), lines[0]


def test_an_import_verl_line_nested_too_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "rollout"
    dump.mkdir()
    row = {"input": "Problem: 1+1?", "output": "Final Answer: 2", "score": 1.0, "step": 5}
    (dump / "5.jsonl").write_bytes(json.dumps(row).encode() + b"\n" + DEEP + b"\n")
    assert main(["import-verl", str(dump), "--out", str(tmp_path / "runs"), "--final", "--no-benchmarks",
                 "--no-grade"]) == 2
    lines = _error_lines(capsys)
    assert lines == [f"error: {dump / '5.jsonl'}:2: not valid JSON (nested too deeply to read); " + lines[0].split("; ", 1)[1]]


BAD_VALUES = [
    ["run", "--batch-size", "0"], ["run", "--batch-size", "-2"], ["run", "--problems-per-chunk", "0"],
    ["run", "--seed", "-1"], ["run", "--seed", str(2**70)], ["run", "--seed", "1.5"], ["run", "--step", "-1"],
    ["run", "--step", str(10**20)], ["run", "--tensor-parallel-size", "0"], ["run", "--max-model-len", "0"],
    ["run", "--gpu-memory-utilization", "0"], ["run", "--gpu-memory-utilization", "1.5"],
    ["run", "--gpu-memory-utilization", "nan"], ["run", "--gpus-per-replica", "-1"], ["run", "--replicas", "0"],
    ["sweep", "--every", "0"], ["sweep", "--last", "-3"], ["tiny-model", "--seed", "-1"],
    ["import-verl", "--max-prompt-length", "0"], ["import-verl", "--max-response-length", "-5"],
    ["import-verl", "--follow", "0"], ["import-verl", "--follow", "inf"],
]


@pytest.mark.parametrize("argv", BAD_VALUES, ids=[" ".join(a) for a in BAD_VALUES])
def test_a_numeric_option_out_of_range_is_refused_while_parsing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                argv: list[str]) -> None:
    command, option, value = argv
    base = {"run": ["--model", "m", "--tasks", "aime24", "--out", str(tmp_path / "r")],
            "sweep": [str(tmp_path), "--tasks", "aime24"], "tiny-model": [str(tmp_path / "tiny")],
            "import-verl": [str(tmp_path), "--out", str(tmp_path / "v")]}[command]
    with pytest.raises(SystemExit) as exit_info:
        main([command, *base, option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and value in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_numeric_options_in_range_are_taken() -> None:
    from pr1_eval.cli.main import build_parser

    args = build_parser().parse_args(["run", "--model", "m", "--tasks", "aime24", "--seed", str(2**63 - 1),
                                      "--batch-size", "1", "--problems-per-chunk", "1", "--gpu-memory-utilization", "1"])
    assert (args.seed, args.batch_size, args.problems_per_chunk, args.gpu_memory_utilization) == (2**63 - 1, 1, 1, 1.0)
    assert build_parser().parse_args(["run", "--model", "m", "--tasks", "aime24", "--seed", "0"]).seed == 0


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf"])
def test_a_bad_progress_interval_is_refused_before_the_model_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PR1_EVAL_PROGRESS_SECONDS", value)
    assert main(["run", "--model", str(tmp_path / "no-model"), "--tasks", "aime24", "--limit", "1", "-k", "1",
                 "--out", str(tmp_path / "r")]) == 2
    lines = _error_lines(capsys)
    assert lines == [f"error: PR1_EVAL_PROGRESS_SECONDS={value!r}: expected a number of seconds above 0 between "
                     "progress lines (e.g. 30); set it to one, or unset it for the default"]


def test_a_good_progress_interval_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.generate.progress import LOG_EVERY_S, RunProgress

    monkeypatch.setenv("PR1_EVAL_PROGRESS_SECONDS", "2.5")
    assert RunProgress(1, tty=False).every == 2.5
    monkeypatch.delenv("PR1_EVAL_PROGRESS_SECONDS")
    assert RunProgress(1, tty=False).every == LOG_EVERY_S
