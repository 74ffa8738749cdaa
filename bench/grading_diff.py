"""Which grading verdicts a change to ``pr1_eval/grading`` moves, per answer policy: the pinned
grading sets graded by this checkout and by another copy of ``pr1_eval`` (an earlier commit), item
by item. Why: the pinned tests compare counts and named kinds; this says that the ``paper`` policy
gives the same extracted answer, ``correct``, ``correct_paper`` and status on every item, and lists
each ``lenient`` item that moved, so a new reading is shown to change only what it means to.

The items: the 488 reference cases as responses and as ``Final Answer:`` lines, the 62 held-out
cases as ``Final Answer:`` lines, the 1,880 generated agreement pairs and the answer-line forms
(right, wrong and negated rows) of ``tests/pr1_eval/grading/test_answer_line_forms.py``.

    git archive <commit> pr1_eval | tar -x -C /tmp/grading_base
    python bench/grading_diff.py /tmp/grading_base [--limit N]

``--limit N`` grades the first N items only (``bench/smoke.sh`` runs it against this checkout
itself, a handful of items, so the script is known to run: nothing can move then).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GRADING_TESTS = ROOT / "tests" / "pr1_eval" / "grading"
FIELDS = ("extracted_answer", "correct", "correct_paper", "grade_status")


def items() -> list[tuple[str, str]]:
    """Every (response, gold) pair of the sets named in the module docstring, in a fixed order."""
    sys.path.insert(0, str(ROOT))
    from tests.pr1_eval.grading.agreement_pairs import generate_pairs

    def cases(name: str) -> list[dict[str, Any]]:
        text = (GRADING_TESTS / name).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    reference, heldout = cases("reference_cases.jsonl"), cases("heldout_cases.jsonl")
    tree = ast.parse((GRADING_TESTS / "test_answer_line_forms.py").read_text(encoding="utf-8"))
    rows = {n.target.id: ast.literal_eval(n.value) for n in tree.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None}
    lines = [(r[0], r[1]) for name in ("FORMS", "WRONG", "LENIENT_FORMS", "LENIENT_WRONG") for r in rows.get(name, [])]
    return ([(c["prediction"], c["gold"]) for c in reference]
            + [(f"Final Answer: {c['prediction']}", c["gold"]) for c in reference + heldout]
            + [(p.response, p.gold) for p in generate_pairs()]
            + [(f"Work.\nFinal Answer: {line}", gold) for line, gold in lines])


def grade(pairs_file: str, out_file: str) -> None:
    """Grade the pairs in ``pairs_file`` under both policies with whichever ``pr1_eval`` is first on
    the path; write ``{policy: [[field, ...], ...]}`` to ``out_file``."""
    from pr1_eval.grading import grade_responses

    pairs = [tuple(p) for p in json.loads(Path(pairs_file).read_text(encoding="utf-8"))]
    out = {policy: [[getattr(r, f) for f in FIELDS] for r in grade_responses(pairs, policy=policy, timeout_s=60)]
           for policy in ("paper", "lenient")}
    Path(out_file).write_text(json.dumps(out), encoding="utf-8")


def _run(code_root: Path, pairs_file: Path, out_file: Path) -> dict[str, list[list[Any]]]:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    subprocess.run([sys.executable, __file__, "--grade", str(pairs_file), str(out_file)], env=env, check=True,
                   cwd=tempfile.gettempdir())
    result: dict[str, list[list[Any]]] = json.loads(out_file.read_text(encoding="utf-8"))
    return result


def main(argv: list[str]) -> int:
    if argv[:1] == ["--grade"]:
        grade(argv[1], argv[2])
        return 0
    limit = None
    if len(argv) == 3 and argv[1] == "--limit" and argv[2].isdigit():
        argv, limit = argv[:1], int(argv[2])
    if len(argv) != 1 or not (Path(argv[0]) / "pr1_eval" / "grading").is_dir():
        print("usage: python bench/grading_diff.py BASE_DIR [--limit N]  (BASE_DIR holds pr1_eval/ of the other commit)")
        return 2
    pairs = items()[:limit]
    with tempfile.TemporaryDirectory() as tmp:
        pairs_file = Path(tmp) / "pairs.json"
        pairs_file.write_text(json.dumps(pairs), encoding="utf-8")
        base = _run(Path(argv[0]).resolve(), pairs_file, Path(tmp) / "base.json")
        new = _run(ROOT, pairs_file, Path(tmp) / "new.json")
    print(f"{len(pairs)} items")
    for policy in ("paper", "lenient"):
        moved = [(p, b, n) for p, b, n in zip(pairs, base[policy], new[policy], strict=True) if b != n]
        print(f"{policy}: {len(moved)} item(s) changed")
        for (response, gold), before, after in moved:
            print(f"  {response[-60:]!r} vs {gold!r}: {dict(zip(FIELDS, before, strict=True))} -> {dict(zip(FIELDS, after, strict=True))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
