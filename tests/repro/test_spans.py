"""Structured positions and mask from the rollout's path spans (repro.spans) beside the parse.

On well-formed blocks both readings agree cell for cell; when the model writes a tag inside a path
the parse reads structure the rollout never had, while the spans keep what generation did. The
expected positions for that case come from the official ``append_tokens`` rule restated here:
shift each path so its first token sits at ``base = p + 1``, then put the token after the block at
``base + longest + 1`` where ``longest`` is the largest ``last position − base`` of the paths.
"""

from __future__ import annotations

import asyncio

import torch

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.mask import build_mask_and_positions
from repro.agent_loop import ForkJoinAgentLoop, WeightVersions
from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput
from repro.spans import SPANS_KEY, mask_and_positions_from_spans
from repro.structured_actor import structured_batch

EOS, NL = 0, 7
PO, PC, HO, HC, SO, SC = 1, 2, 3, 4, 5, 6
TAGS = dict(zip(T.ALL_TAGS, (PO, PC, HO, HC, SO, SC), strict=True))
PROMPT = [50, 51, 52]


def scripted(paths: list[list[int]], blocks: int = 2):
    """Main line opens ``blocks`` blocks; paths are served from ``paths`` in order."""
    queue = list(paths)

    async def generate(prompt: list[int], stops: list[int], max_tokens: int, temperature: float | None) -> RawOutput:
        if prompt[-1] == HO:
            out = queue.pop(0) if queue else [20, HC]
        elif prompt[-1] == SO:
            out = [30, 31, SC]
        elif prompt.count(PO) < blocks:
            out = [11, 12, PO]
        else:
            out = [13, EOS]
        return RawOutput(out[:max_tokens])

    return generate


def run(paths: list[list[int]], blocks: int = 2, cap: int = 4096):
    config = ForkJoinConfig(response_length=200, max_path_response_length=cap)
    return asyncio.run(ForkJoinRollout(TAGS, [EOS], [NL], config, scripted(paths, blocks)).run(list(PROMPT)))


def official_positions(length: int, spans: list[tuple[int, int, int]], start: int) -> list[int]:
    """The official loop's position rule, restated (two paths per block)."""
    positions = list(range(length))
    for block in sorted({b for b, _, _ in spans}):
        paths = [(start + s, start + e) for b, s, e in spans if b == block]
        base = positions[paths[0][0] - 1] + 1
        longest = 0
        for s, e in paths:
            shift = positions[s] - base
            positions[s:e] = [p - shift for p in positions[s:e]]
            longest = max(longest, positions[e - 1] - base)
        after = paths[-1][1]
        if after < length:
            shift2 = positions[after] - (base + longest + 1)
            positions[after:] = [p - shift2 for p in positions[after:]]
    return positions


def test_spans_equal_the_parse_on_well_formed_blocks() -> None:
    traj = run([[20, 21, 22, HC], [23, HC], [24, 25, EOS], [26, 27, 28, 29, 40, 41, 42]], cap=5)
    sequence = [*PROMPT, *traj.ids]
    assert [b for b, _, _ in traj.path_spans] == [0, 0, 1, 1]
    by_spans = mask_and_positions_from_spans(len(sequence), traj.path_spans, len(PROMPT))
    by_parse = build_mask_and_positions(sequence, TAGS, response_start=len(PROMPT))
    assert torch.equal(by_spans[0], by_parse[0]) and torch.equal(by_spans[1], by_parse[1])
    assert by_spans[1].tolist() == official_positions(len(sequence), traj.path_spans, len(PROMPT))


def test_a_tag_inside_a_path_keeps_the_rollouts_structure() -> None:
    traj = run([[20, PO, 21, HC], [22, 23, 24, 25, HC]], blocks=1)
    sequence = [*PROMPT, *traj.ids]
    spans = traj.path_spans
    mask, positions = mask_and_positions_from_spans(len(sequence), spans, len(PROMPT))
    parse_mask, parse_positions = build_mask_and_positions(sequence, TAGS, response_start=len(PROMPT))
    assert positions.tolist() == official_positions(len(sequence), spans, len(PROMPT))
    (_, s1, e1), (_, s2, e2) = [(b, len(PROMPT) + s, len(PROMPT) + e) for b, s, e in spans]
    assert not mask[s2:e2, s1:e1].any(), "the second path never sees the first, as generated"
    assert mask[e2:, :e2].all(), "after the block everything is visible"
    assert not torch.equal(mask, parse_mask) and not torch.equal(positions, parse_positions)
    assert int((mask != parse_mask).sum()) > 0


def test_the_actor_batch_and_the_agent_loop_output_carry_the_spans() -> None:
    traj = run([[20, PO, 21, HC], [22, 23, HC]], blocks=1)
    sequence = [*PROMPT, *traj.ids]
    with_spans, _ = structured_batch([sequence], TAGS, [len(PROMPT)], spans=[traj.path_spans])
    parsed, _ = structured_batch([sequence], TAGS, [len(PROMPT)], spans=[None])
    expected, _ = mask_and_positions_from_spans(len(sequence), traj.path_spans, len(PROMPT))
    assert torch.equal(with_spans[0, 0], expected) and not torch.equal(parsed[0, 0], expected)
    out = ForkJoinAgentLoop._output(None, PROMPT, traj, 0.0, False, WeightVersions())  # type: ignore[arg-type]
    assert out.extra_fields[SPANS_KEY] == [list(span) for span in traj.path_spans]
