"""Answer extraction and the paper's checker: pure functions, no worker processes."""

from __future__ import annotations

import time

import pytest

from pr1_eval.grading import ExtractedAnswer, extract_answer, normalize_final_answer, paper_correct
from pr1_eval.grading.answer_text import Reading, box_chain, is_connective_gap, read_answer
from pr1_eval.grading.extract import RULES, cut_at_turn_end, last_boxed
from pr1_eval.grading.grade import too_long_to_check
from pr1_eval.grading.verify import as_math


def block(*paths: str, summary: str = "compare") -> str:
    """A well-formed parallel block with the given path contents."""
    inner = "".join(f"<Path>{p}</Path>" for p in paths)
    return f"<Parallel>{inner}</Parallel><Summary>{summary}</Summary>"


# ----- extract_answer ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Work.\nFinal Answer: 42", ExtractedAnswer("42", "final_answer")),
        ("FINAL ANSWER: 12", ExtractedAnswer("12", "final_answer")),
        ("final answer :  7  ", ExtractedAnswer("7", "final_answer")),
        ("Final Answer: $\\boxed{5}$", ExtractedAnswer("5", "final_answer")),
        ("Final Answer: $\\boxed{5}$.", ExtractedAnswer("5", "final_answer")),
        ("Final Answer: 5.", ExtractedAnswer("5", "final_answer")),
        ("Final Answer: 3.5", ExtractedAnswer("3.5", "final_answer")),
        ("Final Answer: $\\text{Evelyn}$.", ExtractedAnswer("Evelyn", "final_answer")),
        ("Final Answer: \\(x^2\\)", ExtractedAnswer("x^2", "final_answer")),
        ("Final Answer: The answer is $\\frac{3}{4}$.", ExtractedAnswer("\\frac{3}{4}", "final_answer")),
        ("**Final Answer:** 7", ExtractedAnswer("7", "final_answer")),
        ("**Final Answer**: 8", ExtractedAnswer("8", "final_answer")),
        ("Final Answer:\n$$\n\\frac{1}{2}\n$$\n", ExtractedAnswer("\\frac{1}{2}", "final_answer")),
        ("Final Answer: \\$18.90", ExtractedAnswer("\\$18.90", "final_answer")),
        ("Final Answer: 1\nlater... Final Answer: 2\n", ExtractedAnswer("2", "final_answer")),
        ("Final Answer: 1\nFinal Answer:   \n", ExtractedAnswer("1", "final_answer")),  # empty last one
        ("Final Answer: 5\nsee \\boxed{6}", ExtractedAnswer("5", "final_answer")),  # line beats box
        ("so the result is \\boxed{42}.", ExtractedAnswer("42", "boxed")),
        ("\\boxed{1} then \\boxed{2}", ExtractedAnswer("2", "boxed")),
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", ExtractedAnswer("\\frac{1}{\\sqrt{2}}", "boxed")),
        ("\\boxed{\\{1, 2\\}}", ExtractedAnswer("\\{1, 2\\}", "boxed")),
        ("\\boxed{3} and finally \\boxed{4", ExtractedAnswer("3", "boxed")),  # cut-off box skipped
        ("\\boxed{\\text{(A)}}", ExtractedAnswer("(A)", "boxed")),
        ("no answer here", ExtractedAnswer(None, "none")),
        ("Final Answer:", ExtractedAnswer(None, "none")),
        ("", ExtractedAnswer(None, "none")),
    ],
)
def test_extract_answer_cases(response: str, expected: ExtractedAnswer) -> None:
    assert extract_answer(response) == expected


def test_final_answer_inside_paths_is_ignored() -> None:
    response = (
        "Let me try two ways.\n"
        + block("Final Answer: 7", "so \\boxed{8}\nFinal Answer: 8")
        + "\nBoth agree on 9.\nFinal Answer: 9\n"
    )
    assert extract_answer(response) == ExtractedAnswer("9", "final_answer")


