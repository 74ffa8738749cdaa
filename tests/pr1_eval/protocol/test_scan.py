"""The fast structure scans agree with the general parser on every text, well-formed or not."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pr1_eval.protocol.parse import Structure, parse_structure
from pr1_eval.protocol.scan import count_blocks, scan_well_formed
from tests.support.tag_texts import PIECES, TAGS, mutated, well_formed


def _blocks_of(structure: Structure) -> list[tuple[object, ...]]:
    return [(b.start, b.end, b.closed, [(p.start, p.end, p.closed) for p in b.paths],
             None if b.summary is None else (b.summary.start, b.summary.end, b.summary.closed))
            for b in structure.blocks]


def _scanned_as_parsed(text: str) -> list[tuple[object, ...]] | None:
    scanned = scan_well_formed(text)
    if scanned is None:
        return None
    for block in scanned:  # the contents are the spans' text
        assert block.path_contents == [text[s:e] for s, e in block.path_spans]
        assert block.summary_content == text[block.summary_span[0]:block.summary_span[1]]
    return [(b.start, b.end, True, [(s, e, True) for s, e in b.path_spans], (*b.summary_span, True))
            for b in scanned]


def _check(text: str) -> None:
    structure = parse_structure(text)
    assert count_blocks(text) == structure.n_blocks
    scanned = _scanned_as_parsed(text)
    assert (scanned is not None) == structure.format_ok, (text, structure.error)
    if scanned is not None:
        assert scanned == _blocks_of(structure)


def test_hand_written_cases() -> None:
    for text in [
        "", "no tags at all", "<Parallel>", "</Parallel>", "<Path>stray</Path>",
        "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>",
        "<Parallel><Path>a</Path><Path>b</Path></Parallel>",  # no summary
        "<Parallel><Path>a</Path></Parallel><Summary>s</Summary>",  # one path
        "<Parallel><Path>a</Path><Path>b</Path></Parallel> text <Summary>s</Summary> after",
        "<Parallel><Path>a<Parallel><Path>b</Path><Path>c</Path></Parallel><Summary>s</Summary>",  # nested
        "<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s",  # unclosed summary
        "<Parallel><Path>a</Path><Path>b",  # cut off in a path
        "<Summary>orphan</Summary><Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>",
        "<Parallel><Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>",
        "x <Parallelogram> <path> <<Parallel><Path>1</Path><Path>2</Path></Parallel><Summary></Summary>",
    ]:
        _check(text)


def test_generated_well_formed_and_broken_texts() -> None:
    rng = random.Random(21)
    n_broken = 0
    for _ in range(3000):
        text = well_formed(rng)
        _check(text)
        for _ in range(3):
            broken = mutated(rng, text)
            _check(broken)
            n_broken += not parse_structure(broken).format_ok
    assert n_broken > 3000  # the mutations do reach the parser's error branches


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TAGS + PIECES), max_size=30))
def test_any_sequence_of_tags_and_text(pieces: list[str]) -> None:
    _check("".join(pieces))
