"""The fast structure scans agree with the general parser on every text, well-formed or not."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pr1_eval.protocol.parse import Structure, parse_structure
from pr1_eval.protocol.scan import count_blocks, scan_well_formed

TAGS = ["<Parallel>", "</Parallel>", "<Path>", "</Path>", "<Summary>", "</Summary>"]
#: Plain text, look-alikes and broken tags the parser must read as text.
PIECES = ["", " ", "\n", "x = 1", "a<b", "<Parallelogram>", "<path>", "</Paths>", "<Parallel", "Path>",
          "<<", "</", "Final Answer: 3", "\\boxed{7}", "<Summary >", "é ∑"]


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


def _well_formed(rng: random.Random) -> str:
    out = [rng.choice(PIECES)]
    for _ in range(rng.randint(0, 4)):
        out.append("<Parallel>" + rng.choice(PIECES))
        for _ in range(rng.randint(2, 5)):
            out.append(f"<Path>{rng.choice(PIECES)} {rng.choice(PIECES)}</Path>{rng.choice(PIECES)}")
        out.append(f"</Parallel>{rng.choice(PIECES)}<Summary>{rng.choice(PIECES)}</Summary>{rng.choice(PIECES)}")
    return "".join(out)


def _mutated(rng: random.Random, text: str) -> str:
    """A well-formed text with a tag dropped, doubled, moved or cut off at a random point."""
    kind = rng.randrange(4)
    if kind == 0:
        return text[:rng.randint(0, len(text))]
    at = rng.randint(0, len(text))
    if kind == 1:
        return text[:at] + rng.choice(TAGS) + text[at:]
    tag = rng.choice(TAGS)
    if kind == 2:
        return text.replace(tag, "", 1)
    return text.replace(tag, tag + tag, 1)


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
        text = _well_formed(rng)
        _check(text)
        for _ in range(3):
            broken = _mutated(rng, text)
            _check(broken)
            n_broken += not parse_structure(broken).format_ok
    assert n_broken > 3000  # the mutations do reach the parser's error branches


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TAGS + PIECES), max_size=30))
def test_any_sequence_of_tags_and_text(pieces: list[str]) -> None:
    _check("".join(pieces))
