"""Notebook 04 runs top to bottom (nbclient) on a synthetic mid-training job whose behaviour is known
by construction (:mod:`tests.support.training_job_fixtures`): the per-step numbers it prints equal
the design counted here from the written texts, the first block's position has a positive trend,
and the reward switch is marked."""

from __future__ import annotations

from tests.support.deadlines import scaled

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.notebook_paths import ALL_NOTEBOOKS, ON_TRAINING_STEPS
from tests.support.training_job_fixtures import JOB, STEPS, SWITCH_STEP, build_job, first_block_position

NOTEBOOK = next(p for p in ALL_NOTEBOOKS if p.stem.startswith(ON_TRAINING_STEPS[0]))
RESULT = ('train = steps[steps["kind"] == "train"]\n'
          'position = trends[(trends["kind"] == "training rollouts") & (trends["metric"] == "first_block_rel_pos")]\n'
          'print("RESULT " + json.dumps({"steps": [int(s) for s in train["step"]], '
          '"parallel_ratio": [float(v) for v in train["parallel_ratio"]], '
          '"first_block_rel_pos": [float(v) for v in train["first_block_rel_pos"]], '
          '"accuracy": [float(v) for v in train["accuracy"]], '
          '"rho": float(position["spearman_rho"].iloc[0]), "p": float(position["p_value"].iloc[0]), '
          '"marks": [[int(s), str(label)] for s, label in marks_by_job["' + JOB + '"]]}))')


@pytest.mark.slow  # starts a kernel
def test_training_notebook_runs_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    designs = build_job(tmp_path / "job")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in nb.cells if cell.cell_type == "code"), "commit notebooks without outputs"
    nb.cells.append(nbformat.v4.new_code_cell("import json\n" + RESULT))
    monkeypatch.setenv("PR1_RUNS", str(tmp_path / "job"))
    monkeypatch.delenv("PR1_INCLUDE_INCOMPLETE", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    NotebookClient(nb, timeout=scaled(600), kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(str(output.get("text", "")) + json.dumps(output.get("data", {}))
                     for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs)
    assert "Traceback" not in text
    result = json.loads(re.search(r"RESULT (.*)", text)[1])  # type: ignore[index]
    train = [designs[("train", s)] for s in STEPS]
    assert f"{len(designs)} step run(s) of 1 job(s)" in text
    assert result["steps"] == list(STEPS)
    assert result["parallel_ratio"] == pytest.approx([sum("<Parallel>" in t for t in d.texts) / len(d.texts)
                                                      for d in train])
    assert result["accuracy"] == pytest.approx([sum(d.right) / len(d.right) for d in train])
    assert result["first_block_rel_pos"] == pytest.approx([first_block_position(d) for d in train])
    ratios = result["parallel_ratio"]
    peak = ratios.index(max(ratios))
    assert STEPS[peak] == SWITCH_STEP and ratios[0] < ratios[peak] > ratios[-1]  # rises, then falls
    assert result["rho"] == pytest.approx(1.0) and result["p"] < 0.001  # the first block moves later, every step
    first_after = min(s for s in STEPS if s > SWITCH_STEP)
    assert result["marks"] == [[first_after, "reward: parallel_accuracy → accuracy"]]
    assert f"{JOB}: marked step {first_after}: reward: parallel_accuracy → accuracy" in text
