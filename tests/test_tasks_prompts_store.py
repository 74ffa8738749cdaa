"""Task loading, prompt rendering and the run store's durability rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.prompts import apply_chat, load_template
from pr1_eval.records import SAMPLE_COLUMNS, SampleRecord
from pr1_eval.store import RunStore
from pr1_eval.tasks import TASKS, load_task, parse_task_list

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BENCH = SHARED / "benchmarks"
EXPECTED_ROWS = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 500, "math300_pr1": 316, "gsm8k": 1319}


def test_every_task_loads_with_the_documented_row_count() -> None:
    for name, rows in EXPECTED_ROWS.items():
        loaded = load_task(name, BENCH)
        assert len(loaded.problems) == rows, name
        assert len({p.problem_id for p in loaded.problems}) == rows
    assert load_task("aime24", BENCH).problems[0].gold == "204"
    assert load_task("aime25", BENCH).problems[0].gold == "70"


def test_math300_uses_the_math_answer_for_base_subscripts() -> None:
    golds = {p.problem_id: p.gold for p in load_task("math300_pr1", BENCH).problems}
    assert golds["test/number_theory/864.json"] == "52_8"


def test_hash_changes_with_limit_and_is_stable() -> None:
    full, again, two = load_task("amc23", BENCH), load_task("amc23", BENCH), load_task("amc23", BENCH, limit=2)
    assert full.data_hash == again.data_hash != two.data_hash and len(two.problems) == 2


def test_unknown_task_lists_known_ones() -> None:
    with pytest.raises(Pr1EvalError) as err:
        parse_task_list("aime24,aime26")
    assert "aime26" in str(err.value) and all(name in str(err.value) for name in TASKS)


def test_malformed_row_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "aime24.jsonl").write_text('{"id": "a", "problem": "p", "answer": "1"}\n{"id": "b", "problem": "q"}\n')
    with pytest.raises(Pr1EvalError, match=r"aime24.jsonl:2: missing or empty field 'answer'"):
        load_task("aime24", tmp_path)
    (tmp_path / "aime24.jsonl").write_text('{"id": "a", "problem": "p", "answer": "1"}\n{not json\n')
    with pytest.raises(Pr1EvalError, match=r"aime24.jsonl:2: not valid JSON"):
        load_task("aime24", tmp_path)


def test_missing_data_file_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match="PR1_DATA_DIR"):
        load_task("aime25", tmp_path)


def test_paper_template_substitutes_by_replacement() -> None:
    template = load_template("parallel_r1_v3", BENCH)
    text = template.render("Find {x} such that $\\{1,2\\}$.")
    assert text.endswith("Problem: Find {x} such that $\\{1,2\\}$.")
    assert text.startswith("Solve the following problem step by step.")
    assert load_template("boxed").render("P").startswith("P\n")


def test_prompt_file_needs_placeholder(tmp_path: Path) -> None:
    bad = tmp_path / "t.txt"
    bad.write_text("no placeholder")
    with pytest.raises(Pr1EvalError, match="placeholder"):
        load_template(str(bad))


class _ChatTok:
    chat_template = "x"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):  # type: ignore[no-untyped-def]
        assert tokenize is False and add_generation_prompt is True
        assert [m["role"] for m in messages] == ["user"]  # no system message
        return f"<user>{messages[0]['content']}<assistant>"


def test_chat_template_is_applied_without_system_message() -> None:
    assert apply_chat(_ChatTok(), "hi") == "<user>hi<assistant>"
    assert apply_chat(object(), "hi") == "hi"


def _rec(i: int) -> SampleRecord:
    return SampleRecord(task="t", problem_id=f"p{i // 2}", sample_idx=i % 2, response=f"r{i}", gold="1",
                        paths_per_block=[2, 3], block_rel_starts=[0.25])


def test_store_appends_parts_and_roundtrips_every_column(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.write_run_json({"k": 2})
    store.append([_rec(0), _rec(1)])
    store.append([_rec(2), _rec(3)])
    assert [p.name for p in store.part_paths()] == ["part-00000.parquet", "part-00001.parquet"]
    frame = store.read_frame()
    assert list(frame.columns) == list(SAMPLE_COLUMNS) and len(frame) == 4
    assert store.finished_keys() == {("t", "p0", 0), ("t", "p0", 1), ("t", "p1", 0), ("t", "p1", 1)}
    back = store.read_records()
    assert back[3] == _rec(3)


def test_store_ignores_temp_files_and_refuses_duplicates(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.append([_rec(0)])
    (store.samples_dir / ".part-00001.parquet.tmp").write_bytes(b"half written")
    assert len(store.read_frame()) == 1
    store.append([_rec(0)])
    with pytest.raises(Pr1EvalError, match="duplicated sample key"):
        store.read_frame()


def test_store_rewrite_replaces_samples(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.append([_rec(0)])
    store.append([_rec(1)])
    store.rewrite([_rec(0), _rec(1), _rec(2)])
    assert len(store.part_paths()) == 1 and len(store.read_frame()) == 3


def test_missing_run_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match="run.json is missing"):
        RunStore(tmp_path).read_run_json()
    (tmp_path / "run.json").write_text("{bad")
    with pytest.raises(Pr1EvalError, match="not valid JSON"):
        RunStore(tmp_path).read_run_json()
