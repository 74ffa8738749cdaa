"""The loader's block parse and block counts equal what the general parser gives, row for row.

The reference below reads every response with :func:`parse_structure` alone, so the loader's fast
scan (and its fallback) is checked against the parser on well-formed, cut-off, nested, stray and
summary-less responses, with stored structure that agrees and that does not.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import analysis.runs.loader as loader
from analysis.runs import block_cache
from analysis.runs.index import RunEntry
from pr1_eval.protocol.parse import parse_structure
from tests.support.tag_texts import mutated, well_formed


def _reference(samples: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    rows: list[dict[str, Any]] = []
    mismatched = 0
    for _, s in samples.iterrows():
        text = s.response if isinstance(s.response, str) else ""
        structure = parse_structure(text)
        n_stored = 0 if s.n_blocks is None or pd.isna(s.n_blocks) else int(s.n_blocks)
        ok = n_stored == structure.n_blocks and len(s.block_rel_starts or []) == structure.n_blocks
        mismatched += not ok
        for i, b in enumerate(structure.blocks):
            texts = [text[p.start:p.end].strip() for p in b.paths]
            summary = text[b.summary.start:b.summary.end].strip() if b.summary else None
            rows.append({
                "task": s.task, "problem_id": s.problem_id, "sample_idx": int(s.sample_idx), "block_idx": i,
                "n_paths": len(texts), "closed": b.closed, "char_start": b.start, "char_end": b.end,
                "token_start": int(s.block_token_starts[i]) if ok and s.block_token_starts is not None else None,
                "token_end": int(s.block_token_ends[i]) if ok and s.block_token_ends is not None else None,
                "rel_start": float(s.block_rel_starts[i]) if ok else b.start / max(len(text), 1),
                "position_unit": str(s.position_unit) if ok else "char", "path_texts": texts,
                "path_char_lengths": [len(t) for t in texts],
                "summary_char_length": None if summary is None else len(summary),
                "summary_text": summary})
    frame = pd.DataFrame(rows, columns=list(loader.PARSED_COLUMNS)).astype(object)
    for name in ("token_start", "token_end", "summary_char_length", "summary_text"):
        frame[name] = pd.Series([None if pd.isna(v) else v for v in frame[name]], dtype=object)
    return frame.astype(block_cache.DTYPES), mismatched


def _samples(n: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        text = well_formed(rng)
        if rng.random() < 0.4:
            text = mutated(rng, text)
        if rng.random() < 0.1:
            text = text + "\nFinal Answer: " + rng.choice(["7", "\\frac{1}{2}", "x"])
        starts = [j for j in range(len(text)) if text.startswith("<Parallel>", j)]
        agree = rng.random() < 0.8
        n_blocks = len(starts) if agree else len(starts) + 1
        tokens = rng.random() < 0.5
        rows.append({
            "task": "t", "problem_id": f"p{i % 7}", "sample_idx": i, "response": None if i % 53 == 0 else text,
            "n_blocks": None if (i % 53 == 0 or not starts and rng.random() < 0.5) else n_blocks,
            "block_rel_starts": [s / max(len(text), 1) for s in starts] if agree else [],
            "block_token_starts": list(range(len(starts))) if tokens else None,
            "block_token_ends": list(range(1, len(starts) + 1)) if tokens else None,
            "position_unit": "token" if tokens else "char"})
    return pd.DataFrame(rows)


def test_parse_blocks_equals_the_parser_row_for_row() -> None:
    samples = _samples(1500, seed=3)
    fast, mismatched = loader.parse_blocks(samples)
    expected, expected_mismatched = _reference(samples)
    assert mismatched == expected_mismatched > 0
    assert len(fast) > 1500 and (~fast["closed"]).any() and fast["summary_text"].isna().any()
    pd.testing.assert_frame_equal(fast, expected)
    assert list(fast.dtypes) == list(expected.dtypes)


def test_parse_blocks_of_no_blocks_has_the_columns() -> None:
    frame, mismatched = loader.parse_blocks(_samples(5, seed=1).assign(response="no tags"))
    assert frame.empty and tuple(frame.columns) == loader.PARSED_COLUMNS and mismatched >= 0
    assert dict(frame.dtypes.astype(str)) == {**{c: "object" for c in loader.PARSED_COLUMNS}, **block_cache.DTYPES}


@pytest.mark.parametrize("projected", [False, True])
def test_block_counts_equal_the_parser_s(projected: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    samples = _samples(800, seed=5)
    _, expected_mismatched = _reference(samples)
    expected_blocks = sum(parse_structure(t).n_blocks for t in samples["response"] if isinstance(t, str))
    if projected:  # the texts come from the store, counted by pyarrow, rows by their store position
        table = pa.table({"response": pa.array([t if isinstance(t, str) else None for t in samples["response"]], type=pa.string())})

        class Store:
            def __init__(self, run_dir: Path) -> None:
                pass

            def read_table(self, columns: list[str], threads: bool = True) -> pa.Table:
                return table

        monkeypatch.setattr(loader, "RunStore", Store)
        samples = samples.drop(columns=["response"]).iloc[::-1]  # store order is not row order
    assert loader._block_counts(samples, RunEntry(tmp_path), cache=False) == (expected_mismatched, expected_blocks)
