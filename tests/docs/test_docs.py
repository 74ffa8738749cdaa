"""The docs site: its generated tables list every option and field the code has, every command has
a page, the README keeps the commands CI runs, and ``mkdocs build --strict`` fails on a broken link.

The generated tables come from ``docs/_gen/reference.py`` (loaded here by path: docs/ is no
package). Each check compares them with what the code exposes through another door: an option
with the flags ``--help`` prints, a sample field with the parquet schema the store writes, a
``run.json`` key with what the record serialises, a report key with ``json_schema()``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tests.support.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GEN = DOCS / "_gen"


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GEN / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


reference = _load("reference")


@pytest.fixture(scope="module")
def parsers() -> dict[str, object]:
    return reference.command_parsers()


def test_every_command_of_both_programs_is_documented(parsers: dict[str, object]) -> None:
    """pr1-eval's own commands, its three plugins and pr1-repro's commands each have an options
    marker on a page the nav lists."""
    assert {"pr1-eval run", "pr1-eval analyze", "pr1-eval leaderboard", "pr1-eval dashboard",
            "pr1-repro nano"} <= set(parsers)
    pages = {p: p.read_text(encoding="utf-8") for p in (DOCS / "usage").glob("*.md")}
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for command in parsers:
        holders = [p for p, text in pages.items() if f"<!-- options: {command} -->" in text]
        assert holders, f"no docs/usage page carries <!-- options: {command} -->"
        assert f"usage/{holders[0].name}" in nav, f"{holders[0]} is not in mkdocs.yml's nav"


def test_each_option_table_lists_every_flag_the_usage_names(parsers: dict[str, object]) -> None:
    for command, parser in parsers.items():
        table = reference.options_markdown(command, parser)
        usage = parser.format_usage()  # type: ignore[attr-defined]  # every option, as --help's first lines
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", usage)) - {"-h", "--help"}
        assert flags or command == "pr1-eval lm-eval-path" or command == "pr1-repro stages", command
        missing = sorted(f for f in flags if f"`{f}" not in table and f", {f}" not in table)
        assert not missing, f"{command}: options in --help but not in the docs table: {missing}"


def test_the_run_options_table_shows_defaults_and_choices(parsers: dict[str, object]) -> None:
    table = reference.options_markdown("pr1-eval run", parsers["pr1-eval run"])
    row = next(line for line in table.splitlines() if line.startswith("| `--max-new-tokens`"))
    assert "| 3000 |" in row  # the paper's budget, as the parser declares it
    decoding = next(line for line in table.splitlines() if line.startswith("| `--decoding`"))
    assert "sequential \\| forkjoin \\| structured" in decoding


def test_the_sample_table_lists_every_stored_column() -> None:
    from pr1_eval.records.sample import SAMPLE_SCHEMA

    table = reference.sample_markdown()
    assert [name for name in SAMPLE_SCHEMA.names if f"| `{name}` |" not in table] == []


def test_the_run_record_tables_list_every_key_run_json_holds() -> None:
    from pr1_eval.records.run import ModelInfo, PromptInfo, RunRecord, TaskEntry

    record = RunRecord(model=ModelInfo(path="m"), tasks={"t": TaskEntry(k=1)}, prompt=PromptInfo(name="p"))
    written = record.to_dict()
    tables = reference.run_record_markdown()
    keys = set(written) | set(written["model"]) | set(written["tasks"]["t"]) | set(written["prompt"])
    assert sorted(k for k in keys if f"| `{k}` |" not in tables) == []
    for cls in (ModelInfo, TaskEntry, PromptInfo):
        assert f"`{cls.__module__}.{cls.__name__}`" in tables


def test_field_documentation_is_read_from_metadata_and_comments() -> None:
    """A field's text comes from ``metadata['doc']`` (SampleRecord) or its source comment (RunRecord)."""
    table = reference.sample_markdown()
    assert "| `sample_idx` | int | required | 0-based index of this sample among the k samples" in table
    run = reference.run_record_markdown()
    assert "| `imported_from` | str \\| None | None | the file an import read |" in run


