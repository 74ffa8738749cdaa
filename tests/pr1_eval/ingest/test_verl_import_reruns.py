"""``import-verl`` over time and on bad input: reruns import only new or changed steps, never a file
still being written, never a sample twice, never over a run that is not theirs; bad files get one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tests.support.verl_dump_fixtures as F
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.verl_formats import Lengths
from pr1_eval.ingest.verl_import import ImportOptions, import_verl
from pr1_eval.records.run import RunRecord
from pr1_eval.store.run_store import RunStore

OPTS = ImportOptions(lengths=Lengths(prompt=900, response=160), grade=False)
PROBLEMS = F.training_problems(2)


def _status(results: list) -> dict[int, str]:  # type: ignore[type-arg]
    return {r.file.step: r.status for r in results}


def _write(folder: Path, step: int, seed: int = 0) -> list[F.Truth]:
    return F.write_fork_step(folder, step, PROBLEMS, 3, validation=False, seed=seed)


def test_rerun_imports_only_new_and_changed_steps(tmp_path: Path) -> None:
    dumps, out = tmp_path / "job" / "rollout-log", tmp_path / "runs"
    _write(dumps, 1)
    _write(dumps, 2)
    assert _status(import_verl(dumps, out, OPTS)) == {1: "imported", 2: "waiting"}
    run1 = out / "train" / "step-000001"
    parts = RunStore(run1).part_paths()
    assert _status(import_verl(dumps, out, OPTS)) == {1: "unchanged", 2: "waiting"}
    assert RunStore(run1).part_paths() == parts and len(RunStore(run1).read_frame()) == 6  # nothing twice
    _write(dumps, 3)  # a later step lands: step 2 is complete now
    assert _status(import_verl(dumps, out, OPTS)) == {1: "unchanged", 2: "imported", 3: "waiting"}
    os.utime(dumps / "1.jsonl", ns=(1, 1))  # touched, same bytes: the sha256 says unchanged
    assert _status(import_verl(dumps, out, OPTS))[1] == "unchanged"
    other = F.training_problems(3)[1:]  # step 1 rewritten (a restarted job re-ran it on other prompts)
    new = F.write_fork_step(dumps, 1, other, 3, validation=False, seed=5)
    assert _status(import_verl(dumps, out, OPTS))[1] == "replaced"
    frame = RunStore(run1).read_frame()
    assert sorted(frame.response) == sorted(t.response for t in new) and frame.sample_idx.max() == 2
    assert set(frame.problem) == {p for p, _ in other}
    aside = list((tmp_path / "runs.superseded" / "train").glob("step-000001.replaced-*"))
    assert len(aside) == 1 and len(RunStore(aside[0]).read_frame()) == 6  # kept, outside the runs root


def test_the_newest_step_waits_and_a_cut_file_is_named_with_final(tmp_path: Path) -> None:
    dumps, out = tmp_path / "rollout-log", tmp_path / "runs"
    _write(dumps, 1)
    _write(dumps, 2)
    text = (dumps / "2.jsonl").read_text()
    (dumps / "2.jsonl").write_text(text[: len(text) - 400])  # the background writer is mid-line
    assert _status(import_verl(dumps, out, OPTS)) == {1: "imported", 2: "waiting"}
    assert not (out / "train" / "step-000002").exists()
    with pytest.raises(Pr1EvalError, match=r"2\.jsonl:6: not valid JSON .*cut short"):
        import_verl(dumps, out, ImportOptions(lengths=OPTS.lengths, grade=False, final=True))


def test_a_killed_import_is_redone_in_place(tmp_path: Path) -> None:
    dumps, out = tmp_path / "rollout-log", tmp_path / "runs"
    _write(dumps, 1)
    import_verl(dumps, out, ImportOptions(lengths=OPTS.lengths, grade=False, final=True))
    store = RunStore(out / "train" / "step-000001")
    store.write_run(RunRecord.from_dict({**store.read_run().to_dict(), "status": "importing"}))
    assert _status(import_verl(dumps, out, ImportOptions(lengths=OPTS.lengths, grade=False, final=True))) == {
        1: "imported"}
    assert store.read_run().status == "complete" and len(store.read_frame()) == 6
    assert not (tmp_path / "runs.superseded").exists()


def test_a_folder_holding_another_run_is_refused(tmp_path: Path) -> None:
    dumps, out = tmp_path / "rollout-log", tmp_path / "runs"
    _write(dumps, 1)
    RunStore(out / "train" / "step-000001").write_run(RunRecord(name="mine", status="complete"))
    with pytest.raises(Pr1EvalError, match="not an import of train step 1 of a VERL dump"):
        import_verl(dumps, out, ImportOptions(lengths=OPTS.lengths, grade=False, final=True))
    assert RunStore(out / "train" / "step-000001").read_run().name == "mine"


@pytest.mark.parametrize(("name", "lines", "message"), [
    ("3.jsonl", ['{"prompt": "x", "response": "y"}'], r"3\.jsonl:1: not a VERL generations dump \(no input, output"),
    ("latest.jsonl", ['{"input": "x"}'], r"latest\.jsonl: cannot read a step number from the file name"),
    ("3.jsonl", ['{"input": "x", "output": "y", "score": 1, "step": "three"}'],
     r"3\.jsonl:1: step 'three' is not a whole number"),
    ("3.jsonl", ['{"input": "x", "output": "y", "score": 1, "step": 3}',
                 '{"input": "x", "output": "y", "gts": "1", "score": 1, "step": 3}'],
     r"3\.jsonl:2: this row's fields .* are not those of the file's first row \(parallel-r1 format\)"),
    ("3.jsonl", ['{"input": "x", "output": "y", "score": 1, "step": 2.5}'], r"3\.jsonl:1: step 2\.5 is not a whole"),
    ("3.jsonl", ['[1, 2]'], r"3\.jsonl:1: expected a JSON object"),
])
def test_bad_input_is_one_clear_error(tmp_path: Path, name: str, lines: list[str], message: str) -> None:
    dumps = tmp_path / "rollout-log"
    dumps.mkdir()
    (dumps / name).write_text("\n".join(lines) + "\n")
    with pytest.raises(Pr1EvalError, match=message):
        import_verl(dumps, tmp_path / "runs", ImportOptions(grade=False, final=True, benchmarks=False))


def test_the_command_prints_a_summary_and_errors_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    dumps = tmp_path / "job" / "rollout-log"
    _write(dumps, 1)
    _write(dumps, 2)
    status = main(["import-verl", str(tmp_path / "job"), "--out", str(tmp_path / "runs"), "--no-grade",
                   "--max-prompt-length", "900", "--max-response-length", "160"])
    out = capsys.readouterr()
    assert status == 0
    table = out.out.splitlines()
    assert table[0].split() == ["kind", "status", "steps", "rows", "groups", "matched", "unmatched"]
    assert table[1].split() == ["train", "imported", "1", "6", "2", "0", "2"] and "step 2 waits" in out.out
    assert "1/2 steps" in out.err  # progress, off a terminal: a line per step
    (dumps / "2.jsonl").write_text(json.dumps({"input": 1}) + "\n")
    status = main(["import-verl", str(dumps), "--out", str(tmp_path / "runs"), "--final", "--no-grade"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err[-1].startswith("error: ") and "2.jsonl:1: not a VERL generations dump" in err[-1]
    assert "Traceback" not in "\n".join(err)


def test_a_file_that_changes_while_read_is_left_for_the_next_run(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import pr1_eval.ingest.verl_import as vi

    dumps, out = tmp_path / "rollout-log", tmp_path / "runs"
    _write(dumps, 1)
    read = vi.read_step

    def read_then_rewrite(path: Path, step: int, lengths: Lengths) -> object:
        parsed = read(path, step, lengths)
        with path.open("a") as handle:  # the writer appends while we read
            handle.write("\n")
        return parsed

    monkeypatch.setattr(vi, "read_step", read_then_rewrite)
    final = ImportOptions(lengths=OPTS.lengths, grade=False, final=True)
    assert _status(import_verl(dumps, out, final)) == {1: "changed-while-read"}
    assert not (out / "train" / "step-000001").exists()
    monkeypatch.setattr(vi, "read_step", read)
    assert _status(import_verl(dumps, out, final)) == {1: "imported"}


def test_dump_folders_are_told_apart_by_name_or_kind(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _write(job / "outputs", 1)
    with pytest.raises(Pr1EvalError, match="outputs: cannot tell whether it holds training rollouts or validation"):
        import_verl(job, tmp_path / "runs", ImportOptions(grade=False, final=True, benchmarks=False))
    results = import_verl(job / "outputs", tmp_path / "runs",
                          ImportOptions(lengths=OPTS.lengths, grade=False, final=True, kind="validation"))
    assert [(r.file.kind, r.status) for r in results] == [("validation", "imported")]
    assert (tmp_path / "runs" / "val" / "step-000001" / "run.json").is_file()
    run = RunStore(tmp_path / "runs" / "val" / "step-000001").read_run()
    assert run.training is not None and run.training.job == "job"  # the folder holding the dump folder


def test_problem_text_and_matching_rules() -> None:
    from pr1_eval.ingest.verl_formats import problem_text
    from pr1_eval.ingest.verl_match import KnownProblem, ProblemIndex, prompt_id

    with_specials = f"<|endoftext|><|im_start|>user\n{F.render('Find  x.')}<|im_end|>\n<|im_start|>assistant\n"
    without = f"user\n{F.render('Find  x.')}\nassistant\n"
    assert problem_text(with_specials) == problem_text(without) == "Find  x."
    index = ProblemIndex()
    whole = "Let ABC be a triangle with sides 3, 4 and 5 and let P be a point inside it.\n\nFind the area."
    index.add(whole, KnownProblem("t", "p1", "6"))
    index.add("Let ABC be a triangle with sides 3, 4 and 5 and let Q be elsewhere.", KnownProblem("t", "p2", "1"))
    cut = whole.split("\n\n")[0]  # the official preprocessing kept the text up to the first blank line
    assert index.match(cut) == KnownProblem("t", "p1", "6") and index.match(" ".join(whole.split())) is not None
    assert index.match("Let ABC be a triangle with sides 3, 4 and 5 and let") is None  # the start of both: no guess
    assert index.match("Find x.") is None and prompt_id("Find  x.") == prompt_id("Find x.") != prompt_id("Find y.")
