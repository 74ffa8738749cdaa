"""Generated (response, gold) pairs for the agreement test (:mod:`test_agreement`): answers in the
forms models write them (integers, negatives, decimals, fractions, radicals, multiples of π, mixed
numbers; LaTeX and plain text), stated the ways models state them (a ``Final Answer:`` line, a
``\\boxed{}``, a sentence, a sentence followed by prose without a value, inside a ``<Path>`` only),
after a few lines of working that hold other numbers, each against its own gold and a wrong one.

Every pair carries its ``kind`` (how the answer is stated) and ``form`` (how it is written), so the
test can count differences by kind. Deterministic: one seeded generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PREAMBLES = (
    "Let me work through this step by step.\nFirst, 3 + 4 = 7 and 12 / 4 = 3.\n",
    "We set up the equation 2x + 5 = 17, so x = 6, and then we substitute.\n",
    "Counting the cases: 8 with the first property, 5 with the second, 2 with both.\n",
    "",
)
#: How the answer is stated: template on the written answer (``{m}``: inside math, ``{p}``: plain text).
STATEMENTS: dict[str, str] = {
    "final_answer": "So we are done.\nFinal Answer: {m}",
    "final_answer_plain": "So we are done.\nFinal Answer: {p}",
    "boxed": "Putting it together, the result is $\\boxed{{{b}}}$.",
    "sentence_math": "Therefore, the answer is {m}.",
    "sentence_plain": "So the final value is {p}.",
    "sentence_then_prose": "This gives {m}. I hope this helps!",
    "inside_path": ("<Parallel>\n<Path>\nThe answer is {m}.\n</Path>\n<Path>\nSo it is {m}.\n</Path>\n</Parallel>\n"
                    "<Summary>\nBoth paths agree.\n</Summary>\nThat settles it."),
}


@dataclass(frozen=True)
class Pair:
    response: str
    gold: str
    kind: str  # a key of STATEMENTS
    form: str  # how the answer is written
    right: bool  # whether the written answer is the gold's value


def _values(rng: random.Random) -> list[tuple[str, str, str, str]]:
    """(form, gold LaTeX, the answer in math, the answer in plain text) for one draw of each form."""
    n, a, b = rng.randint(2, 999), rng.randint(1, 9), rng.randint(11, 19)
    m = rng.choice([2, 3, 5, 6, 7, 10])
    return [
        ("integer", str(n), f"${n}$", str(n)),
        ("negative", str(-n), f"${-n}$", str(-n)),
        ("decimal", f"{n}.5", f"${n}.5$", f"{n}.5"),
        ("fraction", f"\\frac{{{a}}}{{{b}}}", f"$\\frac{{{a}}}{{{b}}}$", f"{a}/{b}"),
        ("radical", f"{a + 1}\\sqrt{{{m}}}", f"${a + 1}\\sqrt{{{m}}}$", f"{a + 1} sqrt({m})"),
        ("pi", f"{a + 1}\\pi", f"${a + 1}\\pi$", f"{a + 1}\\pi"),
        ("mixed_number", f"{n}\\frac{{1}}{{2}}", f"${n}\\frac{{1}}{{2}}$", f"{n} 1/2"),
    ]


def _wrong(form: str, gold: str, rng: random.Random) -> str:
    """A gold of the same form and another value."""
    if form in ("integer", "negative"):
        return str(int(gold) + rng.choice([-1, 1]))
    if form == "decimal":
        return gold.replace(".5", ".25")
    return gold.replace("{1}", "{3}", 1) if "{1}" in gold else "2" + gold


def generate_pairs(draws: int = 20, seed: int = 0) -> list[Pair]:
    """``draws`` values of every form × every statement × (right gold, wrong gold)."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for _ in range(draws):
        for form, gold, in_math, plain in _values(rng):
            preamble = rng.choice(PREAMBLES)
            wrong = _wrong(form, gold, rng)
            for kind, template in STATEMENTS.items():
                if kind in ("sentence_plain", "final_answer_plain") and form == "pi":
                    continue  # no plain-text form
                response = preamble + template.format(m=in_math, p=plain, b=in_math.strip("$"))
                pairs.append(Pair(response, gold, kind, form, True))
                pairs.append(Pair(response, wrong, kind, form, False))
    return pairs
