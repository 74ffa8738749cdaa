"""The official reward rules on a few hundred generated responses, beside pr1-eval's strict readings.

Every response is built from seeded pieces: well-formed blocks, three-path blocks, nested blocks,
unclosed summaries, stray closers, missing summaries, one-path blocks, paths outside a block, a
truncated path; answers plain, bold, ``\\(…\\)``, boxed, with a trailing period, lower-case, inside
paths. The expected verdicts come from a second implementation written here, from the official
code's text as read (``check_parallel_thinking_format`` collects errors over the whole tag list;
``gsm8k_add_special_token_reward.extract_solution`` takes ``re.search``'s first match), so the
counts below are pinned by two independent readings, and the strict/official disagreement sizes
quoted in ``repro/README.md`` are these numbers.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pr1_eval.grading.extract import END_OF_TURN_TEXTS
from pr1_eval.protocol.parse import parse_structure
from repro.official import official_format_ok, official_gsm8k_answer, official_gsm8k_correct
from repro.rewards import compute_score

GOLD = "72"
N_RESPONSES = 400
SIX_TAGS = ("<Parallel>", "</Parallel>", "<Path>", "</Path>", "<Summary>", "</Summary>")

ANSWERS = (
    "Final Answer: 72",
    "Final Answer: 72.",
    "Final Answer:72",
    "Final Answer:\n72",
    "**Final Answer:** 72",
    "**Final Answer: 72**",
    "Final Answer: \\(72\\)",
    "Final Answer: $72$",
    "Final Answer: \\boxed{72}",
    "final answer: 72",
    "Final Answer: 70",
    "Final Answer: 1,072",
    "Final Answer: 72 apples",
    "The answer is \\boxed{72}.",
    "",
)
PATH_TEXTS = ("48/2 = 24", "half of 48 is 24", "Final Answer: 70", "Final Answer: 72", "so 24 in May")


def _path(rng: random.Random) -> str:
    return f"<Path>{rng.choice(PATH_TEXTS)}</Path>"


def _block(rng: random.Random) -> str:
    """One piece of block structure, well-formed or one of the malformations the official check sees."""
    kind = rng.choice(
        ("ok", "ok", "three", "nested", "unclosed_summary", "stray_close", "no_summary", "one_path",
         "path_outside", "summary_alone", "stray_path_close")
    )
    two = _path(rng) + _path(rng)
    summary = "\n<Summary>24 in May</Summary>\n"
    if kind == "ok":
        return f"<Parallel>{two}</Parallel>{summary}"
    if kind == "three":
        return f"<Parallel>{two}{_path(rng)}</Parallel>{summary}"
    if kind == "nested":
        inner = f"<Parallel>{two}</Parallel>\n<Summary>inner</Summary>"
        return f"<Parallel><Path>outer {inner}</Path>{_path(rng)}</Parallel>{summary}"
    if kind == "unclosed_summary":
        return f"<Parallel>{two}</Parallel>\n<Summary>never closed\n"
    if kind == "stray_close":
        return f"<Parallel>{two}</Parallel>{summary}</Summary>\n"
    if kind == "no_summary":
        return f"<Parallel>{two}</Parallel>\n"
    if kind == "one_path":
        return f"<Parallel>{_path(rng)}</Parallel>{summary}"
    if kind == "path_outside":
        return _path(rng) + "\n"
    if kind == "summary_alone":
        return "<Summary>a summary</Summary>\n"
    return "</Path>\n"


def generated_responses(n: int = N_RESPONSES, seed: int = 23) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        blocks = "".join(_block(rng) for _ in range(rng.choice((0, 1, 1, 2, 3))))
        tail = "" if rng.random() < 0.9 else "<Parallel><Path>cut off mid-path"
        end = rng.choice(("", "", "<|im_end|>"))
        out.append(f"Step one.\n{blocks}48+24=72\n{rng.choice(ANSWERS)}{tail}{end}")
    return out


# ---------- the second reading of the official code ----------


def reference_format_errors(text: str) -> list[str]:
    """The official check as read: every tag in order, errors collected, the final checks after."""
    tokens: list[str] = []
    i = 0
    while i < len(text):  # the tags in order of appearance (no two of them can overlap)
        hits = [(text.find(t, i), t) for t in SIX_TAGS if text.find(t, i) >= 0]
        if not hits:
            break
        at, tag = min(hits)
        tokens.append(tag)
        i = at + len(tag)
    errors, stack, counts = [], [], []
    expect_summary, n_summary = False, 0
    for tag in tokens:
        if tag == "<Parallel>":
            stack.append("P"), counts.append(0)
            expect_summary = False
        elif tag == "<Path>":
            stack.append("T")
        elif tag == "</Path>":
            if stack and stack[-1] == "T":
                stack.pop()
                if counts:
                    counts[-1] += 1
            else:
                errors.append("unexpected </Path>")
        elif tag == "</Parallel>":
            if stack and stack[-1] == "P":
                stack.pop()
                if counts.pop() < 2:
                    errors.append("fewer than 2 paths")
                expect_summary = True
            else:
                errors.append("unexpected </Parallel>")
        elif tag == "<Summary>":
            if not expect_summary:
                errors.append("summary not after </Parallel>")
            expect_summary = False
            n_summary += 1
    if stack:
        errors.append("open at end")
    if expect_summary:
        errors.append("missing summary")
    if n_summary != text.count("</Parallel>"):
        errors.append("summary count")
    return errors


def reference_gsm8k_answer(text: str) -> str | None:
    """First ``Final Answer:`` followed (after whitespace) by ``-?[0-9.,]+``, on the tag-stripped text."""
    for special in (*SIX_TAGS, *END_OF_TURN_TEXTS):
        text = text.replace(special, "")
    start = 0
    while (at := text.find("Final Answer:", start)) >= 0:
        j = at + len("Final Answer:")
        while j < len(text) and text[j].isspace():
            j += 1
        k = j + 1 if j < len(text) and text[j] == "-" else j
        m = k
        while m < len(text) and (text[m].isdigit() or text[m] in ".,"):
            m += 1
        if m > k:
            return text[j:m].replace(",", "")
        start = at + 1
    return None


@pytest.fixture(scope="module")
def responses() -> list[str]:
    return generated_responses()


def test_official_rules_equal_the_second_reading(responses: list[str]) -> None:
    for text in responses:
        assert official_format_ok(text) == (not reference_format_errors(text)), text
        assert official_gsm8k_answer(text) == reference_gsm8k_answer(text), text


def test_hand_cases_of_the_official_format_check() -> None:
    ok = "<Parallel><Path>a</Path><Path>b</Path></Parallel>\n<Summary>s</Summary>"
    nested = "<Parallel><Path>x" + ok + "</Path><Path>y</Path></Parallel><Summary>t</Summary>"
    for text, official, strict in (
        (ok, True, True),
        (nested, True, False),
        (ok.replace("</Summary>", ""), True, False),  # unclosed summary
        (ok + "</Summary>", True, False),  # stray closer
        ("<Path>alone</Path>", True, False),  # a path outside any block
        (ok.replace("<Path>b</Path>", ""), False, False),  # one path
        (ok.replace("\n<Summary>s</Summary>", ""), False, False),  # no summary
        ("<Summary>s</Summary>", False, False),
        ("<Parallel><Path>cut", False, False),
        ("no tags at all", True, True),
    ):
        assert (official_format_ok(text), parse_structure(text).format_ok) == (official, strict), text


def test_hand_cases_of_the_official_gsm8k_answer() -> None:
    assert official_gsm8k_answer("Final Answer: 1,072.") == "1072."  # commas dropped, period kept
    assert official_gsm8k_answer("<Path>Final Answer: 7</Path><Path>0 apples</Path>\nFinal Answer: 72") == "70"
    assert official_gsm8k_answer("**Final Answer:** 72") is None
    assert official_gsm8k_answer("final answer: 72") is None  # case-sensitive
    assert official_gsm8k_answer("Final Answer: $72$\nFinal Answer: -3") == "-3"  # the first with a number
    assert official_gsm8k_correct("Final Answer: 72<|im_end|>", 72)
    assert not official_gsm8k_correct("Final Answer: 72.", "72")


def test_counts_under_both_readings(responses: list[str]) -> None:
    """The pinned sizes of the strict/official differences on the generated set (README, Rewards)."""
    counts: Counter[str] = Counter()
    for text in responses:
        official_format = not reference_format_errors(text)
        strict_format = parse_structure(text).format_ok
        counts["official_format_pass"] += official_format
        counts["strict_format_pass"] += strict_format
        counts["official_pass_strict_fail"] += official_format and not strict_format
        counts["strict_pass_official_fail"] += strict_format and not official_format
        official_right = reference_gsm8k_answer(text) == GOLD
        out = compute_score("gsm8k", text, GOLD, mode="parallel_accuracy")
        strict = compute_score("gsm8k", text, GOLD, mode="parallel_accuracy", format_check="strict",
                               gsm8k_answer="grader", miss_score=-1.0)
        counts["gsm8k_official_right"] += official_right
        counts["grader_right"] += bool(out["acc"])
        counts["paper_checker_right"] += bool(out["acc_paper"])
        counts["checker_differs"] += out["acc"] != out["acc_paper"]
        counts["gsm8k_answer_differs"] += official_right != bool(out["acc"])
        expected = 1.0 if official_right and "<Parallel>" in text and official_format else 0.0
        assert out["score"] == expected, text
        counts["gsm8k_reward_differs"] += (out["score"] == 1.0) != (strict["score"] == 1.0)
        for step, plain in ((9, "tiered"), (1, "accuracy")):
            got = compute_score("d", text, GOLD, mode="alternating", step=step)
            got_strict = compute_score("d", text, GOLD, mode="alternating", step=step, format_check="strict")
            right = bool(got["acc"])
            if plain == "tiered":
                want = 1.2 if right and "<Parallel>" in text and official_format else (
                    1.0 if right and "<Parallel>" not in text else -1.0)
                counts["tiered_differs"] += got["score"] != got_strict["score"]
            else:
                want = 1.0 if right else -1.0
                assert got["score"] == got_strict["score"]
            assert got["score"] == want, (step, text)
    assert dict(counts) == PINNED, dict(counts)


#: official_pass_strict_fail > 0 and strict_pass_official_fail == 0: the official check is the more
#: lenient one on every response here, as in the issue's 342/2,400 (all official-pass, pr1-fail).
PINNED = {
    "official_format_pass": 208,
    "strict_format_pass": 119,
    "official_pass_strict_fail": 89,
    "strict_pass_official_fail": 0,
    "gsm8k_official_right": 149,
    "grader_right": 322,
    "paper_checker_right": 159,
    "checker_differs": 169,
    "gsm8k_answer_differs": 205,
    "gsm8k_reward_differs": 59,
    "tiered_differs": 58,
}
