"""Task loading (packaged data, lookup order, integrity), prompt rendering and the run store's
durability rules."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs import paths
from pr1_eval.inputs.prompts import apply_chat, load_template
from pr1_eval.inputs.tasks import TASKS, HubSource, TaskSpec, load_task, parse_task_list
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SAMPLE_COLUMNS, SampleRecord
from pr1_eval.store.run_store import RunStore

ROOT = Path(__file__).resolve().parents[3]
BENCH = paths.packaged_benchmarks_dir()
EXPECTED_ROWS = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 500, "math300_pr1": 316, "gsm8k": 1319}
# sha256 of each benchmark as recorded in the data's PROVENANCE.md (copied here by hand, not from MANIFEST.json)
PROVENANCE_SHA256 = {
    "aime24.jsonl": "d08a19c2c520c2961eac2b208904e828b1b2e763d721ab3f8bc97f296a5cc7b9",
    "aime25.jsonl": "8498b609ea726ae8d91e6f9a439f92d5d892fc6cdc2e481d5c5a38c705e6531e",
    "amc23.jsonl": "f68e2f1aafb806837aa342b7c09df11b88d0064d1b9df67e2660897d75445032",
    "math500.jsonl": "680cfd5f6d38b444f5ae6662c0da445210a362f6826b5a2d27df98c92ab42b67",
    "gsm8k_test.jsonl": "a58f9586e9cff641eeea68bba75adf3fdb6368670ee491704a950c532d2daaa3",
    "math300_pr1.jsonl": "7151260ad72dead3cd99ca8fe36428697f33caf8a0be76b2fcb8b3dcf54d5bdc",
}
PAPER_TEMPLATE_START = "Solve the following problem step by step."


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here starts as a fresh clone does: no PR1_* folders set."""
    for name in (paths.DATA_DIR_ENV, paths.PROMPTS_DIR_ENV, paths.TRAINING_DIR_ENV):
        monkeypatch.delenv(name, raising=False)


def _aime_folder(folder: Path, gold: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "aime24.jsonl").write_text(json.dumps({"id": "a", "problem": "p", "answer": gold}) + "\n")
    return folder


def test_every_task_loads_from_the_packaged_copy_with_the_documented_row_count() -> None:
    for name, rows in EXPECTED_ROWS.items():
        loaded = load_task(name)
        assert len(loaded.problems) == rows, name
        assert len({p.problem_id for p in loaded.problems}) == rows
        assert loaded.source == f"packaged:benchmarks/{TASKS[name].file}"
    assert load_task("aime24").problems[0].gold == "204"
    assert load_task("aime25").problems[0].gold == "70"


def test_packaged_files_are_the_documented_ones_and_the_manifest_lists_exactly_them() -> None:
    for filename, sha in PROVENANCE_SHA256.items():
        assert hashlib.sha256((BENCH / filename).read_bytes()).hexdigest() == sha, filename
    on_disk = {p.relative_to(paths.PACKAGED_DATA).as_posix() for sub in ("benchmarks", "prompts")
               for p in (paths.PACKAGED_DATA / sub).iterdir()}
    manifest = paths.read_manifest()
    assert set(manifest) == on_disk == {f"benchmarks/{f}" for f in PROVENANCE_SHA256} | {
        "prompts/parallel_r1_v3.txt", "prompts/sequential_baseline.txt"}
    for rel, entry in manifest.items():
        data = (paths.PACKAGED_DATA / rel).read_bytes()
        assert (entry["sha256"], entry["bytes"]) == (hashlib.sha256(data).hexdigest(), len(data))
    assert (paths.PACKAGED_DATA / "README.md").is_file()


def test_pyproject_package_data_ships_every_packaged_file() -> None:
    """A non-editable install only carries files that [tool.setuptools.package-data] names."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["pr1_eval"]
    wanted = [*paths.read_manifest(), "README.md", "MANIFEST.json"]
    missing = [rel for rel in wanted if not any(fnmatch(f"data/{rel}", pattern) for pattern in patterns)]
    assert missing == []


def test_a_modified_packaged_file_is_an_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "data"
    shutil.copytree(paths.PACKAGED_DATA, copy)
    monkeypatch.setattr(paths, "PACKAGED_DATA", copy)
    assert len(load_task("aime25").problems) == 30  # the intact copy loads
    target = copy / "benchmarks" / "aime25.jsonl"
    target.write_text(target.read_text().replace('"answer": "70"', '"answer": "71"', 1))
    with pytest.raises(Pr1EvalError, match=r"aime25\.jsonl was modified") as err:
        load_task("aime25")
    assert "\n" not in str(err.value) and "--data-dir" in str(err.value)
    prompt = copy / "prompts" / "parallel_r1_v3.txt"
    prompt.write_text(prompt.read_text() + " ")
    with pytest.raises(Pr1EvalError, match=r"parallel_r1_v3\.txt was modified"):
        load_template("parallel_r1_v3")
    (copy / "benchmarks" / "amc23.jsonl").unlink()
    with pytest.raises(Pr1EvalError, match=r"amc23\.jsonl is missing"):
        load_task("amc23")


def test_lookup_order_data_dir_then_env_then_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, env = _aime_folder(tmp_path / "explicit", "1"), _aime_folder(tmp_path / "env", "2")
    assert load_task("aime24").problems[0].gold == "204"
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(env))
    assert load_task("aime24").problems[0].gold == "2"
    assert load_task("aime24", explicit).problems[0].gold == "1"
    packaged = load_task("aime24", source="packaged")
    assert packaged.problems[0].gold == "204" and packaged.source.startswith("packaged:")


class _FakeDatasets:
    """Stands in for ``datasets.load_dataset``: records the call, returns rows shaped like the hub's."""

    def __init__(self, rows: list[dict[str, Any]] | Exception) -> None:
        self.rows = rows
        self.calls: list[tuple[str, str | None, str | None]] = []

    def __call__(self, path: str, name: str | None = None, split: str | None = None) -> list[dict[str, Any]]:
        self.calls.append((path, name, split))
        if isinstance(self.rows, Exception):
            raise self.rows
        return self.rows


