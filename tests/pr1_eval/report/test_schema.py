"""The typed report: metric names from one function, field docs that cover every --json key,
and the JSON form read back into the same values."""

from __future__ import annotations

import json

import pytest

from pr1_eval.report.run_report import run_report
from pr1_eval.report.schema import TaskMetrics, json_schema
from pr1_eval.stats.names import metric_name
from tests.support.report_fixtures import run_record, verdict_frame


@pytest.mark.parametrize(("args", "checker", "name"), [
    (("best", 16), "paper", "best@16_paper"), (("mean", 4), None, "mean@4"), (("pass", 1), None, "pass@1"),
    (("maj", 16), None, "maj@16"), (("mean", "K"), "paper", "mean@K_paper"), (("pass", "k"), None, "pass@k"),
])
def test_metric_name(args: tuple, checker: str | None, name: str) -> None:
    assert metric_name(*args, checker=checker) == name


@pytest.mark.parametrize(("kind", "k", "checker"), [("avg", 4, None), ("mean", 0, None), ("mean", 4, "verl"),
                                                    ("mean", "n", None), ("mean", True, None)])
def test_metric_name_refuses_what_no_report_prints(kind: str, k: object, checker: str | None) -> None:
    with pytest.raises(ValueError):
        metric_name(kind, k, checker=checker)  # type: ignore[arg-type]


def test_every_json_key_has_its_documentation() -> None:
    """The docs the fields carry describe each key ``report --json`` writes, no more and no fewer."""
    frame = verdict_frame({"a0": [True] * 4, "a1": [True, False, False, True]})
    whole = run_report(frame, run=run_record({"t": (["a0", "a1"], 4)})).to_json()
    part = run_report(frame, run=run_record({"t": (["a0", "a1", "a2"], 4)})).to_json()
    schema = json_schema()
    # run and model: only when loaded from a folder; adaptive_note: only for an adaptive run
    assert set(whole) == (set(schema["run"]) | {"tasks"}) - {"run", "model", "adaptive_note"}
    assert list(whole)[-1] == "schema_version" and whole["schema_version"] == 3
    task_keys = set(schema["task"])
    assert set(whole["tasks"]["t"]) == task_keys | {k.replace("K", "4") for k in schema["metrics"]}
    assert set(part["tasks"]["t"]) == task_keys | {"partial"}
    assert set(part["tasks"]["t"]["partial"]) == {k.replace("K", "4") for k in schema["metrics"]}
    assert all(isinstance(doc, str) and doc for doc in [*schema["run"].values(), *schema["task"].values(),
                                                        *schema["metrics"].values()])
    assert "Pass@16" in schema["metrics"]["best@K_paper"] and schema["schema_version"] == 3


def test_task_metrics_read_back_from_json() -> None:
    m = run_report(verdict_frame({"p1": [True, False, False, False], "p2": [True, True, True, False]}), k=4).tasks["t"].metrics
    assert m is not None
    again = TaskMetrics.from_json(json.loads(json.dumps(m.to_json())), k=4)
    assert again == m
    assert TaskMetrics.metric_key("best_at_k_paper", 16) == "best@16_paper" and m.name("pass_at_1") == "pass@1"
    assert TaskMetrics.metric_key("parallel_ratio", 16) == "parallel_ratio"
