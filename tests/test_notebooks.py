"""Every notebook in notebooks/ runs top to bottom (nbclient) on runs made here: a sweep of the
tiny model over two checkpoints and three imported runs with blocks whose position drifts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pr1_eval.cli.main import main
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


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
        assert main(["import", str(source), "--out", str(root / "runs" / "imported" / f"seen-step{step}"),
                     "--grade-workers", "1"]) == 0
    return root / "runs"


@pytest.mark.slow  # starts a kernel per notebook
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(notebook: Path, runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(notebook, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")  # opens with its question
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in nb.cells if cell.cell_type == "code"), "commit notebooks without outputs"
    monkeypatch.setenv("PR1_RUNS", str(runs))
    monkeypatch.setenv("PR1_EMBED_CACHE", str(tmp_path / "embeddings"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))  # this venv's kernel
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(str(output.get("text", "")) + json.dumps(output.get("data", {}))
                     for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs)
    assert "Traceback" not in text
    if notebook.stem.startswith("01"):
        assert "seen-step300" in text and "data hash unknown for seen-step300" in text and "delta" in text
    if notebook.stem.startswith("02"):
        assert "first_block_rel_pos" in text and "spearman_rho" in text
    if notebook.stem.startswith("03"):
        assert "role <b>verification</b>" in text and "role <b>exploration</b>" in text
