"""A fork-join run's measured critical path (the machine's count over its own tokens) against the
parse of the stored text over re-tokenised offsets: the same number on well-formed blocks."""

from __future__ import annotations

from pathlib import Path

from pr1_eval.cli.main import main
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model


def test_the_parse_gives_the_machines_number_on_well_formed_blocks(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", "--model", str(cached_tiny_model("trained")), "--tasks", "gsm8k", "-k", "4", "--limit", "4",
                 "--max-new-tokens", "200", "--engine", "hf", "--decoding", "forkjoin", "--max-blocks", "2",
                 "--out", str(out), "--seed", "5", "--data-dir", str(packaged_benchmarks_dir()),
                 "--grade-workers", "1"]) == 0
    frame = RunStore(out).read_frame()
    assert set(frame["length_unit"]) == {"token"}
    formed = frame[frame["format_ok"] & (frame["n_blocks"] > 0)]
    assert len(formed) >= 4, "the trained model branches, so the comparison is not vacuous"
    assert (formed["losing_path_length"] > 0).any()  # sibling paths of different lengths were compared
    assert formed["critical_path"].tolist() == formed["critical_path_tokens"].tolist()
    assert formed["response_length"].tolist() == formed["n_response_tokens"].tolist()
