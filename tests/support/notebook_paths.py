"""The project's notebooks, and which of them run on a training job's step runs.

Shared by the two notebook test modules: ``test_notebooks.py`` runs every other notebook on a
folder of evaluation runs and checks that each notebook is run by one of the two;
``test_training_notebook.py`` runs the ones listed in :data:`ON_TRAINING_STEPS`.
"""

from __future__ import annotations

from pathlib import Path

ALL_NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
#: Notebooks run on a training job's step runs instead, by test_training_notebook.py.
ON_TRAINING_STEPS = ("04",)
