"""Every notebook in notebooks/ runs top to bottom (nbclient) on runs made here: a sweep of the
tiny model over two checkpoints, three imported runs with blocks whose position drifts, and an
imported run killed after one of its two problems. A cell appended to each notebook prints the
key numbers the notebook computed, and they are compared with values derived here by hand from
the rows that were imported (accuracy, block positions by ``str.index``, roles, sacrebleu BLEU)."""

from __future__ import annotations

from tests.support.deadlines import scaled

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from sacrebleu.metrics import BLEU

from analysis.leaderboard.board import compute_leaderboard
from analysis.runs.loader import load_runs
from analysis.runs.notebooks import comparable_runs, resolve_runs_root
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.analysis_fixtures import make_record, write_run
from tests.support.notebook_paths import ALL_NOTEBOOKS, ON_TRAINING_STEPS

NOTEBOOKS = [p for p in ALL_NOTEBOOKS if p.stem[:2] not in ON_TRAINING_STEPS]


def _block(first: str, second: str) -> str:
    return (f"<Parallel>\n<Path>\nAdd the parts first. Final Answer: {first}\n</Path>\n"
            f"<Path>\nCount the cases instead. Final Answer: {second}\n</Path>\n</Parallel>\n"
            f"<Summary>\nThe paths give {first} and {second}.\n</Summary>\n")


def _imported_rows(problems: dict[str, str], step: int, index: int) -> list[dict[str, object]]:
    """Two samples per problem: a verifying block (paths agree) and an exploring one; blocks sit
    later and more answers are right at later steps."""
    rows = []
    for p, (pid, gold) in enumerate(problems.items()):
        for s in range(2):
            right = s == 0 or index + p >= 2
            second = gold if s == 0 else f"{gold}1"
            text = "Let me think about it. " * (2 + 6 * index) + "\n" + _block(gold, second) + \
                f"So the answer is {gold if right else gold + '9'}.\nFinal Answer: {gold if right else gold + '9'}"
            rows.append({"task": "aime24", "problem_id": pid, "sample_idx": s, "gold": gold, "response": text,
                         "model": f"/exp/pr1-seen/global_step_{step}"})
    return rows


SEEN_STEPS = (100, 200, 300)
KILLED_STEP = 250
#: the key numbers each notebook computed, printed by a cell the test appends
RESULT_CELLS = {
    "01": 'print("RESULT " + json.dumps({"ranked": {r["name"]: r["average"]["mean@2"] for r in doc["runs"]}, '
          '"excluded": [e["name"] for e in doc["excluded"]]}))',
    "02": 'seen = points[points["model_family"].str.contains("pr1-seen")]\n'
          'trend = trends.set_index(["model_family", "metric"])\n'
          'family = seen["model_family"].iloc[0]\n'
          'print("RESULT " + json.dumps({"steps": [int(s) for s in seen["step"]], '
          '"accuracy": [float(v) for v in seen["accuracy"]], '
          '"first_block_rel_pos": [float(v) for v in seen["first_block_rel_pos"]], '
          '"rho": float(trend.loc[(family, "first_block_rel_pos"), "spearman_rho"]), '
          '"p_exact": float(trend.loc[(family, "first_block_rel_pos"), "p_value"]), '
          '"complete": {f"{r}/{t}": bool(c) for r, t, c in zip(analysis.runs["run"], analysis.runs["task"], '
          'analysis.runs["complete"])}}))',
    "03": 'rows = analysis.runs.set_index("run")\n'
          'print("RESULT " + json.dumps({r: {"verification": float(rows.loc[r, "share_verification"]), '
          '"exploration": float(rows.loc[r, "share_exploration"]), "bleu": float(rows.loc[r, "bleu_mean"]), '
          '"complete": bool(rows.loc[r, "complete"])} for r in rows.index if "seen" in r}))',
}


def imported_texts(problems: dict[str, str]) -> dict[int, list[str]]:
    """The responses imported at each seen step (the second method reads these, not the store)."""
    return {step: [str(r["response"]) for r in _imported_rows(problems, step, i)] for i, step in enumerate(SEEN_STEPS)}


