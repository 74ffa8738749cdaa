"""The shape of the code base, checked: dependencies point one way, nothing imports in a cycle
(type-only imports included), ``pr1_eval``'s folders follow the flow of a run, few imports hide
inside functions, test fixtures stay out of the runtime path, and ``tests/`` mirrors the packages.

Imports are read from the source (``ast``) and sorted into three kinds: at module top, inside a
function (a lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (annotations only).
The runtime graph holds the first two; the type graph holds all three, because a loop that only
type checkers see still says two modules are one.

**The rule for imports inside functions.** A project import belongs at the top of the module, where
a reader sees the plan. It may sit inside a function only when it is deliberate, and it is
deliberate only when the module it imports pulls in, through its own top-level imports, a heavy or
optional library (:data:`HEAVY`: torch, transformers, vLLM, Ray, Streamlit, plotly, pandas,
pyarrow, numpy, math-verify, verl …), or a project package the CLI's parser must not load
(:data:`HEAVY_PROJECT`), that the importing module does not already pull in itself:
then the laziness keeps ``pr1-eval --help`` fast or keeps an extra optional. Every other
function-level project import is counted per package against :data:`LAZY_CEILING`; hoist it (the
runtime graph already holds it, so hoisting makes no cycle) and lower the ceiling.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pr1_eval", "analysis", "dashboards", "repro")

# The flow of a run through pr1_eval's folders, lowest first: a module may import its own folder and
# any folder earlier in this order, never a later one. The flat modules sit below every folder.
FLOW = ("protocol", "records", "inputs", "store", "engines", "decoding", "grading", "stats", "report", "ingest", "replay",
        "scaleout", "generate", "lm_eval_tasks", "testing", "cli")
FLAT_BELOW_ALL = ("errors", "jsonl", "output_paths", "processes", "terminal")

# Known edges against the flow, each waiting on a change in flight; empty this once they are gone
# (the test fails on an entry that no longer matches anything, so the list cannot go stale).
FLOW_EXCEPTIONS: set[tuple[str, str]] = set()

# Known loops through type-only imports, same rule: remove an entry when its loop is gone.
TYPE_LOOP_EXCEPTIONS: list[list[str]] = []

# Third-party libraries whose import costs a noticeable part of a second, or that an extra installs.
HEAVY = frozenset({"torch", "transformers", "tokenizers", "vllm", "ray", "streamlit", "plotly", "pandas",
                   "pyarrow", "numpy", "scipy", "math_verify", "sympy", "verl", "datasets", "hydra", "omegaconf",
                   "huggingface_hub", "sentence_transformers", "lm_eval", "sacrebleu", "matplotlib", "numba"})

#: Project packages that building the CLI's parser must not load either (``pr1-eval --help`` stays
#: fast: ``tests/pr1_eval/cli/test_registry.py``): a lazy import that keeps one away is deliberate too.
HEAVY_PROJECT = ("pr1_eval.grading", "pr1_eval.store", "pr1_eval.testing")

# Function-level project imports that are not deliberate (see the module docstring), per package:
# the count on the day the check came in. Lower it as they are hoisted; the test prints the list.
LAZY_CEILING = {"pr1_eval": 6, "analysis": 0, "dashboards": 3, "repro": 0}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for file in (ROOT / package).rglob("*.py"):
            parts = file.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return modules


MODULES = _modules()


@dataclass(frozen=True)
class Import:
    """One imported name, resolved to a project module (``target``) or left as a third-party root."""

    target: str
    kind: str  # "top", "function" or "type"
    line: int
    project: bool


def _resolve(target: str, name: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target if target and target != name else None


def _read_imports(name: str, file: Path) -> list[Import]:
    """Every import of ``name`` (absolute and relative, at any depth), with its kind."""
    found: list[Import] = []

    def add(raw: str, kind: str, line: int) -> None:
        if raw.split(".")[0] in PACKAGES:
            target = _resolve(raw, name)
            if target:
                found.append(Import(target, kind, line, True))
        elif raw and raw.split(".")[0] not in sys.stdlib_module_names and raw != "__future__":
            found.append(Import(raw.split(".")[0], kind, line, False))

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = kind
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                inner = "type"
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "top":
                inner = "function"
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, kind, child.lineno)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = name.split(".")[: len(name.split(".")) - child.level + (file.name == "__init__.py")]
                    base = ".".join([*parts, base] if base else parts)
                for raw in (base, *(f"{base}.{alias.name}" for alias in child.names)):
                    add(raw, kind, child.lineno)
            visit(child, inner)

    visit(ast.parse(file.read_text(encoding="utf-8")), "top")
    return list(dict.fromkeys(found))


IMPORTS = {name: _read_imports(name, file) for name, file in MODULES.items()}
GRAPH = {name: {i.target for i in imports if i.project and i.kind != "type"} for name, imports in IMPORTS.items()}
TYPE_GRAPH = {name: {i.target for i in imports if i.project} for name, imports in IMPORTS.items()}


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


def _flow_place(module: str) -> int | None:
    """Where a ``pr1_eval`` module sits in :data:`FLOW` (-1: a flat module below all; None: the
    package itself, its ``__main__``, or another package)."""
    parts = module.split(".")
    if parts[0] != "pr1_eval" or len(parts) < 2 or parts[1] == "__main__":
        return None
    if parts[1] in FLAT_BELOW_ALL:
        return -1
    assert parts[1] in FLOW, f"pr1_eval/{parts[1]} has no place in FLOW: add it where it belongs in the flow"
    return FLOW.index(parts[1])


def _against_the_flow(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(module, imported module) for every import of a folder later in the flow."""
    edges = set()
    for module, deps in graph.items():
        here = _flow_place(module)
        for dep in deps:
            there = _flow_place(dep)
            if here is not None and there is not None and there > here:
                edges.add((module, dep))
    return edges


