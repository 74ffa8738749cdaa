"""Extract the (prediction, gold, expected verdict) cases of math-verify's and lighteval's own test
suites into ``reference_cases.jsonl`` (run once; offline, against local git directories).

Why a script and a data file rather than importing their tests: neither library ships its tests,
and the agreement test (:mod:`test_reference_cases`) must grade fixed data. Only the case data is
taken (string literals, expected verdicts and the non-default settings each test passed), read
with :mod:`ast` from the test sources at a given commit; no code of theirs is copied.

Usage (from the repository root)::

    python -m tests.pr1_eval.grading.extract_reference_cases \\
        --math-verify /path/to/Math-Verify.git --math-verify-rev 5d148cf... \\
        --lighteval /path/to/lighteval.git --lighteval-rev v0.13.0 \\
        > tests/pr1_eval/grading/reference_cases.jsonl

What is taken (see ``reference_cases.md`` for the provenance of the committed file):

* math-verify: every ``compare_strings(gold, pred, ...)`` case of ``tests/test_*.py`` (parametrized
  or a literal ``assert``) and ``test_yujianll.py``'s plain ``verify(parse(gold), parse(pred))``
  cases. Not taken: tests of ``parse`` alone (``test_configs``, ``test_string_extraction``) and of
  timeouts and errors (``test_timeout``, ``test_raise_on_error``), which have no (gold, prediction)
  verdict.
* lighteval: every math case of ``tests/unit/metrics/test_extractive_match.py``. Not taken: the
  multiple-choice letter cases (``match_types=["NativeLetters"]``: not a math answer) and the JSON
  metric cases (``test_cases/*.json``: aggregate pass@k values, not one verdict per pair).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

#: The positional parameters of each suite's ``compare_strings`` helper after (gold, pred).
HELPER_PARAMS = {
    "math-verify": ("match_types", "precision", "strict", "allow_set_relation_comp"),
    "lighteval": ("language", "match_types", "precision"),
}
MATH_VERIFY_SKIPPED = ("test_configs.py", "test_string_extraction.py", "test_timeout.py", "test_raise_on_error.py",
                       "__init__.py")
LIGHTEVAL_FILE = "tests/unit/metrics/test_extractive_match.py"


def git_show(git_dir: str, rev: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def git_files(git_dir: str, rev: str, folder: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", rev, folder], check=True,
                         capture_output=True, text=True).stdout
    return sorted(out.split())


def value(node: ast.expr) -> Any:
    """A literal's value (an f-string evaluated with :mod:`math`); an enum member (``Language.FRENCH``) as its name, a bare name as ``{"param": name}``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return {"param": node.id}
    if isinstance(node, ast.JoinedStr):  # one f-string case: f"{math.sqrt(17):.15f}"
        return eval(compile(ast.Expression(node), "<case>", "eval"), {"math": math})  # noqa: S307
    return ast.literal_eval(node)


def parametrized(func: ast.FunctionDef) -> list[dict[str, Any]]:
    """The parameter sets of ``func``'s ``@pytest.mark.parametrize`` (one dict per case)."""
    cases: list[dict[str, Any]] = []
    for deco in func.decorator_list:
        if isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize":
            names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
            assert isinstance(deco.args[1], ast.List | ast.Tuple)
            for element in deco.args[1].elts:
                assert isinstance(element, ast.Tuple), ast.dump(element)
                cases.append(dict(zip(names, (value(e) for e in element.elts), strict=True)))
    return cases


def resolve(arg: Any, case: dict[str, Any]) -> Any:
    return case[arg["param"]] if isinstance(arg, dict) and "param" in arg else arg


def compared(call: ast.Call, source: str) -> tuple[list[Any], dict[str, Any]] | None:
    """The arguments of a ``compare_strings(...)`` call, or of ``verify(parse(g), parse(p))`` (defaults)."""
    name = getattr(call.func, "id", "")
    if name == "compare_strings":
        args = [value(a) for a in call.args]
        settings = dict(zip(HELPER_PARAMS[source], args[2:], strict=False))
        settings.update({k.arg: value(k.value) for k in call.keywords if k.arg})
        return args[:2], settings
    if name == "verify" and all(isinstance(a, ast.Call) and getattr(a.func, "id", "") == "parse" for a in call.args):
        return [value(a.args[0]) for a in call.args if isinstance(a, ast.Call)], {"helper": "verify(parse(gold), parse(pred))"}
    return None


def cases_in(text: str, source: str, path: str) -> Iterator[dict[str, Any]]:
    """Every (gold, prediction, expected) case in one test file's source ``text``."""
    for func in ast.parse(text).body:
        if not (isinstance(func, ast.FunctionDef) and func.name.startswith("test_")):
            continue
        params = parametrized(func)
        for node in ast.walk(func):
            if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
                continue
            left = node.test.left
            while isinstance(left, ast.Call) and getattr(left.func, "id", "") == "int":
                left = left.args[0]
            call = compared(left, source) if isinstance(left, ast.Call) else None
            if call is None:
                continue
            (gold, pred), settings = call
            expected = value(node.test.comparators[0])
            for case in params or [{}]:
                yield record(source, path, func.name, resolve(pred, case), resolve(gold, case),
                             resolve(expected, case), {k: resolve(v, case) for k, v in settings.items()})


def record(source: str, path: str, test: str, pred: Any, gold: Any, expected: Any,
           settings: dict[str, Any]) -> dict[str, Any]:
    """One line of the fixture; ``config`` keeps every setting the test passed (its note says which differ)."""
    helper = settings.pop("helper", "compare_strings")
    settings = {k: v for k, v in settings.items() if v is not None}
    defaults = {"match_types": ["latex", "expr"], "precision": 6, "strict": True, "allow_set_relation_comp": False,
                "language": "ENGLISH"}
    changed = sorted(k for k, v in settings.items() if defaults.get(k) != v)
    note = f"{helper}" + (f"; non-default: {', '.join(f'{k}={settings[k]}' for k in changed)}" if changed else "")
    return {"source": source, "file": path, "test": test, "prediction": pred, "gold": gold,
            "expected": bool(expected), "note": note, "config": settings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--math-verify", required=True, help="git directory of huggingface/Math-Verify")
    parser.add_argument("--math-verify-rev", default="HEAD")
    parser.add_argument("--lighteval", required=True, help="git directory of huggingface/lighteval")
    parser.add_argument("--lighteval-rev", default="v0.13.0")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for path in git_files(args.math_verify, args.math_verify_rev, "tests"):
        if path.endswith(".py") and path.rsplit("/", 1)[-1] not in MATH_VERIFY_SKIPPED:
            rows += cases_in(git_show(args.math_verify, args.math_verify_rev, path), "math-verify", path)
    for row in cases_in(git_show(args.lighteval, args.lighteval_rev, LIGHTEVAL_FILE), "lighteval", LIGHTEVAL_FILE):
        if "NativeLetters" not in row["config"].get("match_types", []):
            rows.append(row)
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
