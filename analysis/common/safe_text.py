"""Untrusted text as literal text, for every surface that shows run data.

Everything a run or an import carries — responses, problem texts, task names, problem ids,
model paths and families, finish reasons, run names, notes built from them — is untrusted: it
was written by a model or by whoever produced the file. Each surface gets one function here,
so every page escapes the same way and a test can attack each function directly:

- :func:`html_text` for HTML pages (``leaderboard --html``): ``html.escape`` with quotes.
  HTML never turns a bare URL into a link, so escaping is all it needs.
- :func:`plot_text` for plotly labels, legend names, tick values, hover text and titles on the
  dashboard, in ``leaderboard --html``, ``analyze``'s pages and notebooks. plotly.js draws
  labels as SVG and understands a few tags (``<a href>``, ``<b>``, ``<br>``, ``<span style>``…),
  splitting on ``<…>`` *before* it decodes entities; it also typesets ``$…$`` as LaTeX when
  MathJax is on the page. So ``&``, ``<``, ``>`` and ``$`` become entities: plotly draws them as
  the characters, and no tag (hence no link) and no formula can come from data. plotly has no
  autolinking (its only anchors come from ``<a>`` tags; checked against plotly.js 3 in plotly 7),
  so bare URLs stay exactly as written. The figure JSON that plotly embeds in a ``<script>``
  block escapes ``<`` as ``\\u003c`` itself, so ``</script>`` in an id cannot end that block.
- :func:`markdown_text` for the few places Streamlit only offers Markdown (``st.table`` cells,
  captions, alerts, metric values, link labels). Streamlit's Markdown is GitHub-flavoured with
  *autolink literals*: ``https://…``, ``www.…`` and ``name@host.tld`` become links, and that pass
  runs on the parsed text, after backslash escapes are resolved, so escaping ``:`` is not enough.
  Streamlit also turns ``:name:`` into emoji, ``:material/x:`` into icons and
  ``:red[…]`` into coloured text on the parsed text. So, after backslash-escaping every Markdown
  character, :func:`break_autolinks` puts an invisible U+2060 WORD JOINER after ``://``, inside
  ``www.`` and after ``@`` (none of them can then start or continue an autolink), and after a
  ``:`` that a letter or ``/`` follows (no shortcode or directive can open).

- :func:`analysis.engine.csv_text.csv_cell` for CSV files (``analyze``'s tables, ``leaderboard --csv``),
  kept beside the CSV writer that applies it to every string cell: a spreadsheet
  reads a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return as a
  formula (``=HYPERLINK(…)``, ``=cmd|…``), so, as OWASP advises for CSV injection, such a *string*
  cell gets a leading ``'``, after which a spreadsheet reads the cell as text. The rule touches
  string cells only: numbers in numeric columns (``-1.5``, ``-inf``) are written as they are, and so
  is a string that is a plain decimal number (``-1.5``, ``+3``, ``1e-5``), which a spreadsheet
  reads as that number, never as a formula. Column labels are cells too and follow the same rule.
- :func:`terminal_text` (from :mod:`pr1_eval.terminal`, where ``report`` and ``sweep`` use it
  too) for data printed to a terminal: every control character is shown as its escape, so no
  escape sequence from data runs.

Why a word joiner, and why only there: the decision is to keep the text readable and, as far
as possible, copy-pasteable. The joiner is invisible, takes no width, does not add a line break
opportunity and does not change how neighbours are drawn (a zero-width *joiner*, U+200D, can
glue emoji together; a zero-width *space* lets the line break inside a URL). It is inserted only
where Markdown would otherwise act, so most text copies byte for byte; a copied URL-like string
from a Markdown label carries the joiner, which is right for an untrusted address (it will not
open by accident). Wherever exact copying matters — the response, the problem, the gold answer,
answers, ids in the trace viewer — the dashboard uses elements that never interpret text
(``st.text``, ``st.code``, ``st.dataframe``) and shows the text unchanged.
"""

from __future__ import annotations

import html
import re
from typing import Any

from pr1_eval.terminal import terminal_text as terminal_text  # re-exported: one rule for every surface

WORD_JOINER = "\u2060"
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~$:&=])")
_MD_LINE_START = re.compile(r"^(\s*)(\d*)([-.])(?=\s|$)")
_MD_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()<>#+!|~$:&=.\-])")
#: Where an autolink literal, a shortcode or a Streamlit directive could start (see the module docstring).
_LINK_STARTS = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?<=@)|(?<=:)(?=[a-z/])")


def html_text(value: Any) -> str:
    """``value`` as text for an HTML page (element content or a quoted attribute)."""
    return html.escape(str(value), quote=True)


def plot_text(value: Any) -> str:
    """``value`` as text for any plotly string (trace name, category, tick, hover, title)."""
    return (str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("$", "&#36;"))


def plot_texts(values: Any) -> list[str]:
    """:func:`plot_text` of each value (x/y categories, tick labels)."""
    return [plot_text(v) for v in values]


def plot_frame(frame: Any, columns: Any) -> Any:
    """A copy of a pandas ``frame`` with ``columns`` through :func:`plot_text`, for plotly express:
    ``px.line(plot_frame(points, ["task", "model_family"]), color="task", …)`` puts those
    values into legends and hover text, where plotly would otherwise draw their tags."""
    return frame.assign(**{c: [plot_text(v) for v in frame[c]] for c in columns if c in frame})


def break_autolinks(text: str) -> str:
    """``text`` with a word joiner wherever GFM would start an autolink literal (``://``,
    ``www.``, ``@``) or Streamlit a shortcode/directive (``:`` before a letter or ``/``)."""
    return _LINK_STARTS.sub(WORD_JOINER, text)


def markdown_text(value: Any) -> str:
    """``value`` for a Markdown element, shown literally: every Markdown/HTML character
    backslash-escaped (and a leading list marker), newlines flattened, a joiner before leading
    whitespace (no indented code block), autolinks broken."""
    flat = str(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    escaped = _MD_SPECIAL.sub(r"\\\1", flat)
    escaped = _MD_LINE_START.sub(lambda m: f"{m.group(1)}{m.group(2)}\\{m.group(3)}", escaped)
    if escaped[:1].isspace():  # indentation would make a code block (or vanish): a joiner keeps it text
        escaped = WORD_JOINER + escaped
    return break_autolinks(escaped)


def markdown_plain(text: str) -> str:
    """What a reader sees of :func:`markdown_text`'s output (escapes and joiners removed)."""
    return _MD_ESCAPED.sub(r"\1", text).replace(WORD_JOINER, "")
