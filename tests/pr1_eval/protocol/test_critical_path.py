"""The critical path from the parse against counts made here from the raw text with regular
expressions (no parser): responses with designed path lengths, in characters and in tokens."""

from __future__ import annotations

import re

import pytest

from pr1_eval.grading.annotate import annotate_structure
from pr1_eval.protocol.critical_path import path_lengths, text_path_lengths
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.records.sample import SampleRecord
from tests.support.analysis_fixtures import block, response, whitespace_offsets

_BLOCK = re.compile(r"<Parallel>.*?</Parallel>", re.S)
_PATH = re.compile(r"<Path>.*?</Path>", re.S)

TEXTS = [
    response("No blocks at all, just reasoning."),
    response("Start.", block(["a b c d e f", "g"]), "Middle."),
    response("x", block(["one two", "three four five six", "seven"]), "y", block(["p q", "r s"]), "z"),
    response(block(["same length", "same length"])),
    "<Parallel><Path>abc</Path><Path>abcdefgh</Path></Parallel>\n<Summary>s</Summary>done",
]


def _losing(text: str, length: object) -> int:
    """Length of every path shorter than its block's longest, tags included, by regex over the text."""
    total = 0
    for b in _BLOCK.finditer(text):
        sizes = [length(p.group(0)) for p in _PATH.finditer(b.group(0))]  # type: ignore[operator]
        total += sum(sizes) - max(sizes)
    return total


@pytest.mark.parametrize("text", TEXTS)
def test_characters_match_a_regex_count(text: str) -> None:
    found = text_path_lengths(text)
    assert found is not None and found.unit == "char"
    assert found.response_length == len(text)
    assert found.critical_path == len(text) - _losing(text, len)
    assert found.losing_path_length == _losing(text, len)


@pytest.mark.parametrize("text", TEXTS)
def test_tokens_match_a_whitespace_count(text: str) -> None:
    """Whitespace tokens (tags on their own lines are one token each): a path's tokens are the words
    of its tagged text."""
    found = path_lengths(parse_structure(text), whitespace_offsets(text))
    n_tokens = len(text.split())
    assert found is not None and found.unit == "token" and found.response_length == n_tokens
    if "<Parallel><Path>" not in text:  # tags glued to words are not whitespace tokens of their own
        assert found.critical_path == n_tokens - _losing(text, lambda s: len(s.split()))


def test_designed_lengths_by_hand() -> None:
    text = "ab<Parallel><Path>xyz</Path><Path>x</Path></Parallel>\n<Summary>s</Summary>end"
    found = text_path_lengths(text)
    assert found is not None
    assert (found.response_length, found.losing_path_length) == (77, len("<Path>x</Path>"))
    assert found.critical_path == 77 - 14


def test_a_cut_off_path_counts_to_the_end_of_the_text() -> None:
    text = "a<Parallel><Path>" + "l" * 30 + "</Path><Path>" + "s" * 5  # the second path is cut off
    found = text_path_lengths(text)
    assert found is not None
    assert found.losing_path_length == len("<Path>") + 5  # shorter: its open tag and five characters
    assert found.critical_path == len(text) - found.losing_path_length


def test_no_text_has_no_lengths_and_annotation_clears_them() -> None:
    assert text_path_lengths("") is None and text_path_lengths(None) is None
    record = SampleRecord(task="t", problem_id="p", sample_idx=0, response="",
                          critical_path=5, response_length=5, losing_path_length=0, length_unit="char")
    annotate_structure(record)
    assert (record.critical_path, record.response_length, record.losing_path_length, record.length_unit) == (
        None, None, None, None)


@pytest.mark.parametrize("text", ["</Path><Path>", "<Path>a</Path>", "<Parallel>", "<Parallel><Path></Path>",
                                  "</Summary></Parallel><Summary>", "<Parallel><Path>a<Parallel><Path>bb"])
def test_malformed_text_never_raises_and_stays_in_range(text: str) -> None:
    for offsets in (None, whitespace_offsets(text), [(i, i + 1) for i in range(len(text))]):
        found = path_lengths(parse_structure(text), offsets)
        assert found is not None and 0 < found.critical_path <= found.response_length
