"""What makes ``analyze`` cheap at sweep scale must change no number: the projected load
(``load_runs(columns=...)``), and the whole-analysis cache (:mod:`analysis.engine.outputs`), which
must miss as soon as any sample of any run changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import summary
from analysis.engine import outputs as output_cache
from analysis.leaderboard.board import build_leaderboard
from analysis.runs import loader
from analysis.runs.loader import RESPONSE_CHARS, load_runs
from analysis.summary import ANALYSIS_COLUMNS, analyze, to_json
from pr1_eval.cli.main import main
from pr1_eval.store.run_store import RunStore
from tests.support.analysis_fixtures import block, make_record, response, write_run


def _records(step: int, first_branches: bool = True) -> list:
    intro = " ".join(["w"] * step)
    first = response(intro, block(["so x = 4", "\\boxed{4}"]), "end") if first_branches else response(intro, "end")
    return [make_record("amc23", "p0", 0, first, correct=True),
            make_record("amc23", "p0", 1, response(intro, block(["so x = 4", "we get 5"]), "more", final="4"),
                        correct=True),
            make_record("amc23", "p1", 0, response("plain ü text"), correct=False),
            make_record("amc23", "p1", 1, response(intro, block(["a b c d e", "a b c f g", "x"])), correct=None)]


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for step in (10, 20):
        write_run(root, f"ck{step}", _records(step), model=f"/ck/e/global_step_{step}/hf")
    return root


def test_projected_load_gives_the_same_analysis_and_no_response_text(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", "off")
    root = _root(tmp_path)
    full = load_runs([root], tokenizer=None)
    slim = load_runs([root], tokenizer=None, columns=ANALYSIS_COLUMNS)
    assert "response" not in slim.samples and "problem" not in slim.samples
    assert slim.samples[RESPONSE_CHARS].tolist() == [len(r) for r in full.samples["response"]]
    assert slim.blocks.equals(full.blocks)
    assert to_json(analyze(slim)) == to_json(analyze(full))


def test_response_lengths_are_the_same_from_the_parse_and_from_the_read(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A first projected load takes each response's length from its parse, a second one (the
    sidecar cache holds the parse) from the store: the same column either way."""
    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "loader"))
    root = _root(tmp_path)
    expected = [len(r) for r in load_runs([root], tokenizer=None, cache=False).samples["response"]]
    first = load_runs([root], tokenizer=None, columns=ANALYSIS_COLUMNS)
    monkeypatch.setattr(loader, "parse_blocks", lambda samples: pytest.fail("the second load must not parse"))
    second = load_runs([root], tokenizer=None, columns=ANALYSIS_COLUMNS)
    for loaded in (first, second):
        assert loaded.samples[RESPONSE_CHARS].tolist() == expected
        assert loaded.samples[RESPONSE_CHARS].dtype == "int64"
    assert first.samples.equals(second.samples)


def test_projected_load_reads_the_right_responses_when_rows_are_dropped(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A problem run.json does not declare, stored between declared ones, is dropped: the projected
    parse then reads each kept sample's own response by its row in the store, not its new position."""
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    records = _records(10)
    stray = make_record("amc23", "p9", 0, response("x", block(["stray one", "stray two"]), "y"))
    declared = {"tasks": {"amc23": {"n_problems": 2, "problem_ids": ["p0", "p1"], "k": 2}}}
    root = tmp_path / "runs"
    write_run(root, "ck", [records[0], stray, *records[1:]], extra=declared)
    full = load_runs([root], tokenizer=None)
    slim = load_runs([root], tokenizer=None, columns=ANALYSIS_COLUMNS)
    assert slim.blocks.equals(full.blocks)
    texts = [text for paths in slim.blocks["path_texts"] for text in paths]
    assert texts == ["so x = 4", "\\boxed{4}", "so x = 4", "we get 5", "a b c d e", "a b c f g", "x"]


def _analyze(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    assert main(["analyze", str(root), "--json", "--no-embeddings", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_a_second_analysis_is_restored_whole_and_a_changed_sample_misses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "loader"))
    root = _root(tmp_path)
    first, _ = _analyze(root, tmp_path / "out1", capsys)
    calls: list[int] = []
    monkeypatch.setattr(output_cache, "store", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(summary, "analyze", lambda *a, **k: pytest.fail("a kept analysis was recomputed"))
    second, err = _analyze(root, tmp_path / "out2", capsys)
    assert second == first and not calls and "out2" in err
    names = sorted(p.name for p in (tmp_path / "out1").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "out2").iterdir()) and "blocks.parquet" in names
    for name in names:
        assert (tmp_path / "out1" / name).read_bytes() == (tmp_path / "out2" / name).read_bytes(), name
    monkeypatch.undo()

    # one sample of one run regraded (its part rewritten): a new key, and the new numbers
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "loader"))
    store = RunStore(root / "ck20")
    for part in store.part_paths():
        part.unlink()
    store.append(_records(20, first_branches=False))
    changed, _ = _analyze(root, tmp_path / "out3", capsys)
    ck20 = [r for r in changed["runs"] if r["run"] == "ck20"][0]
    assert [r["parallel_ratio"] for r in first["runs"]] == [0.75, 0.75] and ck20["parallel_ratio"] == 0.5
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", "off")
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    fresh, _ = _analyze(root, tmp_path / "out4", capsys)
    assert changed == fresh and ck20 == [r for r in fresh["runs"] if r["run"] == "ck20"][0]


