"""Block positions in one declared unit: tokens when a tokenizer is known, else characters.

Why: a generated run and an import of its very responses would otherwise disagree (token positions
against character positions) in one leaderboard column. So the unit is recorded in the
run (``run.json`` ``position_unit``) and in every sample; ``import --tokenizer DIR`` gives an
import the generated run's token positions; and tables, notes and figures name the unit and keep
runs in different units apart. Expected positions are counted here with the tokenizer itself
(tokens before ``<Parallel>``: the tags are single special tokens, so the prefix encodes alone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from analysis.leaderboard.board import build_leaderboard
from analysis.leaderboard.page import behaviour_figure
from analysis.leaderboard.tables import render, task_rows
from analysis.pipeline.figures import position_title
from analysis.runs.loader import load_runs
from analysis.summary import analyze
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.preflight import check_model
from pr1_eval.ingest.importer import import_jsonl
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.analysis_fixtures import block, make_record, response, write_run

TEXTS = [response("Let me think about this carefully first.", block(["two plus two", "four"]), "So", final="4"),
         response("Short.", block(["a", "b"]), "Then a long tail of reasoning words " * 5, final="4")]


def _write_import(path: Path, texts: list[str], task: str = "t") -> Path:
    rows = [{"task": task, "problem_id": f"p{i}", "sample_idx": 0, "response": text, "gold": "4"}
            for i, text in enumerate(texts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _tokens_before_block(tokenizer: object, text: str) -> tuple[int, int]:
    encode = tokenizer  # type: ignore[assignment]
    start = text.index("<Parallel>")
    before = len(encode(text[:start], add_special_tokens=False)["input_ids"])  # type: ignore[operator]
    return before, len(encode(text, add_special_tokens=False)["input_ids"])  # type: ignore[operator]


def test_an_import_with_a_tokenizer_stores_token_positions(tmp_path: Path) -> None:
    model = cached_tiny_model("random")
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    run = import_jsonl(_write_import(tmp_path / "in.jsonl", TEXTS), tmp_path / "tok", workers=1, tokenizer=model)
    store = RunStore(run)
    record = store.read_run()
    assert record.position_unit == "token" and record.engine["tokenizer"] == str(model.resolve())
    for sample in store.read_records():
        text = TEXTS[int(sample.problem_id[1:])]
        before, total = _tokens_before_block(tokenizer, text)
        assert sample.position_unit == "token" and sample.n_response_tokens == total
        assert sample.block_token_starts == [before] and sample.block_rel_starts == [pytest.approx(before / total)]


def test_an_import_without_a_tokenizer_says_characters(tmp_path: Path) -> None:
    run = import_jsonl(_write_import(tmp_path / "in.jsonl", TEXTS), tmp_path / "chars", workers=1)
    store = RunStore(run)
    assert store.read_run().position_unit == "char"
    assert json.loads((run / "run.json").read_text())["position_unit"] == "char"
    for sample in store.read_records():
        text = TEXTS[int(sample.problem_id[1:])]
        assert sample.position_unit == "char" and sample.block_token_starts is None
        assert sample.block_rel_starts == [pytest.approx(text.index("<Parallel>") / len(text))]


def test_a_bad_tokenizer_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match="--tokenizer .*not a folder"):
        import_jsonl(_write_import(tmp_path / "in.jsonl", TEXTS), tmp_path / "x", tokenizer=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(Pr1EvalError, match="--tokenizer .*has no tokenizer files"):
        import_jsonl(_write_import(tmp_path / "in.jsonl", TEXTS), tmp_path / "y", tokenizer=tmp_path / "empty")


def test_a_model_folder_without_tokenizer_files_is_refused_as_run_refuses_it(tmp_path: Path) -> None:
    """A model folder with config.json and weights but no tokenizer files: `run` refuses it, and so
    does `import --tokenizer` (it used to load an empty tokenizer from config.json and store 0-token
    responses with every block at position 0)."""
    folder = tmp_path / "weights-only"
    folder.mkdir()
    for item in cached_tiny_model("random").iterdir():
        if item.name in ("config.json", "model.safetensors", "generation_config.json"):
            (folder / item.name).symlink_to(item)
    with pytest.raises(Pr1EvalError) as refused_by_run:
        check_model(str(folder))
    source = _write_import(tmp_path / "in.jsonl", TEXTS)
    with pytest.raises(Pr1EvalError) as refused_by_import:
        import_jsonl(source, tmp_path / "x", workers=1, tokenizer=folder)
    assert str(refused_by_import.value) == str(refused_by_run.value).replace("model folder", "--tokenizer")
    assert "has no tokenizer files" in str(refused_by_import.value) and not (tmp_path / "x" / "run.json").exists()


def test_import_of_a_generated_runs_responses_reproduces_its_positions(tmp_path: Path) -> None:
    """The issue's case: identical responses, generated (tokens) and imported. With --tokenizer the
    import's first-block positions equal the generated run's exactly; without, they are characters
    and the leaderboard names both units and says they are not compared."""
    model = cached_tiny_model("trained")
    assert main(["run", "--model", str(model), "--tasks", "gsm8k", "-k", "2", "--limit", "3", "--max-new-tokens", "160",
                 "--engine", "hf", "--decoding", "forkjoin", "--out", str(tmp_path / "gen"), "--seed", "3",
                 "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1"]) == 0
    generated = RunStore(tmp_path / "gen")
    assert generated.read_run().position_unit == "token"
    samples = generated.read_records()
    assert any(s.n_blocks for s in samples)  # the trained tiny model branches: positions are exercised
    rows = [{"task": s.task, "problem_id": s.problem_id, "sample_idx": s.sample_idx, "response": s.response,
             "gold": s.gold} for s in samples]
    source = tmp_path / "gen.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["import", str(source), "--out", str(tmp_path / "imp_tok"), "--tokenizer", str(model),
                 "--grade-workers", "1"]) == 0
    assert main(["import", str(source), "--out", str(tmp_path / "imp_chr"), "--grade-workers", "1"]) == 0
    by_key = {s.key(): s for s in samples}
    for imported in RunStore(tmp_path / "imp_tok").read_records():
        assert imported.block_rel_starts == pytest.approx(by_key[imported.key()].block_rel_starts)
        assert imported.position_unit == "token"

    # the imports hold 3 of the packaged gsm8k problems (partial); the generated --limit run is not
    # benchmark-checked: rank the imports anyway, this test is about units
    same = build_leaderboard([tmp_path / "gen", tmp_path / "imp_tok"], intersect=True, include_incomplete=True)
    cells = [run["tasks"]["gsm8k"] for run in same["runs"]]
    assert cells[0]["first_block_rel_pos"] == pytest.approx(cells[1]["first_block_rel_pos"])
    assert {c["position_unit"] for c in cells} == {"token"}
    assert "first block rel. pos. (tokens)" in task_rows(same)[0]
    assert not any("one unit" in note for note in same["notes"])

    mixed = build_leaderboard([tmp_path / "gen", tmp_path / "imp_chr"], intersect=True, include_incomplete=True)
    assert {run["name"]: run["tasks"]["gsm8k"]["position_unit"] for run in mixed["runs"]} == {"gen": "token",
                                                                                               "imp_chr": "char"}
    positions = [run["tasks"]["gsm8k"]["first_block_rel_pos"] for run in mixed["runs"]]
    assert positions[0] != pytest.approx(positions[1])  # the same responses, another unit: another number
    note = next(n for n in mixed["notes"] if "not all in one unit" in n)
    assert "in tokens: gen / gsm8k" in note and "in characters: imp_chr / gsm8k" in note and "--tokenizer" in note
    shown = {row["run"].split(" ")[0]: row["first block rel. pos."] for row in task_rows(mixed)}  # name, then its mark
    assert shown["gen"].endswith("(tokens)") and shown["imp_chr"].endswith("(characters)")
    assert "not all in one unit" in render(mixed, "text")
    figure = behaviour_figure(mixed)
    assert "dotted, in characters / dashed, in tokens" in figure.layout.title.text
    drawn: dict[str, list[float]] = {}
    for trace in figure.data:
        drawn.setdefault(trace.name.split(" · ")[0], []).extend(y for y in trace.y if y is not None)
    by_name = {run["name"]: run["tasks"]["gsm8k"]["first_block_rel_pos"] for run in mixed["runs"]}
    assert drawn["first block position (tokens)"] == [by_name["gen"]]  # each unit its own line
    assert drawn["first block position (characters)"] == [by_name["imp_chr"]]


def test_analyze_tables_and_figure_titles_name_the_unit(tmp_path: Path) -> None:
    text = response("Intro words here.", block(["a", "b"]), "done")
    write_run(tmp_path, "tok", [make_record("t", "p0", 0, text, tokens=True)])
    write_run(tmp_path, "chr", [make_record("t", "p0", 0, text)])
    both = analyze(load_runs(tmp_path, tokenizer=None))
    assert dict(zip(both.runs["run"], both.runs["position_unit"], strict=True)) == {"tok": "token", "chr": "char"}
    assert position_title(both).endswith("units differ (characters, tokens), not comparable across runs")
    one = analyze(load_runs(tmp_path / "tok", tokenizer=None))
    assert position_title(one).endswith(", in tokens")
