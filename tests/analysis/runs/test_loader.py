"""The one loader: declared columns, hand-counted block rows, broken runs reported not fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.runs.loader import (
    BLOCK_COLUMN_DOCS,
    BLOCK_COLUMNS,
    SAMPLE_COLUMN_DOCS,
    SAMPLE_COLUMNS,
    load_runs,
)
from analysis.runs.trace import TraceSegment, response_segments
from analysis.structure.drift import model_family, resolve_step
from pr1_eval.records.run import RunRecord
from pr1_eval.store.run_store import RunStore
from tests.support.analysis_fixtures import block, make_record, response, write_run

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
    assert "path_answers" not in first  # what a path concludes has one rule: analysis.structure.conclusions
    assert second.n_paths == 3 and second.path_texts == ["one", "two", "three"]
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
    assert "part-00000.parquet" in reasons["bad_part"]  # the reason names the broken part
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
    assert one != two  # named by the part of their paths that differs, never by absolute paths
    assert set(loaded.samples["run"]) == {"run (x)", "run (y)"}
    assert set(loaded.blocks["run"]) == {"run (x)", "run (y)"} and len(loaded.blocks) == 4


def test_same_name_runs_with_undeclared_samples_are_kept_apart(tmp_path: Path) -> None:
    """The undeclared samples are dropped before the names are made unique (the parse starts as
    each run is read): the kept samples and their blocks still carry the unique name."""
    declared = {"tasks": {"t": {"n_problems": 1, "problem_ids": ["p0"], "k": 1}}}
    records = [make_record("t", "p0", 0, TWO_BLOCKS), make_record("t", "p9", 0, TWO_BLOCKS)]
    one = write_run(tmp_path / "x", "run", records, extra=declared)
    two = write_run(tmp_path / "y", "run", records[:1])
    loaded = load_runs(tmp_path, tokenizer=None)
    assert sorted(loaded.samples["run"]) == ["run (x)", "run (y)"] and one != two
    assert sorted(loaded.blocks["run"]) == ["run (x)"] * 2 + ["run (y)"] * 2
    assert any(note.startswith("run (x): 1 sample(s) of 1 problem(s)") for note in loaded.notes)


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
    assert resolve_step(RunRecord.from_dict(run_json), path) == expected


def test_model_family_wildcards_the_step() -> None:
    a = model_family(RunRecord.from_dict({"model": {"path": "/ck/exp/global_step_100/hf"}}), "r1")
    b = model_family(RunRecord.from_dict({"model": {"path": "/ck/exp/global_step_900/hf"}}), "r2")
    assert a == b == "/ck/exp/global_step_*/hf"
    assert model_family(RunRecord.from_dict({"model": {"path": "x", "family": "fam"}}), "r") == "fam"
    assert model_family(RunRecord.from_dict({}), "run-global_step_5") == "run-global_step_*"


def test_loader_reads_what_the_store_wrote(tmp_path: Path) -> None:
    run = write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS, correct=True)], step=7)
    info = json.loads((run / "run.json").read_text())
    frame = load_runs(run, tokenizer=None).samples
    stored = RunStore(run).read_frame()
    assert frame.iloc[0]["response"] == stored.iloc[0]["response"] and bool(frame.iloc[0]["correct"]) is True
    assert frame.iloc[0]["paths_per_block"] == [2, 3] and frame.iloc[0]["model"] == info["model"]["path"]


def test_sidecar_cache_gives_the_same_frames_without_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import analysis.runs.loader

    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))
    records = [make_record("t", "p0", 0, TWO_BLOCKS, tokens=True), make_record("t", "p1", 0, "plain"),
               make_record("t", "p2", 0, response("a", block(["x", "y"]), final=None))]
    write_run(tmp_path / "runs", "a", records)
    counter = lambda text: len(text.split())  # noqa: E731
    fresh = load_runs(tmp_path / "runs", tokenizer=counter, cache=False)
    first = load_runs(tmp_path / "runs", tokenizer=counter)
    assert len(list((tmp_path / "cache").glob("*.parquet"))) == 1

    def no_parse(*args: object) -> None:
        raise AssertionError("the cached run was parsed again")

    monkeypatch.setattr(analysis.runs.loader, "parse_blocks", no_parse)
    second = load_runs(tmp_path / "runs", tokenizer=counter)
    for frame in (first.blocks, second.blocks):
        pd.testing.assert_frame_equal(frame, fresh.blocks)
    assert second.blocks.iloc[0].path_texts == ["x = 3 so \\boxed{7}", "Other way:\nFinal Answer: 7"]
    assert second.blocks.iloc[1].n_paths == 3
    assert second.blocks.iloc[0].token_start == TWO_BLOCKS.split().index("<Parallel>") == 5


def test_sidecar_cache_follows_a_changed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))
    declared = {"tasks": {"t": {"n_problems": 2, "problem_ids": ["p0", "p1"], "k": 1}}}  # p1 comes later
    run = write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS)], extra=declared)
    assert len(load_runs(run, tokenizer=None).blocks) == 2
    RunStore(run).append([make_record("t", "p1", 0, response(block(["u", "v"])))])
    assert len(load_runs(run, tokenizer=None).blocks) == 3
    assert len(list((tmp_path / "cache").glob("*.parquet"))) == 1  # the stale entry was dropped


def test_sidecar_cache_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    load_runs(write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS)]), tokenizer=None)
    assert not (tmp_path / "home").exists()


def test_response_segments_split_like_the_blocks_frame(tmp_path: Path) -> None:
    write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS)])
    blocks = load_runs(tmp_path, tokenizer=None).blocks
    segments = response_segments(TWO_BLOCKS)
    assert [s.kind for s in segments] == ["main", "block", "main", "block", "main"]
    assert [s.text for s in segments if s.kind == "main"] == ["Let x be the count.", "Now double check.", "Final Answer: 7"]
    assert [list(s.paths) for s in segments if s.kind == "block"] == list(blocks["path_texts"])
    assert [s.summary for s in segments if s.kind == "block"] == ["Both 7.", "Three ways."]
    assert segments[1].start == TWO_BLOCKS.index("<Parallel>")
    assert TWO_BLOCKS[segments[1].end - len("</Summary>"):segments[1].end] == "</Summary>"
    assert response_segments("no tags at all") == [TraceSegment("main", 0, 14, text="no tags at all")]


def test_progress_is_reported_and_run_json_kept(tmp_path: Path) -> None:
    write_run(tmp_path, "a", [make_record("t", "p0", 0, TWO_BLOCKS)], step=3)
    write_run(tmp_path, "b", [make_record("t", "p0", 0, TWO_BLOCKS)])
    seen: list[tuple[int, int]] = []
    loaded = load_runs(tmp_path, tokenizer=None, progress=lambda done, total, what: seen.append((done, total)))
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert loaded.run_info["a"].model.step == 3 and set(loaded.run_info) == {"a", "b"}


@pytest.mark.parametrize("tokens", [False, True])
def test_a_load_without_blocks_holds_the_samples_frame_of_one_with_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         tokens: bool) -> None:
    """A load without blocks does not read the columns only the parse reads (token positions), and
    gives the very samples frame, dtypes and notes of the same projected load with blocks."""
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    records = [make_record("t", "p0", 0, TWO_BLOCKS, tokens=tokens), make_record("t", "p0", 1, "no block", tokens=tokens),
               make_record("t", "p1", 0, TWO_BLOCKS, tokens=tokens, correct=True)]
    write_run(tmp_path, "a", records)
    columns = ["correct", "n_blocks", "block_rel_starts", "position_unit"]
    lean = load_runs(tmp_path, tokenizer=None, columns=columns, blocks=False)
    with_blocks = load_runs(tmp_path, tokenizer=None, columns=columns)
    pd.testing.assert_frame_equal(lean.samples, with_blocks.samples)
    assert lean.notes == with_blocks.notes and len(with_blocks.blocks) == 4 and lean.blocks.empty
    asked = load_runs(tmp_path, tokenizer=None, columns=[*columns, "block_token_starts"], blocks=False)
    assert asked.samples["block_token_starts"].tolist() == with_blocks.samples.assign(
        s=[r.block_token_starts for r in records])["s"].tolist()
