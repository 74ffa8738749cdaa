"""End to end: generations imported with ``pr1-eval import`` (graded by the real grader), then
``pr1-eval leaderboard --json``, against a reference computed from the counts the files were made with."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from pr1_eval.cli.main import main

K = 4
PROBLEMS = [f"p{i}" for i in range(8)]
BASE = {p: i % 3 for i, p in enumerate(PROBLEMS)}  # correct answers per problem, of K
BETTER = {p: min(K, c + 2) for p, c in BASE.items()}


def _write(path: Path, counts: dict[str, int], step: int) -> None:
    """JSON Lines: sample s of problem p answers 5 (gold) when s < counts[p], else 6."""
    rows = [{"task": "aime24", "problem_id": p, "sample_idx": s, "gold": "5", "model": f"/exp/global_step_{step}",
             "response": f"Some work.\nFinal Answer: {5 if s < c else 6}"} for p, c in counts.items() for s in range(K)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imports")
    specs = {"base": (BASE, 0), "same": (BASE, 10), "better": (BETTER, 20),
             "fewer": ({p: c for p, c in BASE.items() if p != "p7"}, 30)}
    for name, (counts, step) in specs.items():
        _write(root / f"{name}.jsonl", counts, step)
        assert main(["import", str(root / f"{name}.jsonl"), "--out", str(root / "runs" / name)]) == 0
    return root / "runs"


def _exact_p(diffs: list[float]) -> float:
    observed = abs(sum(diffs))
    sums = [abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) for signs in itertools.product((1, -1), repeat=len(diffs))]
    return sum(v >= observed - 1e-12 for v in sums) / len(sums)


def test_imported_runs_through_leaderboard_json(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    runs = [str(imported / n) for n in ("base", "same", "better")]
    assert main(["leaderboard", *runs, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"] == "base"  # lowest step of the /exp family
    rows = {r["name"]: r for r in doc["runs"]}
    assert [r["name"] for r in doc["runs"]][0] == "better"
    assert rows["base"]["tasks"]["aime24"]["mean@4"] == pytest.approx(sum(BASE.values()) / (K * len(BASE)))
    assert rows["better"]["tasks"]["aime24"]["mean@4"] == pytest.approx(sum(BETTER.values()) / (K * len(BETTER)))
    comparisons = {c["run"]: c for c in doc["comparisons"]}
    assert (comparisons["same"]["delta"], comparisons["same"]["p_value"]) == (0, 1)
    diffs = [(BETTER[p] - BASE[p]) / K for p in PROBLEMS]
    assert comparisons["better"]["delta"] == pytest.approx(sum(diffs) / len(diffs))
    assert comparisons["better"]["p_value"] == pytest.approx(_exact_p(diffs))
    assert comparisons["better"]["p_holm"] == comparisons["better"]["p_value"]  # one task: Holm changes nothing
    ranks = {r["name"]: r for r in doc["runs"]}
    assert ranks["same"]["tied_with_above"] or ranks["base"]["tied_with_above"]  # base and same are identical


def test_imported_runs_with_different_problem_sets(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["leaderboard", str(imported / "base"), str(imported / "fewer"), "--json"]) == 0  # ranked apart
    out, err = capsys.readouterr()
    alone = {entry["name"]: entry["why"] for entry in json.loads(out)["alone"]}
    assert ("run 'fewer' has 7 problems, run 'base' has 8 (0 held only by run 'fewer', 1 only by run 'base': p7)"
            in alone["fewer"])
    assert "--intersect ranks all 2 on the problems they all share" in err  # offered: here it works
    assert main(["leaderboard", str(imported / "base"), str(imported / "fewer"), "--json", "--intersect"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["comparisons"][0]["n_problems"] == 7 and doc["comparisons"][0]["delta"] == 0
    assert any("compared on 7 shared problems" in note for note in doc["notes"])
