"""``analyze``: registration, the exact --json shape, files written, failures and exit codes."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd
import pytest

import pr1_eval.grading.shared as grading_shared
from analysis import command
from analysis.diversity import paths as div
from analysis.pipeline import output, scheduled
from pr1_eval.cli.main import main
from tests.support.analysis_fixtures import block, embedding_model, make_record, response, write_run

RUN_KEYS = {"run", "task", "step", "n_samples", "parallel_ratio", "blocks_per_response", "paths_per_block",
            "first_block_rel_pos", "bleu_mean", "cosine_mean", "roles", "complete", "missing", "answer_policy"}


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for step, words in [(10, 2), (20, 20), (30, 60)]:
        intro = " ".join(["w"] * words)
        records = [make_record("amc23", "p0", 0, response(intro, block(["Final Answer: 4", "\\boxed{4}"]), "end"),
                               correct=True),
                   make_record("amc23", "p1", 0, response("plain"), correct=False)]
        write_run(root, f"ck{step}", records, model=f"/ck/e/global_step_{step}/hf")
    (root / "broken").mkdir()
    (root / "broken" / "run.json").write_text("[")
    return root


def test_register_adds_analyze_with_its_arguments() -> None:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["analyze", "a", "b", "--json", "--out", "o", "--embedding-model", "m", "--no-embeddings"])
    assert args.runs == ["a", "b"] and args.json and args.out == "o" and args.embedding_model == "m"
    assert args.no_embeddings and args.func is command.run_analyze  # parser and handler: one module
    defaults = parser.parse_args(["analyze", "a"])
    assert defaults.embedding_model == "all-MiniLM-L6-v2" and not defaults.no_embeddings


def test_json_shape_values_files_and_partial_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["analyze", str(_root(tmp_path)), "--json", "--out", str(out), "--no-embeddings"])
    captured = capsys.readouterr()
    assert code == 1  # one run could not be read
    assert "broken" in captured.err and "not valid JSON" in captured.err
    document = json.loads(captured.out)
    assert [r["run"] for r in document["runs"]] == ["ck10", "ck20", "ck30"]
    for row in document["runs"]:
        assert set(row) == RUN_KEYS and set(row["roles"]) == {"verification", "exploration", "undetermined"}
        assert row["complete"] is True and row["missing"] == ""
        assert row["n_samples"] == 2 and row["parallel_ratio"] == 0.5 and row["blocks_per_response"] == 0.5
        assert row["paths_per_block"] == 2.0 and row["cosine_mean"] is None
        assert row["roles"] == {"verification": 1.0, "exploration": 0.0, "undetermined": 0.0}
        assert row["bleu_mean"] == pytest.approx(div.symmetric_bleu("Final Answer: 4", "\\boxed{4}"))
    assert [r["step"] for r in document["runs"]] == [10, 20, 30]
    # 3 checkpoints in perfect order: exactly 2 of the 3! orderings are as extreme (scipy's t approximation says 0.0)
    assert document["drift"] == {"amc23": {"spearman_rho": pytest.approx(1.0), "p_value": pytest.approx(2 / 6),
                                           "p_method": "exact permutation (n! = 6)", "n_steps": 3,
                                           "position_unit": "char"}}
    assert [f["path"].endswith("broken") for f in document["failures"]] == [True]
    for name in ("runs", "blocks", "pairs", "responses", "drift_points", "drift_trends"):
        assert (out / f"{name}.parquet").is_file() and (out / f"{name}.csv").is_file()
    assert pd.read_parquet(out / "runs.parquet")["parallel_ratio"].tolist() == [0.5, 0.5, 0.5]
    blocks_csv = pd.read_csv(out / "blocks.csv")
    assert json.loads(blocks_csv["path_texts"].iloc[0]) == ["Final Answer: 4", "\\boxed{4}"]
    from plotly.offline import get_plotlyjs

    assert (out / "plotly.min.js").read_text(encoding="utf-8") == get_plotlyjs()  # one shared copy, offline
    for name in ("parallel_ratio", "block_position", "role_shares", "bleu_hist"):
        html = (out / f"{name}.html").read_text()
        assert "<html>" in html and "Plotly.newPlot" in html and 'src="http' not in html
        assert '<script charset="utf-8" src="plotly.min.js"></script>' in html and len(html) < 100_000  # not inlined
        assert re.search(r"<title>[^<]+ — pr1-eval analyze</title>", html), name
    bleu = (out / "bleu_hist.html").read_text()
    assert all(f"e · step {step} (mean" in bleu for step in (10, 20, 30))  # model and step, not the run folder
    assert "&lt;Parallel&gt;" in (out / "block_position.html").read_text()
    assert not (out / "cosine_hist.html").exists()
    assert any("cosine_hist.html not written" in n for n in document["notes"])
    assert json.loads((out / "analysis.json").read_text()) == document


def test_tables_printed_and_embeddings_used(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_EMBED_CACHE", str(tmp_path / "cache"))
    model = embedding_model()  # loaded once per session, before the loader is swapped for it
    monkeypatch.setattr(scheduled, "load_embedding_model", lambda name, device=None: model)
    run = write_run(tmp_path, "one", [make_record("t", "p0", 0, response(block(["two plus two", "2 + 2"])))])
    assert main(["analyze", str(run), "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "== Structure (per run × task) ==" in printed and "== Path diversity and block roles ==" in printed
    assert "single sample" in printed and "no checkpoint step" in printed
    runs = pd.read_parquet(tmp_path / "o" / "runs.parquet")
    assert 0.0 < runs["cosine_mean"].iloc[0] <= 1.0
    assert list((tmp_path / "cache" / "all-MiniLM-L6-v2").glob("shard-*.npz"))


def test_nothing_loadable_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "error: no run could be loaded" in err


def test_bad_inputs_give_nulls_and_notes_never_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "runs"
    write_run(root, "no_blocks", [make_record("t", "p0", 0, response("plain")), make_record("t", "p1", 0, "")])
    write_run(root, "empty_paths", [make_record("t", "p0", 0, response(block(["", " "]))),
                                    make_record("t", "p1", 0, response("x"))])
    write_run(root, "one_path", [make_record("t", "p0", 0, "<Parallel>\n<Path>\nonly\n</Path>\n</Parallel>\n"),
                                 make_record("t", "p1", 0, response("x"))])
    write_run(root, "single", [make_record("t", "p0", 0, response(block(["a b", "c d"])))], step=5)
    assert main(["analyze", str(root), "--json", "--out", str(tmp_path / "o"), "--no-embeddings"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {r["run"]: r for r in document["runs"]}
    nulls = {"paths_per_block": None, "first_block_rel_pos": None, "bleu_mean": None, "cosine_mean": None,
             "roles": {"verification": None, "exploration": None, "undetermined": None}}
    assert {k: rows["no_blocks"][k] for k in nulls} == nulls and rows["no_blocks"]["parallel_ratio"] == 0.0
    assert rows["empty_paths"]["bleu_mean"] is None and rows["empty_paths"]["paths_per_block"] == 2.0
    assert rows["one_path"]["paths_per_block"] == 1.0 and rows["one_path"]["bleu_mean"] is None
    assert rows["single"]["n_samples"] == 1 and rows["single"]["step"] == 5
    assert document["drift"] == {"t": {"spearman_rho": None, "p_value": None, "p_method": None, "n_steps": 1,
                                       "position_unit": "char"}}
    def note(start: str) -> str:
        found = [n for n in document["notes"] if n.startswith(start)]
        assert len(found) == 1, (start, document["notes"])  # each sentence once, with where it applies
        return found[0]

    assert "(no_blocks: t)" in note("no parallel blocks")
    assert note("no checkpoint step").endswith("(empty_paths: t; no_blocks: t; one_path: t)")  # not "single"
    assert "(empty_paths: t)" in note("1 path pair(s) with an empty path")
    assert not any(n.startswith("2 path pair(s)") for n in document["notes"])
    assert note("no block has two paths:").endswith("(one_path: t)")
    assert "single: t" in note("single sample")
    assert "at least 3" in note("drift / block_rel_pos") and note("drift / block_rel_pos").endswith("(tasks t)")


def test_group_notes_says_each_sentence_once() -> None:
    notes = ["a: no tokenizer available: lengths are null", "b: no tokenizer available: lengths are null",
             "a / t1: x; y", "a / t2: x", "b / t1: x; z", "b / t2: x", "drift t1 / m: few steps", "drift t2 / m: few steps",
             "cosine_hist.html not written: no data for it"]
    assert output.group_notes(notes, 4, runs=["a", "b"]) == [
        "x (every run and task)", "y (a: t1)", "z (b: t1)", "no tokenizer available: lengths are null (every run)",
        "drift / m: few steps (tasks t1, t2)", "cosine_hist.html not written: no data for it"]
    assert output.group_notes(["a / t1: y", "b / t1: y"], 4, runs=["a", "b"]) == ["y (every run: t1)"]
    assert output.group_notes(["a: only here"], 1, runs=["a", "b"]) == ["a: only here"]


def test_runs_are_labelled_by_model_and_step() -> None:
    from analysis.pipeline.figures import model_name, run_labels

    assert model_name("/ckpt/exp-a/global_step_200/actor/huggingface") == "exp-a"
    assert model_name("/ckpt/exp-a/global_step_*/hf") == "exp-a"
    assert model_name("/tmp/demo/tiny-model/") == "tiny-model"
    assert model_name("Qwen/Qwen3-4B-Base") == "Qwen/Qwen3-4B-Base" and model_name(None) == "unknown model"
    runs = pd.DataFrame({"run": ["r1", "r1", "r2", "r3", "r4", "r5"], "task": ["t", "u", "t", "t", "t", "t"],
                         "model": ["/c/j/global_step_5/hf", "/c/j/global_step_5/hf", "/m/x", "/m/x", "/n/y", "/p/y"],
                         "step": [5, 5, None, None, None, None],
                         "decoding": ["sequential", "sequential", "sequential", "forkjoin", "sequential", "sequential"]})
    assert run_labels(runs) == {"r1": "j · step 5", "r2": "x · sequential", "r3": "x · forkjoin", "r4": "y (r4)",
                                "r5": "y (r5)"}


def test_analyze_starts_its_grading_workers_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``analyze`` asks for one grading worker without the warm-up (see ``analysis.pipeline.early_grading.use_cold_grading_workers``)."""
    monkeypatch.setattr(grading_shared, "_warm", True)
    monkeypatch.setattr(grading_shared, "_max_workers", None)
    assert main(["analyze", str(_root(tmp_path)), "--json", "--out", str(tmp_path / "o"), "--no-embeddings"]) == 1
    assert grading_shared._warm is False
    assert grading_shared._max_workers == 1


def test_analyze_runs_without_the_cyclic_collector_and_restores_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The analysis itself runs with automatic collection off (``analysis.engine.collector``); the caller's
    collector is on again afterwards, even when the analysis raises."""
    import gc

    seen: list[bool] = []
    real = command._analyze_with

    def spy(*args: object) -> object:
        seen.append(gc.isenabled())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(command, "_analyze_with", spy)
    root = _root(tmp_path)
    assert gc.isenabled()
    assert main(["analyze", str(root), "--json", "--out", str(tmp_path / "o"), "--no-embeddings"]) == 1
    assert seen == [False] and gc.isenabled()

    def fail(*args: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(command, "_analyze_with", fail)
    monkeypatch.setenv("PR1_EVAL_TRACEBACK", "1")  # the traceback itself, not its one line
    with pytest.raises(RuntimeError):
        main(["analyze", str(root), "--out", str(tmp_path / "o2"), "--embedding-model", "none"])
    assert gc.isenabled()


def test_collector_off_keeps_a_disabled_collector_disabled() -> None:
    import gc

    from analysis.engine.collector import collector_off

    gc.disable()
    try:
        with collector_off():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
