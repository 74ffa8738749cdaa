"""Sibling pairs are bounded per block and per response (audit round six, M7): pairs grow as the
square of the paths, and one response of 4,000 paths in one block took 46 s and 2.9 GB. The bound
keeps the first paths of a block and says how many blocks it cut; real blocks (2-4 paths) are
untouched."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.diversity import paths as div
from analysis.runs.loader import load_runs
from analysis.summary import analyze
from tests.support.analysis_fixtures import block, make_record, response, write_run


def _blocks(sizes: list[int], response_of: list[int]) -> pd.DataFrame:
    rows = [{"run": "r", "task": "t", "problem_id": "p", "sample_idx": s, "block_idx": b,
             "model_family": "m", "step": None, "decoding": "forkjoin", "path_texts": [f"path {i}" for i in range(n)]}
            for b, (n, s) in enumerate(zip(sizes, response_of, strict=True))]
    return pd.DataFrame(rows)


def test_a_block_of_many_paths_scores_only_its_first_paths() -> None:
    frame, _ = div.sibling_pairs(_blocks([200, 3], [0, 1]))
    # block 0: the first 32 of 200 paths, 32 * 31 / 2 = 496 pairs (not 19,900); block 1 (another response): 3
    assert len(frame) == 496 + 3
    assert frame[frame["block_idx"] == 0][["path_i", "path_j"]].max().tolist() == [30, 31]
    assert div.pair_bound_note(_blocks([200, 3], [0, 1])).startswith("1 block(s) held more paths")


def test_the_pairs_of_one_response_are_bounded_across_its_blocks() -> None:
    # one response of 100 blocks of 20 paths: 190 pairs each; 2,000 / 190 = 10 whole blocks (1,900 pairs), then
    # the 11th fits m (m - 1) / 2 <= 100: m = 14 (91 pairs, 1,991); then 9 left: m = 4 (6); 3 left: m = 3 (3);
    # then none: one path (no pair) in every later block
    counts = div.scored_path_counts(_blocks([20] * 100, [0] * 100))
    assert counts[:13] == [20] * 10 + [14, 4, 3] and set(counts[13:]) == {1}
    assert sum(m * (m - 1) // 2 for m in counts) == 2_000
    assert div.scored_path_counts(_blocks([4, 4, 2], [0, 0, 1])) == [4, 4, 2]  # real blocks: untouched
    assert div.pair_bound_note(_blocks([4, 4, 2], [0, 0, 1])) is None


def test_analyze_says_what_it_bounded(tmp_path: Path) -> None:
    wide = response(block([f"Path number {i} checks case {i}." for i in range(40)]))
    write_run(tmp_path, "r", [make_record("t", "p", 0, wide), make_record("t", "q", 0, response(block(["a b", "c d"])))])
    analysis = analyze(load_runs(tmp_path, tokenizer=None), None)
    assert len(analysis.pairs) == 32 * 31 // 2 + 1
    assert any("1 block(s) held more paths than are scored" in note for note in analysis.notes)
    # roles class the same first 32 paths (classing is quadratic in distinct answers); the rest are None
    wide_block = analysis.blocks[analysis.blocks["problem_id"] == "p"].iloc[0]
    classes = list(wide_block["path_answer_classes"])
    assert len(classes) == 40 and all(c is not None for c in classes[:32]) and classes[32:] == [None] * 8
    assert wide_block["n_distinct_answers"] == 32  # each path concludes its own number


def test_a_responses_consistency_classes_at_most_its_first_conclusions() -> None:
    from analysis.structure.roles import MOST_CONCLUSIONS_PER_RESPONSE, consistency_groups

    blocks = _blocks([200, 200], [0, 0]).assign(path_conclusions=[[str(i) for i in range(200)]] * 2)
    samples = blocks.drop_duplicates("sample_idx").assign(extracted_answer="7")
    heads, groups = consistency_groups(samples, blocks)
    assert len(groups) == 1 and len(groups[0]) == MOST_CONCLUSIONS_PER_RESPONSE + 1 == 257  # 256, then the final
    assert groups[0][199:201] == ["199", "0"] and groups[0][-1] == "7"


def test_the_counts_over_arrays_equal_the_block_by_block_counts() -> None:
    """Responses under the pair bound take the arrays' path; over it, the loop; the same counts either way."""
    import random

    rng = random.Random(5)
    for _ in range(40):
        sizes = [rng.choice([0, 1, 2, 3, 4, 20, 40, 70]) for _ in range(rng.randint(1, 60))]
        blocks = _blocks(sizes, [rng.randint(0, 3) for _ in sizes])
        assert div.scored_path_counts(blocks) == div._bounded_counts(blocks, sizes)
    frame, _ = div.sibling_pairs(_blocks([3, 0, 2, 4], [0, 0, 1, 1]))
    assert list(zip(frame["block_idx"], frame["path_i"], frame["path_j"], strict=True)) == [
        (0, 0, 1), (0, 0, 2), (0, 1, 2), (2, 0, 1), (3, 0, 1), (3, 0, 2), (3, 0, 3), (3, 1, 2), (3, 1, 3), (3, 2, 3)]
