"""``analyze`` keeps each input's analysis: the default folder is named by its inputs, and a folder
holding another input's analysis is refused without ``--force`` (the newcomer's ``analyze runs/``
was silently replaced by the demo's ``analyze pr1-demo/run``, both in ``./pr1-analysis``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.pipeline.output_folder import MARKER, check_replace, default_out, folder_name
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from tests.support.analysis_fixtures import make_record, response, write_run


@pytest.mark.parametrize(("runs", "name"), [
    (["runs/"], "runs"),
    (["pr1-demo/run"], "pr1-demo-run"),
    (["runs/step100", "runs/step200"], "runs-step100+runs-step200"),
    (["./runs"], "runs"),
    (["runs/a b"], "runs-a_b"),
])
def test_the_folder_is_named_by_its_inputs(runs: list[str], name: str) -> None:
    assert folder_name(runs) == name
    assert default_out(runs) == Path("pr1-analysis") / name


def test_outside_inputs_and_long_lists_get_short_distinct_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert folder_name(["."]) == tmp_path.name
    assert folder_name(["/data/jobs/qwen/runs"]) == "qwen-runs"  # an absolute path: its last two parts
    many = [f"runs/checkpoint_number_{i}" for i in range(20)]
    name, other = folder_name(many), folder_name(many[:-1] + ["runs/checkpoint_number_99"])
    assert len(name) <= 60 and len(other) <= 60 and name != other


def test_a_second_input_gets_its_own_folder_and_a_taken_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        write_run(tmp_path / "runs", name, [make_record("t", "p", 0, response("plain"), correct=True)])
    assert main(["analyze", "runs/a", "--no-embeddings"]) == 0
    assert main(["analyze", "runs/b", "--no-embeddings"]) == 0
    first, second = tmp_path / "pr1-analysis" / "runs-a", tmp_path / "pr1-analysis" / "runs-b"
    assert (first / "analysis.json").is_file() and (second / "analysis.json").is_file()
    assert json.loads((first / MARKER).read_text())["inputs"] == [str((tmp_path / "runs" / "a").resolve())]
    capsys.readouterr()
    before = (first / "analysis.json").read_bytes()
    assert main(["analyze", "runs/b", "--no-embeddings", "--out", str(first)]) == 2
    error = capsys.readouterr().err
    assert f"{first} holds the analysis of {(tmp_path / 'runs' / 'a').resolve()}" in error and "--force" in error
    assert (first / "analysis.json").read_bytes() == before  # nothing replaced
    assert main(["analyze", "runs/a", "--no-embeddings"]) == 0  # the same input: replaced, as a rerun should
    assert main(["analyze", "runs/b", "--no-embeddings", "--out", str(first), "--force"]) == 0
    assert json.loads((first / MARKER).read_text())["inputs"] == [str((tmp_path / "runs" / "b").resolve())]


def test_an_unmarked_analysis_is_kept_too(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "analysis.json").write_text("{}")
    with pytest.raises(Pr1EvalError, match="holds an analysis of unknown inputs"):
        check_replace(old, ["runs"], force=False)
    check_replace(old, ["runs"], force=True)
    check_replace(tmp_path / "empty", ["runs"], force=False)  # nothing there: nothing to keep