def _as_limited_run(run_dir: Path) -> None:
    """The imported steps stand in for runs generated with ``--limit 2`` beside the tiny sweep (the
    same two aime24 problems): drop the import's packaged-benchmark verdict ("2 of 30 problems of
    the packaged aime24"), which a generated run does not carry, so completeness here is only what
    run.json declares."""
    record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert record.pop("benchmark_check")["aime24"]["verdict"] == "partial"  # the check did run
    (run_dir / "run.json").write_text(json.dumps(record), encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("notebook-runs")
    model = cached_tiny_model("random")
    for step in (1, 2):
        folder = root / "ckpts" / f"global_step_{step}"
        folder.mkdir(parents=True)
        for item in model.iterdir():
            (folder / item.name).symlink_to(item)
    assert main(["sweep", str(root / "ckpts"), "--out-root", str(root / "runs" / "tiny"), "--tasks", "aime24", "-k", "2",
                 "--limit", "2", "--max-new-tokens", "8", "--engine", "hf", "--grade-workers", "1"]) == 0
    frame = RunStore(root / "runs" / "tiny" / "ckpts-step1-sequential-k2-seed0").read_frame()
    problems = dict(zip(frame["problem_id"], frame["gold"], strict=True))
    for index, step in enumerate((100, 200, 300)):
        source = root / f"step{step}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in _imported_rows(problems, step, index)), encoding="utf-8")
        out = root / "runs" / "imported" / f"seen-step{step}"
        assert main(["import", str(source), "--out", str(out), "--grade-workers", "1"]) == 0
        _as_limited_run(out)
    first = dict(list(problems.items())[:1])  # killed after its first problem; run.json still declares both
    source = root / "killed.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _imported_rows(first, KILLED_STEP, 0)), encoding="utf-8")
    killed = root / "runs" / "imported" / f"seen-step{KILLED_STEP}"
    assert main(["import", str(source), "--out", str(killed), "--grade-workers", "1"]) == 0
    _as_limited_run(killed)
    record = json.loads((killed / "run.json").read_text(encoding="utf-8"))
    record["status"] = "running"
    record["tasks"]["aime24"].update(n_problems=len(problems), problem_ids=list(problems))
    (killed / "run.json").write_text(json.dumps(record), encoding="utf-8")
    (root / "problems.json").write_text(json.dumps(problems), encoding="utf-8")
    return root / "runs"


def test_the_run_root_is_found_from_the_notebooks_folder(tmp_path: Path) -> None:
    (tmp_path / "repo" / "runs").mkdir(parents=True)
    (tmp_path / "repo" / "notebooks").mkdir()
    assert resolve_runs_root({}, tmp_path / "repo" / "notebooks")[0] == tmp_path / "repo" / "runs"
    assert resolve_runs_root({"PR1_RUNS": str(tmp_path)}, tmp_path / "repo")[0] == tmp_path.resolve()
    (tmp_path / "demo" / "pr1-demo").mkdir(parents=True)
    assert resolve_runs_root({}, tmp_path / "demo")[0] == tmp_path / "demo" / "pr1-demo"
    (tmp_path / "empty").mkdir()
    with pytest.raises(Pr1EvalError, match="no runs found: no runs/ or pr1-demo/ in .*empty or any folder above it"):
        resolve_runs_root({}, tmp_path / "empty")
    with pytest.raises(Pr1EvalError, match="PR1_RUNS=/nowhere does not exist"):
        resolve_runs_root({"PR1_RUNS": "/nowhere"})


def test_the_clone_own_demo_comes_before_a_runs_folder_above_the_clone(tmp_path: Path) -> None:
    """A clone inside a scratch folder that holds runs/: the notebooks (kernel in clone/notebooks)
    read the clone's pr1-demo/, the nearer folder, not the scratch folder's runs/ (they did)."""
    clone = tmp_path / "scratch" / "clone"
    (tmp_path / "scratch" / "runs").mkdir(parents=True)
    (clone / "pr1-demo").mkdir(parents=True)
    (clone / "notebooks").mkdir()
    root, how = resolve_runs_root({}, clone / "notebooks")
    assert root == clone / "pr1-demo" and "pr1-demo/" in how
    (clone / "runs").mkdir()  # within one folder runs/ still comes first
    assert resolve_runs_root({}, clone / "notebooks")[0] == clone / "runs"


def test_executed_copies_are_ignored_by_git() -> None:
    """``jupyter execute … --output 'executed-{notebook_name}'`` (the guide's command) writes beside
    the notebook; git must not list the copy as untracked."""
    root = Path(__file__).resolve().parents[2]
    copy = root / "notebooks" / "executed-01_compare_checkpoints.ipynb"
    check = subprocess.run(["git", "check-ignore", "-q", str(copy)], cwd=root, capture_output=True)
    if check.returncode == 128:
        pytest.skip("not a git checkout")
    assert check.returncode == 0, "notebooks/executed-*.ipynb is not ignored"


def test_a_relative_pr1_runs_means_the_folder_it_was_launched_from(tmp_path: Path) -> None:
    """``PR1_RUNS=pr1-demo jupyter execute notebooks/…`` from the repository root: the kernel starts
    in notebooks/, but $PWD (the shell's folder, which the kernel inherits) finds the repository's
    pr1-demo/; from notebooks/ a ../pr1-demo works, and so does an absolute path from anywhere."""
    repo = tmp_path / "repo"
    (repo / "pr1-demo").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    kernel = repo / "notebooks"
    demo = (repo / "pr1-demo").resolve()
    assert resolve_runs_root({"PR1_RUNS": "pr1-demo", "PWD": str(repo)}, kernel)[0] == demo  # from the root
    assert resolve_runs_root({"PR1_RUNS": "../pr1-demo", "PWD": str(kernel)}, kernel)[0] == demo  # from notebooks/
    assert resolve_runs_root({"PR1_RUNS": "pr1-demo"}, kernel)[0] == demo  # no $PWD: the kernel's folder and above
    assert resolve_runs_root({"PR1_RUNS": str(demo), "PWD": "/"}, kernel)[0] == demo
    with pytest.raises(Pr1EvalError, match="PR1_RUNS=elsewhere does not exist"):
        resolve_runs_root({"PR1_RUNS": "elsewhere", "PWD": str(repo)}, kernel)


def test_every_notebook_is_listed_and_an_extra_opens_them() -> None:
    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "guides" / "notebooks.md").read_text(encoding="utf-8")  # the docs page that lists them
    assert ALL_NOTEBOOKS and [p.stem for p in ALL_NOTEBOOKS if f"`{p.stem}`" not in guide] == []
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^notebooks = \[(.*)\]$", pyproject, re.MULTILINE)
    assert extra is not None and "jupyterlab" in extra[1] and "notebook>=" in extra[1]


