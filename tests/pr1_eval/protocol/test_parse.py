"""The strict format check and block parsing, on hand-written responses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pr1_eval.protocol.parse import outside_paths, parse_structure

GOOD = (
    "Let me think.\n<Parallel>\n<Path>a = 1</Path>\n<Path>a = 2 - 1</Path>\n</Parallel>\n"
    "<Summary>Both give 1.</Summary>\nFinal Answer: 1"
)


def test_well_formed_block_is_parsed_with_offsets() -> None:
    s = parse_structure(GOOD)
    assert s.format_ok and s.error is None
    assert s.has_parallel and s.n_blocks == 1 and s.paths_per_block == [2]
    block = s.blocks[0]
    assert GOOD[block.start : block.start + 10] == "<Parallel>"
    assert GOOD[block.end - 11 : block.end] == "</Parallel>"
    assert [GOOD[p.start : p.end] for p in block.paths] == ["a = 1", "a = 2 - 1"]
    assert block.summary is not None and GOOD[block.summary.start : block.summary.end] == "Both give 1."


def test_text_without_tags_is_well_formed() -> None:
    s = parse_structure("just reasoning\nFinal Answer: 3")
    assert s.format_ok and not s.has_parallel and s.n_blocks == 0


def test_look_alikes_are_plain_text() -> None:
    s = parse_structure("a <Parallelogram> has <path> and <Paths> and <summary>")
    assert s.format_ok and not s.has_parallel


def test_two_blocks_three_paths() -> None:
    text = GOOD + "\n<Parallel><Path>x</Path><Path>y</Path><Path>z</Path></Parallel><Summary>s</Summary>"
    s = parse_structure(text)
    assert s.format_ok and s.paths_per_block == [2, 3]


MALFORMED = {
    "one path": "<Parallel><Path>a</Path></Parallel><Summary>s</Summary>",
    "path outside block": "<Path>a</Path>",
    "summary inside block": "<Parallel><Path>a</Path><Summary>s</Summary><Path>b</Path></Parallel><Summary>s</Summary>",
    "no summary": "<Parallel><Path>a</Path><Path>b</Path></Parallel> then text",
    "tag between close and summary": "<Parallel><Path>a</Path><Path>b</Path></Parallel><Path>c</Path><Summary>s</Summary>",
    "unclosed path": "<Parallel><Path>a</Path><Path>b",
    "unclosed parallel": "<Parallel><Path>a</Path><Path>b</Path>",
    "unclosed summary": "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s",
    "close parallel with open path": "<Parallel><Path>a</Path><Path>b</Parallel><Summary>s</Summary>",
    "nested parallel": "<Parallel><Path>a<Parallel></Path></Parallel>",
    "stray close": "text </Path> more",
    "stray summary close": "</Summary>",
    "stray parallel close": "</Parallel>",
}


def test_each_malformed_case_fails_with_a_located_message() -> None:
    for name, text in MALFORMED.items():
        s = parse_structure(text)
        assert not s.format_ok, name
        assert s.error and "at character" in s.error, name


def test_has_parallel_counts_opened_blocks_even_if_malformed() -> None:
    assert parse_structure(MALFORMED["unclosed path"]).has_parallel
    assert not parse_structure(MALFORMED["path outside block"]).has_parallel


def test_token_positions_from_offsets() -> None:
    text = "ab<Parallel><Path>x</Path><Path>y</Path></Parallel><Summary>s</Summary>"
    # one token per character except that each tag is one token
    import re

    offsets: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        m = re.match(r"</?(Parallel|Path|Summary)>", text[i:])
        j = i + (m.end() if m else 1)
        offsets.append((i, j))
        i = j
    s = parse_structure(text, offsets)
    # tokens: a, b, <Parallel>(2), <Path>(3), x(4), </Path>(5), <Path>(6), y(7), </Path>(8), </Parallel>(9)
    assert s.blocks[0].token_start == 2 and s.blocks[0].token_end == 10


def test_outside_paths_blanks_paths_only() -> None:
    text = "A<Parallel><Path>Final Answer: 9</Path><Path>q</Path></Parallel>B"
    blanked = outside_paths(text)
    assert len(blanked) == len(text) and "Final Answer: 9" not in blanked
    assert blanked.startswith("A<Parallel><Path>") and blanked.endswith("</Parallel>B")
    unclosed = outside_paths("x<Parallel><Path>Final Answer: 2")
    assert "Final Answer" not in unclosed


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["<Parallel>", "</Parallel>", "<Path>", "</Path>", "<Summary>", "</Summary>", "x", "\n",
                                 "<Para", "llel>"]), max_size=30))
def test_never_raises_and_ok_implies_invariants(pieces: list[str]) -> None:
    text = "".join(pieces)
    s = parse_structure(text)
    if s.format_ok:
        assert all(n >= 2 for n in s.paths_per_block)
        assert all(b.closed and b.summary is not None and b.summary.closed for b in s.blocks)
    assert parse_structure(None).format_ok  # type: ignore[arg-type]
