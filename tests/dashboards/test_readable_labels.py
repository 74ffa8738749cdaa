"""What the newcomer's dashboard screenshots showed, fixed where the words are made: the Behaviour
bar labels carried the whole ``complete`` cell (cut at the plot's edge); the trace viewer showed
problem LaTeX raw and measured paths in characters under a block header in tokens; runs imported
as ``runs/qwen3-8b/aime24`` were named ``aime24``, like their task. The pages themselves are
checked in headless Chromium by ``test_browser.py`` (the hostile problem text stays literal)."""

from __future__ import annotations

from pathlib import Path

from analysis.common.completeness import MARK
from analysis.common.safe_text import markdown_plain
from analysis.runs.loader import run_label
from dashboards.components import latex_markdown, path_length
from dashboards.tables import bar_label


def test_bar_labels_carry_only_the_marks_of_the_complete_cell() -> None:
    assert bar_label("killme", "aime25", "yes ⚠ --limit: the first 6 of 30 problems (--limit 6)") == \
        "killme · aime25 ⚠ --limit"
    assert bar_label("run", "t", "yes") == "run · t"
    assert bar_label("run", "t", f"{MARK} ⚠ --limit: the first 2 of 30 problems") == f"run · t {MARK} ⚠ --limit"


def test_problem_formulas_are_typeset_and_everything_else_stays_literal() -> None:
    text = "Find all bases $b>9$ for which $17_b$ divides $97_b.$\n**not bold** [x](https://evil.example)"
    shown = latex_markdown(text)
    assert "$b>9$" in shown and "$17_b$" in shown and "$97_b.$" in shown  # formulas kept for KaTeX
    assert "\\*\\*not bold\\*\\*" in shown and "\\[x\\]" in shown  # Markdown from data escaped
    assert "  \n" in shown  # the line break kept
    assert markdown_plain(shown.replace("  \n", "\n")).replace("$", "") == text.replace("$", "")
    # a formula that could reach outside itself is left as literal text (its dollars escaped)
    hostile = latex_markdown("see $\\href{https://evil.example}{here}$ and $x@y$")
    assert "\\$" in hostile and "$\\href" not in hostile.replace("\\$", "")


def test_path_lengths_follow_the_block_header_unit() -> None:
    assert path_length({"path_token_lengths": [12, 30], "token_start": 4}, 1, "x" * 99) == "30 tokens"
    assert path_length({"path_token_lengths": None, "token_start": 4}, 0, "abc") == \
        "3 characters (no tokenizer for path tokens)"
    assert path_length({"path_token_lengths": None, "token_start": None}, 0, "abc") == "3 characters"


def test_a_run_named_like_its_task_is_shown_with_its_folder() -> None:
    assert run_label("aime24", Path("/x/runs/qwen3-8b/aime24"), ["aime24"]) == "qwen3-8b/aime24"
    assert run_label("tiny-k4", Path("/x/runs/tiny-k4"), ["aime24", "amc23"]) == "tiny-k4"
