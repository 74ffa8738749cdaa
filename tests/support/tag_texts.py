"""Random responses, well-formed or broken, for the tests that hold a fast structure reader
against the general parser (:func:`pr1_eval.protocol.parse.parse_structure`).

Shared by the protocol's scan tests and the analysis loader's block-parse tests, so both readers
meet the same texts: nested and summary-less blocks, look-alike tags that are plain text, and
tags dropped, doubled, moved or cut off.
"""

from __future__ import annotations

import random

TAGS = ["<Parallel>", "</Parallel>", "<Path>", "</Path>", "<Summary>", "</Summary>"]
#: Plain text, look-alikes and broken tags the parser must read as text.
PIECES = ["", " ", "\n", "x = 1", "a<b", "<Parallelogram>", "<path>", "</Paths>", "<Parallel", "Path>",
          "<<", "</", "Final Answer: 3", "\\boxed{7}", "<Summary >", "é ∑"]


def well_formed(rng: random.Random) -> str:
    """Text, then 0-4 blocks of 2-5 paths, each closed and followed by its summary."""
    out = [rng.choice(PIECES)]
    for _ in range(rng.randint(0, 4)):
        out.append("<Parallel>" + rng.choice(PIECES))
        for _ in range(rng.randint(2, 5)):
            out.append(f"<Path>{rng.choice(PIECES)} {rng.choice(PIECES)}</Path>{rng.choice(PIECES)}")
        out.append(f"</Parallel>{rng.choice(PIECES)}<Summary>{rng.choice(PIECES)}</Summary>{rng.choice(PIECES)}")
    return "".join(out)


def mutated(rng: random.Random, text: str) -> str:
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