def test_hub_when_asked_or_when_a_task_is_not_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    fake = _FakeDatasets([{"question": "Q?", "answer": "work\n#### 1,234", "id": "h0"}])
    monkeypatch.setattr(datasets, "load_dataset", fake)
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(_aime_folder(tmp_path / "env", "2")))
    hub = load_task("gsm8k", source="hub")  # the flag beats $PR1_DATA_DIR
    assert fake.calls == [("openai/gsm8k", "main", "test")]
    assert hub.source == "hub:openai/gsm8k" and [(p.problem, p.gold) for p in hub.problems] == [("Q?", "1234")]
    with pytest.raises(Pr1EvalError, match="exclude each other"):
        load_task("gsm8k", tmp_path, source="hub")
    spec = TaskSpec("unpackaged", "1", "unpackaged.jsonl", "not shipped", HubSource("org/unpackaged", "test"))
    monkeypatch.setitem(TASKS, "unpackaged", spec)
    monkeypatch.delenv(paths.DATA_DIR_ENV)
    fake.rows = [{"problem": "P", "answer": 3.0}]
    assert load_task("unpackaged").source == "hub:org/unpackaged" and load_task("unpackaged").problems[0].gold == "3"
    with pytest.raises(Pr1EvalError, match="not packaged"):
        load_task("unpackaged", source="packaged")


def test_unreachable_hub_is_one_line_that_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", _FakeDatasets(ConnectionError("offline mode\nsecond line")))
    with pytest.raises(Pr1EvalError) as err:
        load_task("aime24", source="hub")
    message = str(err.value)
    assert "\n" not in message and "HuggingFaceH4/aime_2024" in message and "--data-dir" in message
    assert "aime24.jsonl" in message and "offline mode" in message


def test_math300_uses_the_math_answer_for_base_subscripts() -> None:
    golds = {p.problem_id: p.gold for p in load_task("math300_pr1").problems}
    assert golds["test/number_theory/864.json"] == "52_8"


def test_hash_changes_with_limit_and_is_stable() -> None:
    full, again, two = load_task("amc23"), load_task("amc23", BENCH), load_task("amc23", limit=2)
    assert full.data_hash == again.data_hash != two.data_hash and len(two.problems) == 2


def test_each_task_carries_the_k_of_the_papers_table() -> None:
    # the paper's table (DESIGN.md): Mean@16/Pass@16 on AIME24, AIME25, AMC23; its MATH300 at Mean@1;
    # MATH-500 and GSM8K are not in it
    assert {name: spec.paper_k for name, spec in TASKS.items()} == {
        "aime24": 16, "aime25": 16, "amc23": 16, "math500": None, "math300_pr1": 1, "gsm8k": None}


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
    with pytest.raises(Pr1EvalError, match="PR1_DATA_DIR.*packaged copy"):
        load_task("aime25", tmp_path)


def test_paper_template_substitutes_by_replacement() -> None:
    template = load_template("parallel_r1_v3")
    assert template.source == "packaged:prompts/parallel_r1_v3.txt"
    text = template.render("Find {x} such that $\\{1,2\\}$.")
    assert text.endswith("Problem: Find {x} such that $\\{1,2\\}$.")
    assert text.startswith(PAPER_TEMPLATE_START)
    assert load_template("sequential_baseline").render("P").startswith("P")
    assert load_template("boxed").render("P").startswith("P\n")
    assert load_template("parallel_r1_v3", BENCH).text == template.text  # the packaged folder's sibling


def test_prompt_lookup_env_folder_then_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "parallel_r1_v3.txt").write_text("Mine: {problem}")
    monkeypatch.setenv(paths.PROMPTS_DIR_ENV, str(tmp_path))
    mine = load_template("parallel_r1_v3")
    assert mine.render("Q") == "Mine: Q" and mine.source == str(tmp_path / "parallel_r1_v3.txt")
    with pytest.raises(Pr1EvalError, match=r"sequential_baseline\.txt does not exist"):
        load_template("sequential_baseline")
    monkeypatch.delenv(paths.PROMPTS_DIR_ENV)
    assert load_template("parallel_r1_v3").text.startswith(PAPER_TEMPLATE_START)


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
    store.write_run(RunRecord(k=2))
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
        RunStore(tmp_path).read_run()
    (tmp_path / "run.json").write_text("{bad")
    with pytest.raises(Pr1EvalError, match="not valid JSON"):
        RunStore(tmp_path).read_run()


def test_math300_from_the_hub_keeps_only_integer_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's MATH300 rule (integer once a base subscript's ``_`` goes) is the spec's ``keep_row``."""
    import datasets

    rows = [{"problem": f"P{i}", "answer": answer, "unique_id": f"u{i}"}
            for i, answer in enumerate(["12", "52_8", "\\frac{1}{2}", "-3", "2\\sqrt{3}"])]
    monkeypatch.setattr(datasets, "load_dataset", _FakeDatasets(rows))
    hub = load_task("math300_pr1", source="hub")
    assert [(p.problem_id, p.gold) for p in hub.problems] == [("u0", "12"), ("u1", "52_8"), ("u3", "-3")]