@cache
def _heavy(module: str) -> frozenset[str]:
    """The heavy libraries (and :data:`HEAVY_PROJECT` packages) that importing ``module`` loads
    through top-level imports (its packages' ``__init__`` modules included, since Python runs them
    first)."""
    seen, todo, found = {module}, [module], set()
    while todo:
        current = todo.pop()
        parents = [".".join(current.split(".")[:n]) for n in range(1, current.count(".") + 1)]
        for imp in IMPORTS[current]:
            if imp.kind == "top" and not imp.project:
                found |= {imp.target} & HEAVY
        for nxt in [*parents, *(i.target for i in IMPORTS[current] if i.kind == "top" and i.project)]:
            found |= {package for package in HEAVY_PROJECT if nxt == package or nxt.startswith(package + ".")}
            if nxt in MODULES and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(found)


def _needless_lazy_imports() -> list[tuple[str, int, str]]:
    """(module, line, imported module) for each function-level project import statement that buys
    nothing: no module it names loads a heavy library the importer does not already load."""
    statements: dict[tuple[str, int], list[str]] = {}
    for module, imports in IMPORTS.items():
        for imp in imports:
            if imp.project and imp.kind == "function":
                statements.setdefault((module, imp.line), []).append(imp.target)
    return sorted((module, line, max(targets, key=len)) for (module, line), targets in statements.items()
                  if not any(_heavy(t) - _heavy(module) for t in targets))


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_lazy_relative_and_type_only_imports(tmp_path: Path) -> None:
    source = tmp_path / "fake.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "import numpy\n"
                      "from pr1_eval.errors import Pr1EvalError\n"
                      "from . import tags\n"
                      "if TYPE_CHECKING:\n"
                      "    from pr1_eval.jsonl import iter_jsonl\n"
                      "def f():\n"
                      "    import torch\n"
                      "    from .parse import parse_structure\n", encoding="utf-8")
    found = {(i.target, i.kind, i.project) for i in _read_imports("pr1_eval.protocol.fake", source)}
    assert found == {("numpy", "top", False), ("pr1_eval.errors", "top", True), ("pr1_eval.protocol", "top", True),
                     ("pr1_eval.protocol.tags", "top", True), ("pr1_eval.jsonl", "type", True),
                     ("torch", "function", False), ("pr1_eval.protocol.parse", "function", True)}


def test_the_flow_and_lazy_checks_catch_what_they_are_for() -> None:
    assert _against_the_flow({"pr1_eval.report.x": {"pr1_eval.ingest.y", "pr1_eval.records.z", "pr1_eval.errors"},
                              "pr1_eval.errors": {"pr1_eval.protocol.tags"}}) == {
        ("pr1_eval.report.x", "pr1_eval.ingest.y"), ("pr1_eval.errors", "pr1_eval.protocol.tags")}
    assert "torch" in _heavy("pr1_eval.decoding.structured") and "pyarrow" in _heavy("pr1_eval.store.run_store")
    assert _heavy("pr1_eval.protocol.tags") == frozenset()


