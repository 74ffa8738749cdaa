"""Every relative link of the pages a reader opens outside the site resolves to a file in the
repository: on GitHub and in a clone a link is followed as a path, so a link that only the built
site resolves (a page the docs hooks generate, such as ``training/repro.md``) is dead there.

The site side is :mod:`docs._gen.hooks`: a docs page links to the carried file where it lives
(``../repro/README.md``) and the hook rewrites that link to the page the site makes of it; the
``mkdocs build --strict`` test in ``test_docs.py`` checks the site's links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The pages read on GitHub and in a clone: the README, the docs, and the files the site carries.
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "repro" / "README.md",
                ROOT / "pr1_eval" / "lm_eval_tasks" / "README.md", ROOT / "pr1_eval" / "data" / "README.md",
                *(ROOT / "docs").rglob("*.md")])
#: A Markdown link or image: ``[text](target)`` / ``![alt](target "title")``; code spans are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def relative_links(text: str) -> list[str]:
    """The relative link targets of a Markdown text (no scheme, no bare anchor), outside code."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` whose file (anchor and query dropped) is not inside ``root``."""
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (page.parent / path).resolve()
        if not resolved.exists() or root.resolve() not in (resolved, *resolved.parents):
            broken.append(target)
    return broken


def test_the_link_reader_finds_links_and_skips_code_and_urls() -> None:
    text = ("See [run](usage/run.md#resume) and ![fig](img/a.png \"A\"), not `[x](code.md)`, "
            "[web](https://example.org/x.md), [top](#top) or [mail](mailto:a@b.c).\n"
            "```\n[fenced](fenced.md)\n```\n")
    assert relative_links(text) == ["usage/run.md#resume", "img/a.png"]


def test_a_link_to_a_page_only_the_site_makes_is_reported(tmp_path: Path) -> None:
    """The kind of link this test exists for: ``training/repro.md`` from docs/ is a site page."""
    fake = tmp_path / "docs" / "page.md"
    fake.parent.mkdir()
    (tmp_path / "README.md").write_text("# top\n", encoding="utf-8")
    fake.write_text("[training](training/repro.md), [ok](page.md), [up](../README.md#top), "
                    "[outside](../../elsewhere.md)\n", encoding="utf-8")
    (tmp_path.parent / "elsewhere.md").write_text("x\n", encoding="utf-8")
    assert broken_links(fake, tmp_path) == ["training/repro.md", "../../elsewhere.md"]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves_to_a_file_in_the_repository(page: Path) -> None:
    assert broken_links(page) == [], f"{page.relative_to(ROOT)}: dead outside the built site"


def test_the_site_hook_sends_a_link_to_a_carried_file_to_its_site_page() -> None:
    """The other half: in the built site, ``../../repro/README.md#install`` from docs/usage/ is the
    page the hook makes of repro/README.md; a link to any other file is left as written."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks_for_links", ROOT / "docs" / "_gen" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = "[a](../../repro/README.md#install) [b](run.md) [c](../../CONTRIBUTING.md) [d](../../pr1_eval/data/README.md)"
    assert hooks.site_links(text, "usage/x.md") == (
        "[a](../training/repro.md#install) [b](run.md) [c](../contributing.md) [d](../reference/data.md)")
    assert hooks.site_links("[t](../repro/README.md)", "index.md") == "[t](training/repro.md)"
