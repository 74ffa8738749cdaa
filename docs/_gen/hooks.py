"""MkDocs hooks (``hooks:`` in mkdocs.yml): the generated parts of the site.

* A page line ``<!-- options: pr1-eval run -->`` becomes that command's option table and
  ``<!-- schema: run -->`` a record's field tables (:mod:`reference`, from the code, so they
  cannot drift from it). On GitHub the marker is an invisible comment and the page's own text
  names the ``--help`` to read instead.
* ``repro/README.md`` (the training guide), the lm-eval tasks' and the packaged data's READMEs
  (each kept beside what it describes) and ``CONTRIBUTING.md`` become pages of the site. A docs page
  links to such a file where it lives in the repository (``../repro/README.md``), so the link works
  on GitHub and in a clone (``tests/docs/test_links.py`` checks every relative link that way), and
  :func:`site_links` rewrites it to the page the site makes of it, which ``--strict`` then checks
  like any other link.

A marker naming no command or schema fails the build, naming the page.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (ROOT, HERE):  # the checkout's packages first, and this folder's reference module
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import reference  # noqa: E402  (after the path above)

MARKER = re.compile(r"<!--\s*(options|schema):\s*([\w -]+?)\s*-->")
#: Files outside docs/ that the site carries: (source in the checkout, page path, link rewrites).
CARRIED = (("repro/README.md", "training/repro.md", ()),
           ("pr1_eval/lm_eval_tasks/README.md", "guides/lm-eval-tasks.md", ()),
           ("pr1_eval/data/README.md", "reference/data.md", ()),
           ("CONTRIBUTING.md", "contributing.md", (("](docs/", "]("),)))

_parsers: dict[str, Any] = {}
#: A Markdown link target: ``](target)`` or ``](target#anchor)``.
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def site_links(markdown: str, src_uri: str) -> str:
    """Links of the docs page ``src_uri`` to a carried file (by its repository path, relative to
    the page) rewritten to the site page made of it; every other link is left as written."""
    page_dir = posixpath.dirname(posixpath.join("docs", src_uri))
    pages = {source: page for source, page, _ in CARRIED}

    def rewrite(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(page_dir, match[1]))
        if target not in pages:
            return match[0]
        site_target = posixpath.relpath(pages[target], posixpath.dirname(src_uri) or ".")
        return f"]({site_target}{match[2] or ''})"

    return LINK.sub(rewrite, markdown)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for source, page, rewrites in CARRIED:
        text = (ROOT / source).read_text(encoding="utf-8")
        for old, new in rewrites:
            text = text.replace(old, new)
        files.append(File.generated(config, page, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def expand(match: re.Match[str]) -> str:
        kind, name = match[1], match[2]
        if kind == "schema":
            if name not in reference.SCHEMAS:
                raise ValueError(f"{page.file.src_uri}: no schema {name!r} (known: {', '.join(reference.SCHEMAS)})")
            return reference.SCHEMAS[name]()
        if not _parsers:
            _parsers.update(reference.command_parsers())
        if name not in _parsers:
            raise ValueError(f"{page.file.src_uri}: no command {name!r} (known: {', '.join(_parsers)})")
        return reference.options_markdown(name, _parsers[name])

    return site_links(MARKER.sub(expand, markdown), page.file.src_uri)
