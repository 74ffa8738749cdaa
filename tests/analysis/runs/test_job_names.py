"""Two training jobs whose dumps both sit under a folder called ``job``: ``import-verl`` names
each after that folder, so the names meet. They must never pool into one series (two points per
step, a trend over twice the points) nor be named by absolute paths in tables; and a second job
imported into the first one's run root is refused (its steps would replace the first's)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.support.verl_dump_fixtures as F
from analysis.runs.index import discover_runs
from analysis.runs.loader import distinguishing_labels, load_runs
from analysis.runs.steps import job_notes, step_table
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.verl_formats import Lengths
from pr1_eval.ingest.verl_import import ImportOptions, import_verl

OPTS = ImportOptions(lengths=Lengths(prompt=900, response=160), workers=1, final=True)


def _job(root: Path) -> Path:
    for step in (1, 2):
        F.write_v1_step(root / "job" / "rollout_data", step, F.training_problems(2), 2, validation=False)
    return root / "job"


@pytest.mark.slow  # writes four dumps through VERL's own writer and imports them (about 45 s on a quiet core)
def test_two_jobs_named_job_stay_apart_and_are_not_named_by_paths(tmp_path: Path) -> None:
    first, second = _job(tmp_path / "exp1"), _job(tmp_path / "exp2")
    import_verl(first, tmp_path / "exp1" / "runs", OPTS)
    import_verl(second, tmp_path / "exp2" / "runs", OPTS)
    dirs, _ = discover_runs([tmp_path / "exp1" / "runs", tmp_path / "exp2" / "runs"])
    steps = step_table(dirs)
    assert sorted(set(steps["job"])) == ["job (exp1)", "job (exp2)"]
    assert steps.groupby(["job", "kind", "step"]).size().max() == 1  # one point per step and job
    notes = job_notes(steps)
    assert len(notes) == 1 and "2 jobs are named 'job'" in notes[0] and "--job" in notes[0]
    names = set(load_runs(dirs, tokenizer=None, cache=False).samples["run"])
    assert names == {f"job-train-step-00000{s} ({e})" for s in (1, 2) for e in ("exp1", "exp2")}
    assert not any(str(tmp_path) in name for name in names)
    with pytest.raises(Pr1EvalError, match=r"holds the steps of another job \(dumps in .*exp1/job\)"):
        import_verl(second, tmp_path / "exp1" / "runs", OPTS)
    assert import_verl(first, tmp_path / "exp1" / "runs", OPTS)  # its own job again: fine (unchanged)


def test_distinguishing_labels_keep_only_what_differs() -> None:
    assert distinguishing_labels(["/x/a/runs/train/step-1", "/x/b/runs/train/step-1"]) == {
        "/x/a/runs/train/step-1": "a", "/x/b/runs/train/step-1": "b"}
    assert distinguishing_labels(["/x/a/b/r", "/x/c/r"]) == {"/x/a/b/r": "a/b", "/x/c/r": "c"}