def test_answers_only_inside_paths_give_none() -> None:
    response = "Start." + block("Final Answer: 7", "\\boxed{8}") + "\nI am not sure."
    assert extract_answer(response) == ExtractedAnswer(None, "none")


def test_boxed_outside_paths_is_used_when_paths_hold_final_answers() -> None:
    response = block("Final Answer: 7", "Final Answer: 8") + "\nSo \\boxed{8}."
    assert extract_answer(response) == ExtractedAnswer("8", "boxed")


def test_unclosed_path_is_ignored() -> None:
    response = "Final Answer: 1\n<Parallel><Path>maybe\nFinal Answer: 2\n\\boxed{2}"  # cut off mid-path
    assert extract_answer(response) == ExtractedAnswer("1", "final_answer")


def test_stray_path_outside_a_block_is_ignored() -> None:
    response = "Final Answer: 3\n<Path>Final Answer: 4</Path>"
    assert extract_answer(response) == ExtractedAnswer("3", "final_answer")


def test_answer_in_summary_counts() -> None:
    response = block("a", "b", summary="Both give 6.\nFinal Answer: 6")
    assert extract_answer(response) == ExtractedAnswer("6", "final_answer")


@pytest.mark.parametrize("bad", [None, 12345, b"Final Answer: 3"])
def test_extract_answer_never_raises_on_non_strings(bad: object) -> None:
    result = extract_answer(bad)  # type: ignore[arg-type]
    assert isinstance(result, ExtractedAnswer)


def test_last_boxed_handles_escaped_braces() -> None:
    assert last_boxed("x \\boxed{a\\}b} y") == "a\\}b"


# ----- reading an answer line (pr1_eval.grading.answer_text) -------------------------------------
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("42", Reading("42", "line")),
        ("$\\frac{3}{4}$.", Reading("\\frac{3}{4}", "line")),
        ("\\text{Evelyn}", Reading("Evelyn", "line")),
        ("Evelyn", Reading("Evelyn", "line")),  # prose without a value: the line as it is
        ("x^2 + 2x + 1", Reading("x^2 + 2x + 1", "line")),
        ("y = 2mx + 3", Reading("y = 2mx + 3", "line")),  # 'mx' is a product, not a word
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", Reading("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "line")),
        ("5 \\text{ cm}", Reading("5 \\text{ cm}", "line")),  # units in \text are math-verify's to drop
        ("5 (since x is odd)", Reading("5", "trailing_prose")),
        ("5, because 2 + 3 = 5", Reading("5", "trailing_prose")),
        ("x = 5 when y = 2", Reading("x = 5", "trailing_prose")),
        ("x = 5 for all x", Reading("x = 5", "sentence")),  # no cut (bare "for"), but prose: its value
        ("x = 5, for all x", Reading("x = 5", "trailing_prose")),
        ("$3$ and $5$", Reading("3, 5", "math_spans")),
        ("$3$, $4$, and $5$", Reading("3, 4, 5", "math_spans")),
        ("3 or 4", Reading("3, 4", "math_spans")),
        ("$x$ = $5$", Reading("5", "line")),  # '=' between spans is not a connective: the last span
        ("The answer is $\\frac{3}{4}$.", Reading("\\frac{3}{4}", "sentence")),
        ("The largest $n$ is 34.", Reading("34", "sentence")),
        ("The solutions are $x = 3$ and $x = 4$.", Reading("x = 3, x = 4", "sentence")),
        ("There are 3 cases, so 12.", Reading("12", "sentence")),
        ("The final answer is $28\\%$. I hope it is correct.", Reading("28\\%", "sentence")),
        ("the number is not 10 which is 1,000.99", Reading("1,000.99", "sentence")),
        ("10 dollars", Reading("10", "sentence")),
        ("2\\sqrt{3} units", Reading("2\\sqrt{3}", "sentence")),
        ("12 apples and 3 pears", Reading("12, 3", "sentence")),  # a list, never just the 3
        ("\\boxed{2} and \\boxed{3}", Reading("2, 3", "boxed_set")),
        ("$\\boxed{(2, 2)} \\quad\\text{and}\\quad \\boxed{(6, 2)}$", Reading("(2, 2), (6, 2)", "boxed_set")),
        ("the first is \\boxed{2}. Then we get \\boxed{3}", Reading("3", "boxed")),
        ("", Reading(None, "none")),
        ("**", Reading(None, "none")),
    ],
)
def test_read_answer(line: str, expected: Reading) -> None:
    assert read_answer(line) == expected
    assert expected.rule in RULES