def test_a_lazy_import_is_deliberate_only_when_it_keeps_a_heavy_library_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(IMPORTS, "pr1_eval.report.fake", [
        Import("pr1_eval.protocol.tags", "function", 3, True),  # light: belongs at the top
        Import("pr1_eval.store.run_store", "function", 4, True),  # loads pyarrow and pandas: deliberate
    ])
    assert [n for n in _needless_lazy_imports() if n[0] == "pr1_eval.report.fake"] == [
        ("pr1_eval.report.fake", 3, "pr1_eval.protocol.tags")]


def test_no_module_imports_in_a_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_no_loop_through_type_only_imports() -> None:
    """A loop that only ``if TYPE_CHECKING:`` imports close still ties its modules into one."""
    loops = _cycles(TYPE_GRAPH)
    stale = [loop for loop in TYPE_LOOP_EXCEPTIONS if loop not in loops]
    assert not stale, f"these loops are gone, remove them from TYPE_LOOP_EXCEPTIONS: {stale}"
    new = [loop for loop in loops if loop not in TYPE_LOOP_EXCEPTIONS]
    assert not new, "modules in a loop through type-only imports (move the shared type down a layer):\n" + "\n".join(
        " <-> ".join(loop) for loop in new)


def test_pr1_eval_folders_follow_the_flow() -> None:
    """Nothing imports a folder later in :data:`FLOW` (lazy imports included)."""
    edges = _against_the_flow(GRAPH)
    allowed = {(m, d) for m, d in edges if (m, d.split(".")[1]) in FLOW_EXCEPTIONS}
    stale = {e for e in FLOW_EXCEPTIONS if not any((m, d.split(".")[1]) == e for m, d in allowed)}
    assert not stale, f"these edges are gone, remove them from FLOW_EXCEPTIONS: {sorted(stale)}"
    offending = sorted(edges - allowed)
    assert not offending, "imports against the flow (move the shared code down to the lower folder):\n" + "\n".join(
        f"{m} -> {d}" for m, d in offending)


def test_few_imports_hide_inside_functions() -> None:
    """Function-level project imports that are not deliberate stay under :data:`LAZY_CEILING`."""
    needless = _needless_lazy_imports()
    per_package = Counter(module.split(".")[0] for module, _, _ in needless)
    over = {p: n for p, n in per_package.items() if n > LAZY_CEILING[p]}
    assert not over, f"needless function-level imports over the ceiling {over}; hoist these to the module top:\n" + (
        "\n".join(f"{m}:{line} imports {t}" for m, line, t in needless if m.split(".")[0] in over))


def test_dependencies_point_one_way() -> None:
    """pr1_eval imports none of the packages built on it; analysis never imports the dashboard or repro."""
    upward = {(m, d) for m, deps in TYPE_GRAPH.items() for d in deps
              if (m.startswith("pr1_eval") and d.split(".")[0] in ("analysis", "dashboards", "repro"))
              or (m.startswith("analysis") and d.split(".")[0] in ("dashboards", "repro"))}
    assert upward == set()


#: The analysis modules that decide how work runs (they may import ``analysis.engine``); every
#: other analysis module is a measure, a table or a page, and is written as plain functions.
ORCHESTRATION = frozenset({"analysis.command", "analysis.summary", "analysis.pipeline.output",
                           "analysis.pipeline.scheduled", "analysis.runs.loader", "analysis.runs.block_cache",
                           "analysis.leaderboard.tables"})
#: The measures: one synchronous API each, importing no engine and starting no thread or process.
MEASURES = ("analysis.structure.branching", "analysis.structure.drift", "analysis.structure.roles",
            "analysis.structure.conclusions", "analysis.diversity.paths", "analysis.diversity.bleu",
            "analysis.diversity.bleu_counts")


#: What sits at ``analysis/``'s top: the package's entry points only (the ``analyze`` command and its
#: Python call); everything else lives in the room of the question it answers.
ANALYSIS_TOP = ("__init__", "command", "summary")


def test_only_the_entry_points_sit_at_the_top_of_analysis() -> None:
    top = sorted(p.stem for p in (ROOT / "analysis").glob("*.py"))
    assert top == sorted(ANALYSIS_TOP), (
        f"modules at analysis/'s top that are not entry points, move them into their room: "
        f"{sorted(set(top) - set(ANALYSIS_TOP))}")


