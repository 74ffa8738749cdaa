"""Fill a SampleRecord's structure and grade fields from its response.

Generated, imported and regraded samples all pass through these two functions, so a record's
derived fields never depend on where the response came from.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pr1_eval.grading.grade import answer_classes, grade_responses
from pr1_eval.grading.policy import DEFAULT_POLICY
from pr1_eval.protocol.critical_path import PathLengths, path_lengths
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.records.sample import SampleRecord


def position_unit(tokenizer: Any) -> str:
    """The unit block positions get with ``tokenizer``: 'token' when it gives character offsets
    (a fast tokenizer; :func:`token_offsets`), else 'char'. Runs record it in run.json."""
    return "token" if tokenizer is not None and getattr(tokenizer, "is_fast", False) else "char"


def token_offsets(tokenizer: Any, text: str) -> list[tuple[int, int]] | None:
    """Per-token character ranges of ``text`` by re-tokenising (fast tokenizers only)."""
    if position_unit(tokenizer) != "token":
        return None
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return [tuple(pair) for pair in encoded["offset_mapping"]]


def annotate_structure(record: SampleRecord, offsets: Sequence[tuple[int, int]] | None = None) -> SampleRecord:
    """Parse ``record.response`` and store blocks, format verdict and positions (in place).

    Positions are token indices over ``len(offsets)`` tokens when ``offsets`` are given (the same
    re-tokenisation for generated runs and for imports given a tokenizer, so identical responses get
    identical positions), else character offsets over the response length; ``position_unit`` says which.
    The critical path, response length and losing-path length (:mod:`pr1_eval.protocol.critical_path`)
    are counted in the same unit.
    """
    structure = parse_structure(record.response, offsets)
    fill_path_lengths(record, path_lengths(structure, offsets))
    record.has_parallel = structure.has_parallel
    record.format_ok = structure.format_ok
    record.format_error = structure.error
    record.n_blocks = structure.n_blocks
    record.paths_per_block = structure.paths_per_block
    record.block_char_starts = [b.start for b in structure.blocks]
    record.block_char_ends = [b.end for b in structure.blocks]
    if offsets is not None:
        n_tokens = len(offsets) or 1
        record.block_token_starts = [int(b.token_start or 0) for b in structure.blocks]
        record.block_token_ends = [int(b.token_end or 0) for b in structure.blocks]
        record.block_rel_starts = [s / n_tokens for s in record.block_token_starts]
        record.position_unit = "token"
    else:
        n_chars = len(record.response) or 1
        record.block_token_starts = record.block_token_ends = None
        record.block_rel_starts = [s / n_chars for s in record.block_char_starts]
        record.position_unit = "char"
    return record


def fill_path_lengths(record: SampleRecord, lengths: PathLengths | None) -> None:
    """Store ``lengths`` in the record's token-latency fields (all None for a response without text)."""
    if lengths is None:
        record.critical_path = record.response_length = record.losing_path_length = record.length_unit = None
        return
    record.critical_path, record.response_length = lengths.critical_path, lengths.response_length
    record.losing_path_length, record.length_unit = lengths.losing_path_length, lengths.unit


def annotate_grades(records: Sequence[SampleRecord], *, workers: int | None = None, timeout_s: float = 10.0,
                    progress: bool = False, policy: str = DEFAULT_POLICY) -> None:
    """Grade every record (math-verify in worker processes + the paper checker) under the answer
    ``policy`` (:mod:`pr1_eval.grading.policy`) and assign the per-problem answer classes used by
    maj@k. In place."""
    results = grade_responses([(r.response, r.gold) for r in records], workers=workers, timeout_s=timeout_s,
                              progress=progress, policy=policy)
    for record, result in zip(records, results, strict=True):
        result.fill(record)
    by_problem: dict[tuple[str, str], list[SampleRecord]] = defaultdict(list)
    for record in records:
        by_problem[(record.task, record.problem_id)].append(record)
    for group in by_problem.values():
        classes = answer_classes([r.extracted_answer for r in group], timeout_s=timeout_s)
        for record, cls in zip(group, classes, strict=True):
            record.answer_class = cls