@pytest.mark.parametrize(
    ("gap", "joined"),
    [
        (", ", True), (" and ", True), (" \\quad\\text{and}\\quad ", True), ("$ or $x = ", True), ("\\) and \\( y_2 = ", True),
        (" \\text{ for part (a) and } ", True), (" then ", False), (". Check: ", False), (" + ", False), ("x" * 300, False),
    ],
)
def test_boxes_join_only_across_connectives(gap: str, joined: bool) -> None:
    assert is_connective_gap(gap, allow_text=True) is joined
    assert box_chain(f"\\boxed{{1}}{gap}\\boxed{{2}}") == (["1", "2"] if joined else ["2"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Final Answer: 70<|im_end|>", "Final Answer: 70"),
        ("<|im_start|>assistant\nFinal Answer: 3<|im_end|><|im_start|>user\nFinal Answer: 4", "assistant\nFinal Answer: 3"),
        ("<|endoftext|><|endoftext|>  Final Answer: 5", "Final Answer: 5"),
        ("Final Answer: 6</s>junk", "Final Answer: 6"),
        ("no markers", "no markers"),
        ("<|im_end|>" * 100_000, ""),
    ],
)
def test_cut_at_turn_end(text: str, expected: str) -> None:
    assert cut_at_turn_end(text) == expected


def test_extra_end_texts_cut_the_response() -> None:
    assert extract_answer("Final Answer: 6<eos>Final Answer: 7", ("<eos>",)).text == "6"
    assert extract_answer("Final Answer: 6<eos>Final Answer: 7").text == "7"


def test_spaced_thousands_read_as_one_number() -> None:
    assert as_math("1 000") == "$1000$" and as_math("7 425 000") == "$7425000$"
    assert as_math("12 34") == "$12 34$" and as_math("(1, 234 567)") == "$(1, 234567)$"


def test_degenerate_answers_are_not_checked() -> None:
    assert not too_long_to_check("1" * 500, "5") and too_long_to_check("1" * 501, "5")
    assert not too_long_to_check("x" * 1000, "y" * 50)  # long golds allow long answers


def test_strict_mode_raises_what_the_safety_net_hides(monkeypatch: pytest.MonkeyPatch) -> None:
    import pr1_eval.grading.extract as extract_module

    def broken(text: str) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(extract_module, "_final_answer", broken)
    assert extract_answer("Final Answer: 1") == ExtractedAnswer(None, "none")
    with pytest.raises(RuntimeError):
        extract_answer("Final Answer: 1", strict=True)


# ----- big and adversarial inputs ----------------------------------------------------------------
FIVE_MB = 5_000_000


def _timed(fn, *args):  # type: ignore[no-untyped-def]
    """The call's result and the CPU seconds it took: a bound on work, which other jobs on the machine
    do not move (wall time at a load of 19 would be ten times as long)."""
    start = time.process_time()
    result = fn(*args)
    return result, time.process_time() - start


