"""``leaderboard --until-decided``: the adaptive sweep's verdicts on runs already stored, one look."""

from __future__ import annotations

from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from tests.support.leaderboard_fixtures import write_counts_run

PROBLEMS = [f"p{i}" for i in range(30)]


def test_stored_runs_get_a_sign_a_within_and_the_guarantee(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_counts_run(tmp_path, "s1", {"aime24": dict.fromkeys(PROBLEMS, 8)}, k=16, step=1)
    write_counts_run(tmp_path, "s2", {"aime24": dict.fromkeys(PROBLEMS, 16)}, k=16, step=2)
    write_counts_run(tmp_path, "s3", {"aime24": dict.fromkeys(PROBLEMS, 8)}, k=16, step=3)
    assert main(["leaderboard", str(tmp_path), "--until-decided", "ranking", "--delta", "0.2"]) == 0
    out = capsys.readouterr().out
    lines = {tuple(line.split()[:2]): line for line in out.splitlines() if line.startswith("s")}
    assert "B better" in lines[("s1", "s2")] and "+50.0" not in lines[("s1", "s2")]  # Δ = 0.5 − 1 = −50 points
    assert "-50.0" in lines[("s1", "s2")] and "A better" in lines[("s2", "s3")]
    assert "within ±20" in lines[("s1", "s3")]  # the same verdicts in the same order: Δ = 0 exactly
    assert "one look at the samples held" in out and "Guarantee:" in out
    assert main(["leaderboard", str(tmp_path), "--until-decided", "best", "--delta", "0.05"]) == 0
    assert "best: s2" in capsys.readouterr().out


def test_until_decided_as_json_names_runs_and_states_the_rule(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json

    write_counts_run(tmp_path, "s1", {"aime24": dict.fromkeys(PROBLEMS, 8)}, k=16, step=1)
    write_counts_run(tmp_path, "s2", {"aime24": dict.fromkeys(PROBLEMS, 16)}, k=16, step=2)
    assert main(["leaderboard", str(tmp_path), "--until-decided", "best", "--delta", "0.05", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] == "s2" and doc["finished"] and doc["problems"] == 30
    assert [c["status"] for c in doc["checkpoints"]] == ["eliminated", "best"]
    (pair,) = doc["comparisons"]
    assert (pair["a"], pair["b"], pair["verdict"]) == ("s1", "s2", "b better")
    assert pair["estimate"] == pytest.approx(-0.5) and pair["low"] <= -0.5 <= pair["high"]
    assert doc["settings"]["test"] == "obrien-fleming" and "O’Brien–Fleming" in doc["guarantee"]
    assert main(["leaderboard", str(tmp_path), "--until-decided", "best", "--decide-test", "cs", "--json"]) == 0
    assert "confidence sequences" in json.loads(capsys.readouterr().out)["guarantee"]


def test_until_decided_writes_a_page_with_the_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_counts_run(tmp_path, "s1", {"aime24": dict.fromkeys(PROBLEMS, 8)}, k=16, step=1)
    write_counts_run(tmp_path, "s2", {"aime24": dict.fromkeys(PROBLEMS, 16)}, k=16, step=2)
    page = tmp_path / "out" / "decided.html"
    assert main(["leaderboard", str(tmp_path / "s1"), str(tmp_path / "s2"), "--until-decided", "ranking",
                 "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "B better" in html and "-50.0<br>" in html and "Guarantee:" in html  # Δ over its interval
    assert "s1" in html and "s2" in html and "<table>" in html
