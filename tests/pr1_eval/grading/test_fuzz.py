"""Fuzz: 10,000 generated responses through the parser, the format check, answer extraction, path
conclusions, the paper's checker and ``grade_responses`` (through the worker pool).

Responses are built by a seeded generator from the pieces that break scorers: the six tags and
near-tags, unbalanced braces, ``\\boxed{`` without its end, math delimiters, ``Final Answer:``
markers, end-of-turn tokens, control characters and very long lines. Every function must
return one of its declared values and never raise (the safety nets are switched off with
``strict=True`` so an internal failure shows instead of reading as "no answer"). The seed and
size can be changed with ``PR1_FUZZ_SEED`` / ``PR1_FUZZ_N`` to hunt further.
"""

from __future__ import annotations

import os
import random

import pytest

from analysis.structure.conclusions import CONCLUSION_SOURCES, path_conclusion
from pr1_eval.grading import grade_responses
from pr1_eval.grading.extract import RULES, extract_answer
from pr1_eval.grading.paper import normalize_final_answer, paper_extract
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import outside_paths, parse_structure
from pr1_eval.records.sample import SCORED_STATUSES

N_RESPONSES = int(os.environ.get("PR1_FUZZ_N", "10000"))
SEED = int(os.environ.get("PR1_FUZZ_SEED", "20261201"))
GRADE_STATUSES = {"ok", "no_answer", "timeout", "error"}

_PIECES: tuple[str, ...] = (
    *T.ALL_TAGS, *T.ALL_TAGS,
    "<Parallel", "</Path", "<path>", "<Parallelogram>", "< Path>", "<Summary >", "</Summary", "<<Path>>", "<Path/>",
    "{", "}", "{{", "}}", "\\{", "\\}", "\\boxed{", "\\boxed{12", "\\boxed{}", "\\boxed{\\frac{1}{2}}", "\\fbox{3}",
    "\\boxed {x}", "$", "$$", "\\[", "\\]", "\\(", "\\)", "\\text{", "\\text{ and }", "\\quad", "\\frac{", "\\frac12",
    "Final Answer:", "final answer :", "**Final Answer**:", "Final Answer: ", "The answer is ", "answer:",
    " since ", " (since x = 2)", ", because ", " and ", " or ", " = ", "=", " is ", ". ", ".\n", "\n", "\n\n",
    "<|im_end|>", "<|endoftext|>", "<|im_start|>user\n", "</s>",
    "\x00", "\x07", "\x1b[31m", "\r", "\t", "\x7f", "\u2028", "\ufeff", "\u200b", "é", "∑", "≈", "🙂",
)
_WORDS = ("so", "the", "total", "is", "x", "n", "apples", "we", "check", "Both", "Then", "paths", "agree")
_ANSWERS = ("7", "12", "-3", "0.5", "\\frac{1}{2}", "3, 5", "(2, 2)", "x = 4", "10\\%", "\\sqrt{2}", "1,000", "abc")


def _piece(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(_PIECES)
    if roll < 0.65:
        return rng.choice(_WORDS) + " "
    if roll < 0.85:
        return rng.choice(_ANSWERS)
    if roll < 0.992:
        return str(rng.randint(-50, 5000))
    if roll < 0.997:  # a very long line
        return rng.choice(("x", "{", "}", "$", "\\boxed{", "9 ", "so the total is ")) * rng.randint(300, 3_000)
    return rng.choice(T.ALL_TAGS) * rng.randint(10, 300)  # a run of tags


def fuzz_responses(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (response, gold) pairs from a seeded generator."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        response = "".join(_piece(rng) for _ in range(rng.randint(1, 40)))
        pairs.append((response, rng.choice(_ANSWERS)))
    return pairs


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    return fuzz_responses(N_RESPONSES, SEED)


def test_fuzz_inputs_cover_the_hard_cases(pairs: list[tuple[str, str]]) -> None:
    texts = [r for r, _ in pairs]
    assert len(texts) == N_RESPONSES >= 10_000 or "PR1_FUZZ_N" in os.environ
    def share(hits: int) -> float:
        return hits / len(texts)

    assert share(sum("\\boxed{" in t and t.count("{") > t.count("}") for t in texts)) > 0.1
    assert share(sum(t.count("{") != t.count("}") for t in texts)) > 0.3
    assert share(sum(any(ord(c) < 32 and c not in "\n\t" for c in t) for t in texts)) > 0.2
    assert share(sum(len(t) > 2000 for t in texts)) > 0.05
    assert share(sum(not parse_structure(t).format_ok for t in texts)) > 0.3
    assert share(sum("Final Answer" in t for t in texts)) > 0.2


def test_fuzz_parser_extraction_conclusions_and_paper_checker(pairs: list[tuple[str, str]]) -> None:
    for response, gold in pairs:
        structure = parse_structure(response)
        assert isinstance(structure.format_ok, bool) and (structure.error is None) == structure.format_ok
        assert len(outside_paths(response, structure)) == len(response)
        answer = extract_answer(response, strict=True)
        assert answer.source in {"final_answer", "boxed", "none"} and answer.rule in RULES
        assert (answer.text is None) == (answer.source == "none")
        for block in structure.blocks:
            for span in block.paths:
                conclusion = path_conclusion(response[span.start:span.end], strict=True)
                assert conclusion.source in CONCLUSION_SOURCES
                assert (conclusion.text is None) == (conclusion.source == "none")
        raw = paper_extract(response)
        assert isinstance(normalize_final_answer("[INVALID]" if raw is None else raw), str)
        assert isinstance(normalize_final_answer(gold), str)


@pytest.mark.slow
def test_fuzz_grade_responses_through_the_pool(pairs: list[tuple[str, str]]) -> None:
    """Every response through ``grade_responses`` (identical checks are run once by the pool)."""
    results = grade_responses(pairs, timeout_s=6)
    assert len(results) == len(pairs)
    statuses = [r.grade_status for r in results]
    assert set(statuses) <= GRADE_STATUSES
    assert statuses.count("error") == 0
    for r in results:
        assert (r.correct is None) == (r.grade_status not in SCORED_STATUSES)
        assert isinstance(r.correct_paper, bool)