def test_five_megabyte_response_with_paths() -> None:
    unit = "Reasoning line.\n" + block("Final Answer: 1\n" + "x" * 900, "Final Answer: 2") + "\n"
    response = unit * (FIVE_MB // len(unit)) + "Final Answer: \\frac{5}{2}\n"
    assert len(response) > 4_900_000
    result, seconds = _timed(extract_answer, response)
    assert result == ExtractedAnswer("\\frac{5}{2}", "final_answer")
    assert seconds < 5.0
    _, seconds = _timed(paper_correct, response, "\\frac{5}{2}")
    assert seconds < 1.0


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{" * (FIVE_MB // 7),  # nothing ever closes
        "Final Answer: " + "$" * FIVE_MB,  # one enormous line of delimiters
        "Final Answer: " + "{(" * (FIVE_MB // 2),
        "Final Answer:\n" * (FIVE_MB // 14),  # many empty answers
        "<Parallel><Path>" * (500_000 // 16),  # 62k tags; the structure parse costs ~10 us a tag
        "a" * FIVE_MB,
    ],
    ids=["unclosed-boxes", "dollars", "brackets", "empty-finals", "open-tags", "plain"],
)
def test_pathological_inputs_return_quickly(response: str) -> None:
    result, seconds = _timed(extract_answer, response)
    assert isinstance(result, ExtractedAnswer)
    assert seconds < 10.0
    _, seconds = _timed(paper_correct, response, "1")
    assert seconds < 2.0


# ----- the paper's checker ----------------------------------------------------------------------
def test_paper_reads_only_the_last_300_characters() -> None:
    assert paper_correct("Final Answer: 42\n" + "x" * 200, "42")
    # the same answer 400 characters before the end is outside the paper's window
    assert not paper_correct("Final Answer: 42\n" + "x" * 400, "42")
    assert extract_answer("Final Answer: 42\n" + "x" * 400).text == "42"  # ours still finds it


def test_paper_counts_answers_inside_paths() -> None:
    response = "Start.\n" + block("\nFinal Answer: 42\n", "\nFinal Answer: 41\n") + "\n"
    assert paper_correct(response, "41")  # last match, even inside a path
    # with the tags stripped, text that touched a tag runs together, as in the paper's decode
    glued = "Start." + block("Final Answer: 42", "Final Answer: 41", summary="done")
    assert not paper_correct(glued, "41")  # it reads "42Final Answer: 41done"
    assert extract_answer(response).text is None


def test_paper_strips_tags_like_its_decoder() -> None:
    response = "Final Answer: 42\n" + "<Path></Path>" * 30  # 390 chars of tags, 0 of text
    assert paper_correct(response, "42")  # the paper decoded without special tokens
    assert not paper_correct(response, "42", strip_tags=False)


@pytest.mark.parametrize(
    ("answer_line", "gold", "expected"),
    [
        ("Final Answer: 42", "42", True),
        ("final answer:42", "42", True),
        ("Final Answer: $\\boxed{1,000}$ dollars", "1000", True),
        ("Final Answer: 90^\\circ", "90", True),
        ("Final Answer: \\frac12", "\\frac{1}{2}", True),
        ("Final Answer: \\sqrt2", "\\sqrt{2}", True),
        ("Final Answer: x = 5", "5", True),
        ("Final Answer: \\text{Evelyn}", "\\text{Evelyn}", True),
        ("Final Answer: 9/7", "\\frac{9}{7}", False),  # no maths, just strings
        ("Final Answer: 0.5", "\\frac{1}{2}", False),
        ("Final Answer: 43", "42", False),
        ("The answer is 42", "42", False),  # no Final Answer line at all
    ],
)
def test_paper_checker_examples(answer_line: str, gold: str, expected: bool) -> None:
    assert paper_correct("Some reasoning.\n" + answer_line, gold) is expected


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("$\\boxed{1,000}$ dollars", "1000"),
        ("x = \\frac{3}{4}", "\\frac{3}{4}"),
        ("10 \\text{ cm}", "10"),
        ("\\text{(A)}", "(A)"),
        ("\\fracab", "\\frac{a}{b}"),
        ("\\sqrt3", "\\sqrt{3}"),
        ("1,2", "12"),  # quirk: digits-and-commas lose their commas, so the pair 1,2 reads as 12
        ("(1,2)", "(1,2)"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left(3,\\frac{\\pi}{2}\\right)"),
        ("It is $5$ and $6$", "5"),  # the first $…$ span wins
    ],
)
def test_normalize_final_answer(raw: str, normalised: str) -> None:
    assert normalize_final_answer(raw) == normalised
