"""One block layout: the SFT builder writes blocks exactly as fork-join does, so the structured mask
assigns every token of a block to one path and ``</Parallel>`` sits at p + longest path + 1.

Real rows: the Parallel-GSM8K slice in ``tests/fixtures`` (provenance in its README)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.layout import count_layout_deviations, normalise_block_layout
from pr1_eval.protocol.mask import structured_layout
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.tags import resolve_tag_ids

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "parallel_gsm8k.jsonl"


def test_normaliser_rewrites_only_the_joins() -> None:
    raw = ("Plan.\n\n<Parallel>\n<Path>\n a = 1\n</Path>\n \n<Path> b = 2 </Path>\n</Parallel>  \n<Summary> both </Summary>"
           "\nFinal Answer: 3")
    assert normalise_block_layout(raw) == (
        "Plan.\n\n<Parallel><Path>\n a = 1\n</Path><Path> b = 2 </Path></Parallel>\n<Summary> both </Summary>"
        "\nFinal Answer: 3"
    )
    assert normalise_block_layout("x</Parallel><Summary>y") == "x</Parallel>\n<Summary>y"
    kept = "<Parallel><Path>a</Path><Path>b</Path></Parallel>\nBoth paths agree.<Summary>s</Summary>"
    assert normalise_block_layout(kept) == kept  # text between </Parallel> and <Summary> is content: kept
    assert normalise_block_layout("<path>\n<Path>") == "<path>\n<Path>"  # look-alike tags are plain text
    twice = normalise_block_layout(raw)
    assert normalise_block_layout(twice) == twice


@pytest.fixture(scope="module")
def sft_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from pr1_eval.inputs.prompts import load_template
    from repro.data import build_sft

    raw = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    rows, _ = build_sft(raw, load_template(), "response")
    return raw, rows


def test_sft_rows_have_no_whitespace_joins_left(sft_rows: Any) -> None:
    raw, rows = sft_rows
    before = [count_layout_deviations(str(r["response"])) for r in raw]
    assert sum(c.total for c in before) > 60, "the slice has the newline joins the issue counts"
    assert min(c.parallel_path + c.path_path + c.path_parallel for c in before if c.total) > 0
    after = [count_layout_deviations(row["messages"][-1]["content"]) for row in rows]
    assert sum(c.total for c in after) == 0
    assert len(rows) == len(raw) - 1  # normalising keeps every well-formed row (one fails the format check)
    for original, row in zip([r for r in raw if parse_structure(str(r["response"])).format_ok], rows, strict=True):
        text = row["messages"][-1]["content"]
        assert parse_structure(text).paths_per_block == parse_structure(str(original["response"])).paths_per_block
        assert "".join(text.split()) == "".join(str(original["response"]).split()), "only whitespace changed"


def test_every_parallel_close_sits_at_p_plus_longest_path_plus_one(sft_rows: Any) -> None:
    from transformers import AutoTokenizer

    from repro.testing import tiny_model_dir

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    tags = resolve_tag_ids(tokenizer)
    _, rows = sft_rows
    checked = 0
    for row in rows:
        ids = tokenizer.encode(row["messages"][-1]["content"], add_special_tokens=False)
        layout = structured_layout(ids, tags)
        blocks: dict[int, list[tuple[int, int]]] = {}
        for (block, _), span in layout.paths.items():
            blocks.setdefault(block, []).append(span)
        for spans in blocks.values():
            spans.sort()
            p = spans[0][0] - 1
            close = spans[-1][1]
            assert ids[p] == tags[T.PARALLEL_OPEN] and ids[close] == tags[T.PARALLEL_CLOSE]
            for start, end in spans:  # a path is exactly <Path> … </Path>: no token left between blocks' tags
                assert ids[start] == tags[T.PATH_OPEN] and ids[end - 1] == tags[T.PATH_CLOSE]
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), "paths are adjacent"
            longest = max(end - start for start, end in spans)
            assert int(layout.positions[close]) == int(layout.positions[p]) + longest + 1
            checked += 1
    assert checked >= 30
