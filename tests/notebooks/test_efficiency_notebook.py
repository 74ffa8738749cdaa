"""Notebook 02's efficiency cell on the designed fork-join runs (:mod:`tests.support.efficiency_fixtures`):
the frontier, histogram and step figures it shows hold the designed numbers, the frontier star on
the checkpoint that is both sooner and more accurate."""

from __future__ import annotations

from tests.support.deadlines import scaled

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from tests.support import efficiency_fixtures as fx
from tests.support.notebook_paths import ALL_NOTEBOOKS

NOTEBOOK = next(p for p in ALL_NOTEBOOKS if p.stem.startswith("02"))
RESULT = ('points = efficiency["points"].sort_values("step")\n'
          'print("RESULT " + json.dumps({"speedup": [float(v) for v in points["speedup"]], '
          '"steps": [int(s) for s in efficiency["steps"]["step"]]}))')


@pytest.mark.slow  # starts a kernel
def test_the_efficiency_cell_draws_the_designed_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fx.build_forkjoin_runs(tmp_path / "runs")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert "analysis.efficiency.figures" in nb.cells[-1].source
    nb.cells.append(nbformat.v4.new_code_cell("import json\n" + RESULT))
    monkeypatch.setenv("PR1_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("PR1_INCLUDE_INCOMPLETE", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    NotebookClient(nb, timeout=scaled(600), kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    plotly = "application/vnd.plotly.v1+json"
    figures = [o["data"][plotly] for o in nb.cells[-2].outputs if plotly in o.get("data", {})]
    assert len(figures) == 3  # frontier, histogram, steps
    (markers,) = [t for t in figures[0]["data"] if t.get("mode", "").startswith("markers")]
    assert markers["marker"]["symbol"] == ["circle", "star"]  # step 100, step 200
    text = "\n".join(str(o.get("text", "")) for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs)
    result = json.loads(re.search(r"RESULT (.*)", text)[1])  # type: ignore[index]
    cells = [(p, s) for p in range(fx.PROBLEMS) for s in range(fx.K)]
    want = [np.mean([fx.length(p, s) for p, s in cells]) / np.mean([fx.critical(step, p, s) for p, s in cells])
            for step in fx.STEPS]
    assert result["speedup"] == pytest.approx(want) and result["steps"] == list(fx.STEPS)