def test_the_key_follows_files_options_and_the_model_folder(tmp_path: Path) -> None:
    root = _root(tmp_path)
    key = output_cache.inputs_key([str(root)], {"include_incomplete": False})
    assert key == output_cache.inputs_key([str(root)], {"include_incomplete": False})
    assert key != output_cache.inputs_key([str(root)], {"include_incomplete": True})
    assert key != output_cache.inputs_key([str(root / "ck10")], {"include_incomplete": False})
    (root / "ck10" / "run.json").write_text((root / "ck10" / "run.json").read_text() + " ")
    assert key != (key := output_cache.inputs_key([str(root)], {"include_incomplete": False}))
    model = tmp_path / "model"
    model.mkdir()
    info = json.loads((root / "ck10" / "run.json").read_text())
    info["model"]["path"] = str(model)
    (root / "ck10" / "run.json").write_text(json.dumps(info))
    key = output_cache.inputs_key([str(root)], {})
    (model / "tokenizer.json").write_text("{}")  # the run's tokenizer gives its token lengths
    assert key != output_cache.inputs_key([str(root)], {})
    key = output_cache.inputs_key([str(root)], {}, root / "out")
    (root / "out").mkdir()
    (root / "out" / "analysis.json").write_text("{}")  # what the analysis writes below its runs changes nothing
    assert key == output_cache.inputs_key([str(root)], {}, root / "out") != output_cache.inputs_key([str(root)], {})


@pytest.mark.parametrize("cache", ["off", "on"])
def test_a_load_without_blocks_gives_the_same_samples_and_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                cache: str) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", "off" if cache == "off" else str(tmp_path / "loader"))
    records = _records(5)
    records[0].n_blocks, records[0].block_rel_starts = 0, []  # stored structure disagrees with its text
    root = tmp_path / "runs"
    write_run(root, "a", records)
    full = load_runs([root], tokenizer=None)  # with the cache on: fills it, so the load below reads its footer
    lean = load_runs([root], tokenizer=None, columns=["correct", RESPONSE_CHARS], blocks=False)
    assert lean.blocks.empty and len(full.blocks) == 3
    assert lean.notes == full.notes and any("1 sample(s) whose stored block fields disagree" in n for n in lean.notes)
    assert lean.samples["correct"].tolist() == full.samples["correct"].tolist()


def test_the_leaderboard_s_lean_load_gives_the_document_of_a_full_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    root = tmp_path / "runs"
    for step in (10, 20):
        records = _records(step)
        for i, record in enumerate(records):  # every column the report reads holds a value
            record.engine_calls, record.critical_path_tokens, record.n_response_tokens = 1 + i, 10 * i + step, 40 + i
            record.answer_class, record.correct_paper = i % 2, bool(i % 2)
            record.finish_reason, record.grade_status = ("length", "no_answer") if i == 3 else ("stop", "ok")
        write_run(root, f"ck{step}", records, model=f"/ck/e/global_step_{step}/hf")
    lean = build_leaderboard([root])
    full = build_leaderboard(load_runs([root], tokenizer=None))
    assert lean == full and [row["name"] for row in lean["runs"]] == ["ck10", "ck20"]
    assert {cell["parallel_ratio"] for row in lean["runs"] for cell in row["tasks"].values()} == {0.75}