def test_every_notebook_is_run_by_a_test() -> None:
    """Each notebook has a result cell here, or is run on training steps by test_training_notebook.py."""
    assert {p.stem[:2] for p in ALL_NOTEBOOKS} == set(RESULT_CELLS) | set(ON_TRAINING_STEPS)


def test_runs_sharing_no_task_are_cut_to_the_commonest_task(tmp_path: Path) -> None:
    """A runs/ folder of runs made for different tasks: the leaderboard with intersect raised; the
    notebook now compares the runs that hold the task most of them hold, and names the others."""
    for name, tasks in (("a", ["aime24"]), ("b", ["amc23"]), ("c", ["amc23", "gsm8k"])):
        write_run(tmp_path, name, [make_record(t, "p1", 0, "Final Answer: 5", correct=True) for t in tasks])
    loaded = load_runs(tmp_path, tokenizer=None, cache=False)
    with pytest.raises(Pr1EvalError, match="share no task"):
        compute_leaderboard(loaded, intersect=True)
    subset, note = comparable_runs(loaded)
    assert sorted(subset.samples["run"].unique()) == ["b", "c"] and sorted(subset.run_info) == ["b", "c"]
    assert note is not None and "hold amc23 (b, c); left out: a" in note
    document = compute_leaderboard(subset, intersect=True).document
    assert [r["name"] for r in document["runs"]] and document["tasks"] == ["amc23"]
    same, none = comparable_runs(subset)
    assert none is None and same is subset