def test_the_report_tables_list_every_report_json_key() -> None:
    from pr1_eval.report.schema import json_schema

    schema = json_schema()
    tables = reference.report_markdown()
    keys = [*schema["run"], *schema["task"], *schema["metrics"]]
    assert "mean@K" in keys and "best@K_paper" in keys
    assert [k for k in keys if f"| `{k}` |" not in tables] == []


def test_the_leaderboard_tables_list_every_document_key() -> None:
    from analysis.leaderboard.schema import Comparison, Excluded, LeaderboardDocument, RunRow

    tables = reference.leaderboard_markdown()
    for cls in (LeaderboardDocument, RunRow, Comparison, Excluded):
        assert [k for k in cls.__annotations__ if f"| `{k}` |" not in tables] == [], cls.__name__


def test_every_marker_in_the_pages_expands() -> None:
    hooks = _load("hooks")
    for page in DOCS.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        fake = SimpleNamespace(file=SimpleNamespace(src_uri=str(page.relative_to(DOCS))))
        out = hooks.on_page_markdown(text, fake, None, None)
        assert "<!-- options:" not in out and "<!-- schema:" not in out, page
    with pytest.raises(ValueError, match="no command 'pr1-eval nothing'"):
        hooks.on_page_markdown("<!-- options: pr1-eval nothing -->", fake, None, None)


def test_the_readme_is_short_and_starts_with_the_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    install = next(line for line in ci.splitlines() if line.startswith("python3 -m venv .venv"))
    assert first_block[0] == install.removesuffix(" \\").strip()
    assert first_block[1:] == ["pr1-eval demo", "pytest -q"]
    assert "\npr1-eval demo\n" in ci and "\npytest -q 2>&1" in ci


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_relative_links_of_the_root_pages_resolve(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert targets
    broken = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert broken == []


def _mkdocs_build(config_dir: Path, site: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=config_dir, capture_output=True, text=True, timeout=scaled(300))


def test_the_site_builds_strict_and_carries_the_generated_tables(tmp_path: Path) -> None:
    done = _mkdocs_build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    run_page = (tmp_path / "site" / "usage" / "run" / "index.html").read_text(encoding="utf-8")
    assert "<code>--decoding</code>" in run_page and "<code>--answer-policy</code>" in run_page
    assert (tmp_path / "site" / "training" / "repro" / "index.html").is_file()


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    """The pages copied beside a config that differs only in where the pages are (the hooks and the
    carried files stay the checkout's), one page given a link to no page and one to no anchor."""
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("_gen", "__pycache__"))
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.replace("docs_dir: docs", f"docs_dir: {tmp_path / 'docs'}")
    config = config.replace("  - docs/_gen/hooks.py", f"  - {GEN / 'hooks.py'}")
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    page = tmp_path / "docs" / "usage" / "merge.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](no-such-page.md), [lost](run.md#no-such-part)\n",
                    encoding="utf-8")
    done = _mkdocs_build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "#no-such-part" in done.stderr
    assert done.stderr.count("WARNING") == 2, done.stderr  # nothing else in the copy is broken


#: Number words the docs use for small counts.
_NUMBER_WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def test_the_dashboard_page_lists_every_page_and_says_how_many() -> None:
    """docs/usage/dashboard.md said "The six pages" after a seventh (Efficiency) was added, and its
    list lacked it: the count and the list are checked against the app's own page table."""
    from dashboards.app import PAGES

    text = (DOCS / "usage" / "dashboard.md").read_text(encoding="utf-8")
    assert f"The dashboard has {_NUMBER_WORDS[len(PAGES)]} pages" in text
    assert [title for _, title, _ in PAGES if f"- **{title}**" not in text] == []
    stale = [n for n, word in _NUMBER_WORDS.items() if n != len(PAGES) and re.search(rf"\b{word} pages\b", text, re.I)]
    assert stale == [], f"another page count is written: {stale}"


def test_no_page_states_a_test_count() -> None:
    """install.md said "1,665 tests" while 1,716 were collected: a count written by hand goes stale
    with the next test, so none is written (``pytest --co -q`` counts them)."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS.rglob("*.md")]
    counted = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages
               for m in re.finditer(r"\b\d{1,2},?\d{3} tests\b", p.read_text(encoding="utf-8"))]
    assert counted == []
