"""Which Streamlit release first has every Streamlit API the dashboards call (the floor in pyproject.toml).

How: the calls are read from ``dashboards/`` with ``ast`` (``st.X(...)``, ``st.sidebar.X``,
``st.query_params.X`` and the same element methods on containers such as ``left.plotly_chart``),
each with its keyword names and string-literal values. For each wheel given, the function
definitions in its ``streamlit/`` sources are read the same way: a call is supported when a
function of that name takes every keyword it passes, and a string value (``width="stretch"``)
appears in that function's source. Nothing is imported, so old releases need none of their
dependencies.

    pip download streamlit==1.50.0 streamlit==1.51.0 --no-deps -d /tmp/st   # one per version
    python bench/check_streamlit_floor.py /tmp/st/streamlit-*.whl
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECEIVERS = {"st", "sidebar", "query_params", "left", "right", "column", "col", "cell", "cells", "container", "tab"}


def _chain(node: ast.expr) -> list[str]:
    names = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def used_calls(folder: Path = ROOT / "dashboards") -> dict[str, dict[str, set[str]]]:
    """``{function: {keyword: {string values}}}`` over every Streamlit call in ``folder``."""
    calls: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text())
        uses_st = any(isinstance(n, ast.Import) and any(a.name == "streamlit" for a in n.names) for n in ast.walk(tree))
        if not uses_st:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            chain = _chain(node.func)
            if len(chain) < 2 or chain[0] not in RECEIVERS or (chain[0] != "st" and chain[-2] not in RECEIVERS):
                continue
            entry = calls[chain[-1]]
            for kw in node.keywords:
                if kw.arg is None:
                    continue
                values = entry[kw.arg]
                if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    values.add(kw.value.value)
    return {name: dict(kws) for name, kws in calls.items()}


def defined_functions(wheel: Path, wanted: set[str]) -> dict[str, list[tuple[set[str], str]]]:
    """``{name: [(parameter names, source)]}`` for the functions and classes named in ``wanted``
    in the wheel's streamlit/ sources."""
    found: dict[str, list[tuple[set[str], str]]] = defaultdict(list)
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if not (name.startswith("streamlit/") and name.endswith(".py")):
                continue
            text = zf.read(name).decode("utf-8", "replace")
            if not any(f"def {w}(" in text or f"class {w}(" in text for w in wanted):
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if getattr(node, "name", None) not in wanted:
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
                    found[node.name].append((params, ast.get_source_segment(text, node) or ""))
                elif isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                            params = {p.arg for p in [*item.args.args, *item.args.kwonlyargs]}
                            found[node.name].append((params, ast.get_source_segment(text, item) or ""))
    return found


def missing(wheel: Path, calls: dict[str, dict[str, set[str]]]) -> list[str]:
    """What the dashboards call that this release lacks (empty: it has everything)."""
    defs = defined_functions(wheel, set(calls))
    gaps = []
    for name, kws in sorted(calls.items()):
        if name in ("get", "startswith", "endswith"):  # dict access; str methods on a variable named like a container
            continue
        candidates = defs.get(name, [])
        if not candidates:
            gaps.append(f"{name}()")
            continue
        for kw, values in sorted(kws.items()):
            fits = [src for params, src in candidates if kw in params]
            if not fits:
                gaps.append(f"{name}({kw}=)")
            for value in sorted(values):
                if kw in ("key", "label", "page_title", "text", "language", "url_path", "title", "format_func") or \
                        not re.fullmatch(r"[a-z_]+", value):
                    continue  # free text, not an option value
                if fits and not any(f'"{value}"' in src or f"'{value}'" in src for src in fits):
                    gaps.append(f'{name}({kw}="{value}")')
    return gaps


def main(argv: list[str]) -> int:
    calls = used_calls()
    print(f"{sum(len(k) for k in calls.values())} keyword uses in {len(calls)} Streamlit calls")
    first = None
    for wheel in sorted((Path(a) for a in argv), key=lambda p: [int(x) for x in re.findall(r"\d+", p.name.split("-")[1])]):
        gaps = missing(wheel, calls)
        version = wheel.name.split("-")[1]
        print(f"{version:>8}: {'all present' if not gaps else 'lacks ' + ', '.join(gaps)}")
        if not gaps and first is None:
            first = version
    print(f"first release with everything: {first}")
    return 0 if first else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
