"""The shape of the code base, checked: dependencies point one way, nothing imports in a cycle,
test fixtures stay out of the runtime path, and ``pr1_eval/`` shows its flow in folders.

Imports are read from the source (``ast``), including imports inside functions (a lazy import
is still a dependency) and excluding ``if TYPE_CHECKING:`` blocks (annotations only).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pr1_eval", "analysis", "dashboards", "repro")


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for file in (ROOT / package).rglob("*.py"):
            parts = file.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return modules


MODULES = _modules()


def _imported_names(name: str, file: Path) -> set[str]:
    """Every project module ``name`` imports (absolute and relative, at any depth)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = name.split(".")[: len(name.split(".")) - child.level + (file.name == "__init__.py")]
                    base = ".".join([*parts, base] if base else parts)
                found.update([base, *(f"{base}.{alias.name}" for alias in child.names)])
            visit(child)

    visit(ast.parse(file.read_text(encoding="utf-8")))
    resolved = set()
    for target in found:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


GRAPH = {name: _imported_names(name, file) for name, file in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_lazy_and_relative_imports() -> None:
    # command handlers import their work inside functions; the protocol package re-exports its parser relatively
    assert "pr1_eval.store.regrade" in GRAPH["pr1_eval.cli.regrade"]
    assert "pr1_eval.scaleout.merge" in GRAPH["pr1_eval.cli.merge"]


def test_no_module_imports_in_a_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_dependencies_point_one_way() -> None:
    """pr1_eval imports none of the packages built on it; analysis never imports the dashboard or repro."""
    upward = {(m, d) for m, deps in GRAPH.items() for d in deps
              if (m.startswith("pr1_eval") and d.split(".")[0] in ("analysis", "dashboards", "repro"))
              or (m.startswith("analysis") and d.split(".")[0] in ("dashboards", "repro"))}
    assert upward == set()


def test_test_fixtures_stay_out_of_the_runtime_path() -> None:
    """Only the commands that build tiny models (``demo``, ``tiny-model``) reach ``pr1_eval.testing``;
    repro's fakes are imported only by repro's testing package."""
    fixture_users = {m for m, deps in GRAPH.items() if any(d.startswith("pr1_eval.testing") for d in deps)
                     and not m.startswith("pr1_eval.testing")}
    assert fixture_users == {"pr1_eval.cli.demo", "pr1_eval.cli.tiny_model", "repro.testing"}
    fake_users = {m for m, deps in GRAPH.items() if any(d.startswith("repro.testing") for d in deps)
                  and not m.startswith("repro.testing")}
    assert fake_users == set()


def test_pr1_eval_shows_its_flow_in_folders() -> None:
    flat = sorted(p.name for p in (ROOT / "pr1_eval").glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "errors.py", "jsonl.py"]
    folders = {p.name for p in (ROOT / "pr1_eval").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert {"inputs", "protocol", "engines", "decoding", "generate", "grading", "records", "store", "report",
            "ingest", "scaleout", "cli", "testing"} <= folders


def test_the_protocol_has_one_home() -> None:
    """Evaluation and training import the token-level protocol; neither defines tag ids itself."""
    importers = {m for m, deps in GRAPH.items() if any(d.startswith("pr1_eval.protocol") for d in deps)}
    for module in ("pr1_eval.decoding.forkjoin", "pr1_eval.decoding.structured", "repro.agent_loop",
                   "repro.structured_actor", "repro.reward_manager", "pr1_eval.lm_eval_tasks.utils"):
        assert module in importers, module
    for name, file in MODULES.items():
        if not name.startswith("pr1_eval.protocol"):
            assert "convert_tokens_to_ids(" not in file.read_text(encoding="utf-8"), name