#: The libraries of statistical functions (distributions, special functions, tests).
STATISTICAL_LIBRARIES = ("scipy.stats", "scipy.special", "statistics", "statsmodels")
#: Modules outside the room that still compute a statistic themselves, each waiting on a move; the
#: test fails on an entry that no longer imports one, so the list only shrinks. (The nano
#: curriculum's learning check, a z test over training draws, belongs to repro's own work in flight.)
STATISTICS_ELSEWHERE = {"repro.nano.checks"}


def _statistical_imports(file: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
                 if isinstance(node, ast.ImportFrom) and not node.level else [])
        found |= {lib for lib in STATISTICAL_LIBRARIES for n in names if n == lib or n.startswith(lib + ".")}
    return found


def test_statistics_are_imported_only_from_their_room() -> None:
    """Every estimator, interval and test lives in ``pr1_eval.stats``: no other module imports a
    library of statistical functions, and the stats room imports nothing of the project but errors."""
    users = {name for name, file in MODULES.items() if not name.startswith("pr1_eval.stats")
             and _statistical_imports(file)}
    stale = STATISTICS_ELSEWHERE - users
    assert not stale, f"these no longer compute statistics themselves, remove them from STATISTICS_ELSEWHERE: {stale}"
    assert users - STATISTICS_ELSEWHERE == set(), "statistics outside pr1_eval/stats (move them there)"
    reach = {d for m, deps in TYPE_GRAPH.items() if m.startswith("pr1_eval.stats") for d in deps}
    assert {d for d in reach if not d.startswith("pr1_eval.stats")} <= {"pr1_eval.errors"}


def test_the_analysis_engine_knows_nothing_of_the_analysis() -> None:
    """``analysis.engine`` imports nothing else from ``analysis``; only :data:`ORCHESTRATION` imports it."""
    engine_out = {(m, d) for m, deps in TYPE_GRAPH.items() if m.startswith("analysis.engine") for d in deps
                  if d.startswith("analysis") and not d.startswith("analysis.engine")}
    assert engine_out == set()
    users = {m for m, deps in TYPE_GRAPH.items() if not m.startswith("analysis.engine")
             and any(d.startswith("analysis.engine") for d in deps)}
    assert users - ORCHESTRATION == set(), "only the orchestration modules may import analysis.engine"


def test_the_measures_are_plain_functions() -> None:
    """A measure imports no engine, no thread and no process pool: how it runs at scale is
    :mod:`analysis.pipeline.scheduled`'s business."""
    for measure in MEASURES:
        assert measure in IMPORTS, f"{measure} is listed as a measure but does not exist"
        bad = sorted({i.target for i in IMPORTS[measure]
                      if i.target.startswith("analysis.engine") or i.target in ("threading", "concurrent", "multiprocessing")})
        assert not bad, f"{measure} imports {bad}"


def test_repro_writes_step_runs_through_the_shared_layout_not_the_importer() -> None:
    """repro's rollout writer and ``import-verl`` share the step runs' layout through
    :mod:`pr1_eval.ingest.training_layout`, below both; repro reaches into no importer's module."""
    borrowed = {(m, d) for m, deps in TYPE_GRAPH.items() if m.startswith("repro.") for d in deps
                if d.startswith("pr1_eval.ingest.") and d != "pr1_eval.ingest.training_layout"}
    assert borrowed == set()
    assert {"pr1_eval.ingest.training_layout"} <= GRAPH["pr1_eval.ingest.verl_import"]
    assert any("pr1_eval.ingest.training_layout" in deps for m, deps in GRAPH.items() if m.startswith("repro."))


def test_test_fixtures_stay_out_of_the_runtime_path() -> None:
    """Only the commands that build tiny models (``demo``, ``tiny-model``, and ``pr1-repro nano``, which
    trains them: its job and its data) reach ``pr1_eval.testing``; repro's fakes are imported only by
    repro's testing package."""
    fixture_users = {m for m, deps in GRAPH.items() if any(d.startswith("pr1_eval.testing") for d in deps)
                     and not m.startswith("pr1_eval.testing")}
    assert fixture_users == {"pr1_eval.cli.demo", "pr1_eval.cli.tiny_model", "repro.testing", "repro.nano.job",
                             "repro.nano.data"}
    fake_users = {m for m, deps in GRAPH.items() if any(d.startswith("repro.testing") for d in deps)
                  and not m.startswith("repro.testing")}
    # the nano curriculum is the one runtime user: it runs VERL on CPU through repro.testing's platform
    # and rollout (loaded in its child processes by VERL's plugin hook) and samples with its CPU server
    assert fake_users == {"repro.nano.runner", "repro.nano.positions"}


