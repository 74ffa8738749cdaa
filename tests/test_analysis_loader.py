"""The one loader: declared columns, hand-counted block rows, broken runs reported not fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fixtures import block, make_record, response, write_run

from analysis.drift import model_family, resolve_step
from analysis.loader import BLOCK_COLUMN_DOCS, BLOCK_COLUMNS, SAMPLE_COLUMN_DOCS, SAMPLE_COLUMNS, load_runs
from pr1_eval.store import RunStore

TWO_BLOCKS = response("Let x be the count.", block(["x = 3 so \\boxed{7}", "Other way:\nFinal Answer: 7"], "Both 7."),
                      "Now double check.", block(["one", "two", "three"], "Three ways."), final="7")


def test_columns_are_declared_and_documented(tmp_path: Path) -> None:
    write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS)])
    loaded = load_runs(tmp_path, tokenizer=None)
    assert tuple(loaded.samples.columns) == SAMPLE_COLUMNS
    assert tuple(loaded.blocks.columns) == BLOCK_COLUMNS
    assert all(SAMPLE_COLUMN_DOCS[c] for c in SAMPLE_COLUMNS) and all(BLOCK_COLUMN_DOCS[c] for c in BLOCK_COLUMNS)


def test_block_rows_match_hand_counts(tmp_path: Path) -> None:
    write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS)], step=40, decoding="structured")
    loaded = load_runs(tmp_path / "a", tokenizer=lambda text: len(text.split()))
    blocks = loaded.blocks
    assert len(blocks) == 2 and list(blocks["block_idx"]) == [0, 1]
    first, second = blocks.iloc[0], blocks.iloc[1]
    start0 = TWO_BLOCKS.index("<Parallel>")
    start1 = TWO_BLOCKS.index("<Parallel>", start0 + 1)
    assert (first.char_start, second.char_start) == (start0, start1)
    assert first.char_end == TWO_BLOCKS.index("</Parallel>") + len("</Parallel>")
    assert first.rel_start == pytest.approx(start0 / len(TWO_BLOCKS)) and first.position_unit == "char"
    assert first.path_texts == ["x = 3 so \\boxed{7}", "Other way:\nFinal Answer: 7"]
    assert first.path_char_lengths == [18, 26]
    assert first.path_token_lengths == [5, 5]
    assert first.summary_char_length == len("Both 7.") and first.summary_token_length == 2
    assert first.path_answers == ["7", "7"] and first.path_answer_sources == ["boxed", "final_answer"]
    assert second.n_paths == 3 and second.path_answers == [None, None, None]
    assert first.token_start is None and first.step == 40 and first.decoding == "structured"


def test_token_positions_come_from_the_store(tmp_path: Path) -> None:
    text = response("a b c", block(["p q", "r s"]), "d", final="5")
    write_run(tmp_path, "a", [make_record("t", "p0", 0, text, tokens=True)])
    blocks = load_runs(tmp_path, tokenizer=None).blocks
    words = text.split()
    assert blocks.iloc[0].token_start == words.index("<Parallel>") == 3
    assert blocks.iloc[0].token_end == words.index("</Parallel>") + 1
    assert blocks.iloc[0].rel_start == pytest.approx(3 / len(words)) and blocks.iloc[0].position_unit == "token"
    assert blocks.iloc[0].path_token_lengths is None


def test_broken_runs_are_reported_and_the_others_load(tmp_path: Path) -> None:
    good = write_run(tmp_path, "good", [make_record("t", "p0", 0, TWO_BLOCKS), make_record("t", "p1", 0, "plain")])
    bad_json = tmp_path / "bad_json"
    bad_json.mkdir()
    (bad_json / "run.json").write_text("{not json")
    bad_part = write_run(tmp_path, "bad_part", [make_record("t", "p0", 0, "x")])
    next((bad_part / "samples.parquet").glob("part-*.parquet")).write_bytes(b"garbage")
    orphan = tmp_path / "orphan" / "samples.parquet"
    orphan.mkdir(parents=True)
    write_run(tmp_path, "empty", [])
    loaded = load_runs([tmp_path, tmp_path / "missing"], tokenizer=None)
    assert set(loaded.samples["run"]) == {"good"} and len(loaded.samples) == 2
    assert set(loaded.samples["run_path"]) == {str(good)}
    reasons = {Path(path).name: reason for path, reason in loaded.failures}
    assert set(reasons) == {"bad_json", "bad_part", "orphan", "empty", "missing"}
    assert "not valid JSON" in reasons["bad_json"]
    assert "unreadable parquet" in reasons["bad_part"]
    assert "no run.json" in reasons["orphan"]
    assert "no samples" in reasons["empty"]
    assert reasons["missing"] == "does not exist"


def test_nothing_to_load_gives_empty_frames_with_columns(tmp_path: Path) -> None:
    loaded = load_runs([tmp_path])
    assert loaded.samples.empty and tuple(loaded.samples.columns) == SAMPLE_COLUMNS
    assert loaded.blocks.empty and tuple(loaded.blocks.columns) == BLOCK_COLUMNS
    assert loaded.failures == [(str(tmp_path), "no run found: no run.json in it or below it")]


def test_same_name_runs_are_kept_apart(tmp_path: Path) -> None:
    one = write_run(tmp_path / "x", "run", [make_record("t", "p0", 0, TWO_BLOCKS)])
    two = write_run(tmp_path / "y", "run", [make_record("t", "p0", 0, TWO_BLOCKS)])
    loaded = load_runs(tmp_path, tokenizer=None)
    assert set(loaded.samples["run"]) == {str(one), str(two)}
    assert set(loaded.blocks["run"]) == {str(one), str(two)} and len(loaded.blocks) == 4


def test_stored_structure_disagreeing_with_text_is_reparsed_with_a_note(tmp_path: Path) -> None:
    record = make_record("t", "p0", 0, TWO_BLOCKS)
    record.n_blocks, record.block_rel_starts = 0, []
    write_run(tmp_path, "a", [record])
    loaded = load_runs(tmp_path, tokenizer=None)
    assert len(loaded.blocks) == 2 and loaded.blocks.iloc[0].position_unit == "char"
    assert any("disagree" in note for note in loaded.notes)


@pytest.mark.parametrize(("run_json", "path", "expected"), [
    ({"model": {"path": "/ck/exp/global_step_200/actor", "step": 100}}, "/runs/r", 100),
    ({"model": {"path": "/ck/exp/global_step_200/actor", "step": None}}, "/runs/r", 200),
    ({"model": {"path": "org/model"}}, "/runs/exp-global_step_300", 300),
    ({"model": {"path": "org/model"}}, "/runs/r", None),
    ({}, "/runs/r", None),
])
def test_step_resolution(run_json: dict, path: str, expected: int | None) -> None:
    assert resolve_step(run_json, path) == expected


def test_model_family_wildcards_the_step() -> None:
    a = model_family({"model": {"path": "/ck/exp/global_step_100/hf"}}, "r1")
    b = model_family({"model": {"path": "/ck/exp/global_step_900/hf"}}, "r2")
    assert a == b == "/ck/exp/global_step_*/hf"
    assert model_family({"model": {"path": "x", "family": "fam"}}, "r") == "fam"
    assert model_family({}, "run-global_step_5") == "run-global_step_*"


def test_loader_reads_what_the_store_wrote(tmp_path: Path) -> None:
    run = write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS, correct=True)], step=7)
    info = json.loads((run / "run.json").read_text())
    frame = load_runs(run, tokenizer=None).samples
    stored = RunStore(run).read_frame()
    assert frame.iloc[0]["response"] == stored.iloc[0]["response"] and bool(frame.iloc[0]["correct"]) is True
    assert frame.iloc[0]["paths_per_block"] == [2, 3] and frame.iloc[0]["model"] == info["model"]["path"]