@pytest.mark.slow  # starts a kernel per notebook
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(notebook: Path, runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(notebook, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")  # opens with its question
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in nb.cells if cell.cell_type == "code"), "commit notebooks without outputs"
    number = notebook.stem[:2]
    nb.cells.append(nbformat.v4.new_code_cell("import json\n" + RESULT_CELLS[number]))
    folder = tmp_path
    if number == "02":  # opened from a notebooks/ folder beside runs/, as a user opens it: no PR1_RUNS
        monkeypatch.delenv("PR1_RUNS", raising=False)
        folder = runs.parent / "notebooks"
        folder.mkdir(exist_ok=True)
    else:
        monkeypatch.setenv("PR1_RUNS", str(runs))
    monkeypatch.delenv("PR1_INCLUDE_INCOMPLETE", raising=False)
    monkeypatch.setenv("PR1_EMBED_CACHE", str(tmp_path / "embeddings"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))  # this venv's kernel
    NotebookClient(nb, timeout=scaled(600), kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    text = "\n".join(str(output.get("text", "")) + json.dumps(output.get("data", {}))
                     for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs)
    assert "Traceback" not in text
    result = json.loads(re.search(r"RESULT (.*)", text)[1])  # type: ignore[index]
    problems = json.loads((runs.parent / "problems.json").read_text(encoding="utf-8"))
    texts = imported_texts(problems)
    killed = f"seen-step{KILLED_STEP}"
    assert f"{killed} / aime24: 1 of 2 problem(s) have no samples" in text  # said when loading, in every notebook
    if number == "01":
        # imported rows: sample 0 always right, sample 1 right when index + p >= 2 (index 0, 1, 2 by step)
        assert {k: v for k, v in result["ranked"].items() if "seen" in k} == {
            "seen-step100": 2 / 4, "seen-step200": 3 / 4, "seen-step300": 4 / 4}
        assert result["excluded"] == [killed] and "left out of the ranking, incomplete: " + killed in text
        assert "data hash unknown for seen-step300" in text and "delta" in text
    if number == "02":
        assert f"6 run(s) from {runs.resolve()}" in text  # found ../runs from notebooks/ without PR1_RUNS
        assert result["steps"] == list(SEEN_STEPS)  # the killed step 250 is left out of the points
        assert result["accuracy"] == [2 / 4, 3 / 4, 4 / 4]
        positions = [sum(t.index("<Parallel>") / len(t) for t in texts[s]) / len(texts[s]) for s in SEEN_STEPS]
        assert result["first_block_rel_pos"] == pytest.approx(positions, abs=1e-9)
        assert positions[0] < positions[1] < positions[2]
        assert result["rho"] == pytest.approx(1.0) and result["p_exact"] == pytest.approx(2 / 6)  # 2 of 3! orderings
        assert result["complete"][f"{killed}/aime24"] is False and result["complete"]["seen-step100/aime24"] is True
    if number == "03":
        assert "role <b>verification</b>" in text and "role <b>exploration</b>" in text
        scorer = BLEU(effective_order=True)
        for step in SEEN_STEPS:
            pairs = [re.findall(r"<Path>\n(.*?)\n</Path>", t, re.DOTALL) for t in texts[step]]
            bleu = [(scorer.sentence_score(a, [b]).score + scorer.sentence_score(b, [a]).score) / 200 for a, b in pairs]
            shown = result[f"seen-step{step}"]
            # sample 0's paths agree on the gold answer (verification), sample 1's differ (exploration)
            assert (shown["verification"], shown["exploration"]) == (0.5, 0.5) and shown["complete"] is True
            assert shown["bleu"] == pytest.approx(sum(bleu) / len(bleu))
        assert result[killed]["complete"] is False


@pytest.mark.slow  # starts a kernel
def test_notebook_01_with_one_complete_run_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One complete run and one killed one: the killed run is left out, the one ranked run has no
    partner for a paired comparison, and the notebook says so instead of failing."""
    rows = [{"task": "t", "problem_id": f"p{p}", "sample_idx": 0, "gold": "1",
             "response": f"Final Answer: {1 if p else 2}", "model": "/exp/one/global_step_5"} for p in range(2)]
    source = tmp_path / "one.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for name in ("complete", "killed"):
        assert main(["import", str(source), "--out", str(tmp_path / "runs" / name), "--grade-workers", "0"]) == 0
    record = json.loads((tmp_path / "runs" / "killed" / "run.json").read_text(encoding="utf-8"))
    (tmp_path / "runs" / "killed" / "run.json").write_text(json.dumps({**record, "status": "importing"}), encoding="utf-8")
    nb = nbformat.read(ALL_NOTEBOOKS[0], as_version=4)
    assert ALL_NOTEBOOKS[0].stem.startswith("01")
    nb.cells.append(nbformat.v4.new_code_cell('import json\nprint("RESULT " + json.dumps([r["name"] for r in doc["runs"]]))'))
    monkeypatch.setenv("PR1_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("PR1_INCLUDE_INCOMPLETE", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    NotebookClient(nb, timeout=scaled(600), kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(str(output.get("text", "")) + json.dumps(output.get("data", {}))
                     for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs)
    assert "Traceback" not in text
    assert json.loads(re.search(r"RESULT (.*)", text)[1]) == ["complete"]  # type: ignore[index]
    assert "only one run is ranked (complete): add a second run to compare" in text