def test_pr1_eval_shows_its_flow_in_folders() -> None:
    flat = sorted(p.name for p in (ROOT / "pr1_eval").glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", *(f"{m}.py" for m in FLAT_BELOW_ALL)]
    folders = {p.name for p in (ROOT / "pr1_eval").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(FLOW), f"a folder without a place in FLOW, or a place without a folder: {folders ^ set(FLOW)}"


# tests/ folders that hold no tests: shared fixtures (importable), data files, the fake vLLM package.
TEST_SUPPORT_FOLDERS = ("support", "data", "fixtures", "fake_vllm")
WHOLE_PROJECT_TESTS = {"test_architecture.py", "test_completeness_surfaces.py", "test_deadlines.py",
                       "test_dependency_floors.py", "test_replaced_runs.py"}


def test_tests_mirror_the_package_folders() -> None:
    """``tests/<package>/<folder>/test_x.py`` tests ``<package>/<folder>/``; the top of ``tests/``
    holds only the tests of the whole project; support folders hold no tests."""
    tests = ROOT / "tests"
    top = {p.name for p in tests.glob("*.py")}
    assert top - {"__init__.py", "conftest.py"} == WHOLE_PROJECT_TESTS
    for support in TEST_SUPPORT_FOLDERS:
        assert not list((tests / support).rglob("test_*.py")), f"tests/{support} holds shared files, not tests"
    misplaced, no_init = [], []
    for file in tests.rglob("test_*.py"):
        folder = file.parent.relative_to(tests)
        if folder == Path(".") or folder.parts[0] in TEST_SUPPORT_FOLDERS:
            continue
        if not (ROOT / folder).is_dir():
            misplaced.append(str(file.relative_to(ROOT)))
        if not (file.parent / "__init__.py").is_file():
            no_init.append(str(folder))
    assert not misplaced, f"test files in a folder the project does not have (tests/X/Y tests X/Y): {misplaced}"
    assert not no_init, f"test folders without __init__.py: {sorted(set(no_init))}"
    assert (tests / "support" / "__init__.py").is_file()


def _test_module_imports(file: Path) -> list[str]:
    """The test modules (``test_*``) that ``file`` imports, by dotted name, at any depth in it."""
    found = []
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [f"{node.module or ''}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else [])
        if isinstance(node, ast.ImportFrom) and node.module and node.module.rpartition(".")[2].startswith("test_"):
            names = [node.module]
        found += [n for n in names if any(part.startswith("test_") for part in n.split("."))]
    return found


def test_test_modules_share_helpers_through_tests_support_only() -> None:
    """A helper two test modules use lives in ``tests/support/``: importing it from another test
    module would run that module's imports (and make its tests look like a library)."""
    borrowed = {str(f.relative_to(ROOT)): names for f in (ROOT / "tests").rglob("*.py")
                if (names := _test_module_imports(f))}
    assert not borrowed, f"move what these import into tests/support/: {borrowed}"


def test_the_test_import_check_sees_both_spellings(tmp_path: Path) -> None:
    file = tmp_path / "test_x.py"
    file.write_text("from tests.a.test_b import helper\nfrom .test_c import other\ndef f():\n    import tests.test_d\n"
                    "from tests.support import parallel_fakes\n")
    assert _test_module_imports(file) == ["tests.a.test_b", "test_c", "tests.test_d"]


def test_the_protocol_has_one_home() -> None:
    """Evaluation and training import the token-level protocol; neither defines tag ids itself."""
    importers = {m for m, deps in GRAPH.items() if any(d.startswith("pr1_eval.protocol") for d in deps)}
    for module in ("pr1_eval.decoding.forkjoin", "pr1_eval.decoding.structured", "repro.agent_loop",
                   "repro.structured_actor", "repro.reward_manager", "pr1_eval.lm_eval_tasks.utils"):
        assert module in importers, module
    for name, file in MODULES.items():
        if not name.startswith("pr1_eval.protocol"):
            assert "convert_tokens_to_ids(" not in file.read_text(encoding="utf-8"), name


def test_one_rule_sizes_every_pool_of_processes() -> None:
    """``default_workers`` is defined once (:mod:`pr1_eval.processes`); each pool holds its settings."""
    defined = sorted(name for name, file in MODULES.items()
                     if any(isinstance(node, ast.FunctionDef) and node.name == "default_workers"
                            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))))
    assert defined == ["pr1_eval.processes"]
