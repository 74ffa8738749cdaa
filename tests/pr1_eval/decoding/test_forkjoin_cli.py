"""``pr1-eval run --decoding forkjoin --max-blocks N [--after-last-block …]`` on the trained tiny model:
no stored sample holds more blocks than the cap, the cap and the after-last-block rule are in
``run.json``, and a rerun with another rule is refused instead of mixing two protocols in one run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model


def _run(out: Path, *extra: str) -> int:
    return main(["run", "--model", str(cached_tiny_model("trained")), "--tasks", "gsm8k", "-k", "4", "--limit", "3",
                 "--max-new-tokens", "160", "--engine", "hf", "--decoding", "forkjoin", "--out", str(out), "--seed", "3",
                 "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1", *extra])


@pytest.mark.parametrize("cap", [1, 2])
def test_no_sample_has_more_blocks_than_the_cap(tmp_path: Path, cap: int) -> None:
    assert _run(tmp_path / "run", "--max-blocks", str(cap)) == 0
    store = RunStore(tmp_path / "run")
    frame = store.read_frame()
    assert len(frame) == 12 and int(frame["n_blocks"].max()) <= cap
    assert (frame["n_blocks"] > 0).any()  # the model branches, so the cap is exercised, not vacuous
    record = store.read_run()
    assert record.decoding["max_blocks"] == cap and record.decoding["after_last_block"] == "end"
    at_cap = frame[frame["n_blocks"] == cap]
    # a response that used every allowed block ends right after that block (the paper's rollout) or at the budget
    assert set(at_cap["finish_reason"]) <= {"block_limit", "length"}


def test_after_last_block_is_recorded_and_part_of_the_run_identity(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path / "run", "--max-blocks", "1", "--after-last-block", "continue") == 0
    record = RunStore(tmp_path / "run").read_run()
    assert record.decoding["after_last_block"] == "continue" and record.config is not None
    assert "after_last_block" not in record.config  # one home: the decoding section
    assert "block_limit" not in set(RunStore(tmp_path / "run").read_frame()["finish_reason"])
    capsys.readouterr()
    assert _run(tmp_path / "run", "--max-blocks", "1") == 2  # the default rule is another protocol
    assert "different settings (decoding)" in capsys.readouterr().err


def test_path_options_are_recorded_with_the_official_defaults(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Paths at temperature 1.0, capped at 4096, a second EOS kept: the official rollout, in run.json;
    the options change it, are recorded, and a rerun with the defaults is another protocol."""
    assert _run(tmp_path / "run", "--max-blocks", "1", "--temperature", "0.7", "--path-temperature", "run",
                "--max-path-tokens", "6", "--secondary-eos", "replace") == 0
    record = RunStore(tmp_path / "run").read_run()
    decoding = record.decoding
    assert (decoding["path_temperature"], decoding["max_path_tokens"], decoding["secondary_eos"]) == ("run", 6, "replace")
    assert record.config is not None and not {"path_temperature", "temperature", "k"} & set(record.config)
    capsys.readouterr()
    assert _run(tmp_path / "run", "--max-blocks", "1", "--temperature", "0.7") == 2
    assert "different settings (decoding)" in capsys.readouterr().err
    assert _run(tmp_path / "default", "--max-blocks", "1") == 0
    default = RunStore(tmp_path / "default").read_run().decoding
    assert (default["path_temperature"], default["max_path_tokens"], default["secondary_eos"]) == (1.0, 4096, "keep")
