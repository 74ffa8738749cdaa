"""Run text stays text in the notebooks' HTML too: every notebook runs top to bottom on the two
hostile runs of :mod:`hostile_fixtures` (attacks in every untrusted field; the training-dynamics
notebook, which reads training-step runs, on a training job whose name is the attack), and every
output is searched for an element made from data.

Why here and not in the browser test: a notebook's figures are plotly JSON that plotly.js turns
into SVG when the notebook is opened, and plotly.js draws ``<a href>``, ``<img>`` and other tags
it finds in label strings. So the check reads what the notebook stored: no string of any plotly
figure holds a raw tag, and no HTML output holds an anchor, image or script element whose
attributes point at the attacker's site. A notebook that passed a data field to ``px.*`` without
:func:`analysis.common.safe_text.plot_frame` fails here.
"""

from __future__ import annotations

from tests.support.deadlines import scaled

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.hostile_fixtures import MARKER, RUN_ATTACK, build_hostile_runs
from tests.support.training_job_fixtures import build_job

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
#: A tag plotly.js would draw (it renders a, img-like and styling tags found in label text).
RAW_TAG = re.compile(r"<\s*/?\s*(a|img|script|iframe|svg|span|b|i|sup|sub|br)\b", re.IGNORECASE)
#: Markup plotly express writes into its own hover templates (not from data).
PLOTLY_OWN = re.compile(r"<br>|</?extra>")
#: An element of an HTML output whose attributes point at the attacker's site.
DATA_ELEMENT = re.compile(r"<\s*(a|img|script|iframe)\b[^>]*" + re.escape(MARKER), re.IGNORECASE)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-notebook-runs")
    build_hostile_runs(root / "runs")
    return root / "runs"


@pytest.fixture(scope="module")
def hostile_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-training-job") / "runs"
    build_job(root / "job", steps=(0, 50, 100, 150), job=f"job {RUN_ATTACK}")
    return root


#: Notebooks that read a training job's step runs rather than evaluation runs.
TRAINING_NOTEBOOKS = {"04_training_dynamics"}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_output_of_a_notebook_makes_an_element_from_run_text(notebook: Path, hostile_root: Path, hostile_job: Path,
                                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(notebook, as_version=4)
    monkeypatch.setenv("PR1_RUNS", str(hostile_job if notebook.stem in TRAINING_NOTEBOOKS else hostile_root))
    monkeypatch.setenv("PR1_EMBEDDINGS", "0")  # the attack is in the text, not in the cosine
    monkeypatch.setenv("PR1_EMBED_CACHE", str(tmp_path / "embeddings"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    NotebookClient(nb, timeout=scaled(600), kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"], "a cell failed on the hostile runs"
    figures = [o["data"]["application/vnd.plotly.v1+json"] for o in outputs
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    html = [str(o["data"]["text/html"]) for o in outputs if "text/html" in o.get("data", {})]
    shown = json.dumps([o.get("data", {}) for o in outputs]) + "".join(str(o.get("text", "")) for o in outputs)
    assert MARKER in shown, "the hostile runs' text should be shown (as text), or this test checks nothing"
    for figure in figures:
        raw = [s for s in _strings(figure) if MARKER in s and RAW_TAG.search(PLOTLY_OWN.sub("", s))]
        assert not raw, f"{notebook.name}: plotly would draw tags from run text: {raw[:2]}"
    for page in html:
        found = DATA_ELEMENT.findall(page)
        assert not found, f"{notebook.name}: HTML output has {found} elements made from run text"
