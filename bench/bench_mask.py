"""CPU bench: the structured mask builder against its token-by-token reference.

Why: repro's structured actor builds one ``[L, L]`` mask per sequence per forward; at 0.2–0.4 s per
5,000-token sequence (the reference fold) that is minutes of CPU per training step. This times
``build_mask_and_positions`` (visits only the structural tags, blanks sibling rectangles of a
causal matrix) against ``build_mask_and_positions_reference`` (one tracker push per token, dense
label comparison) on the same sequences, in this process, on one thread, and checks they agree.

    .venv/bin/python bench/bench_mask.py                 # 5,000 tokens, 4 blocks of 2 paths
    .venv/bin/python bench/bench_mask.py --length 8000 --blocks 4 --paths 3 --repeat 20

Prints one table with the ratio; ``--json FILE`` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.mask import build_mask_and_positions, build_mask_and_positions_reference

TAGS = {tag: 1 + i for i, tag in enumerate(T.ALL_TAGS)}


def paper_sequence(length: int, blocks: int, paths: int, prompt: int, seed: int = 0) -> list[int]:
    """A prompt plus a response of ``length`` tokens with ``blocks`` well-formed blocks in the
    fork-join layout, spread over the response (paths of uneven length)."""
    rng = random.Random(seed)
    response_len = length - prompt
    block_len = response_len // (blocks + 1)
    out = [rng.randrange(100, 50_000) for _ in range(prompt)]
    for _ in range(blocks):
        body = block_len - 2 * paths - 5  # <Parallel>, tags of each path, </Parallel>, \n, <Summary>, </Summary>
        main = body // 4
        path_lens = [max(1, (body - 2 * main) // paths + rng.randrange(-20, 20)) for _ in range(paths)]
        out += [rng.randrange(100, 50_000) for _ in range(main)] + [TAGS[T.PARALLEL_OPEN]]
        for n in path_lens:
            out += [TAGS[T.PATH_OPEN], *(rng.randrange(100, 50_000) for _ in range(n)), TAGS[T.PATH_CLOSE]]
        out += [TAGS[T.PARALLEL_CLOSE], 7, TAGS[T.SUMMARY_OPEN], *(rng.randrange(100, 50_000) for _ in range(main)),
                TAGS[T.SUMMARY_CLOSE]]
    out += [rng.randrange(100, 50_000) for _ in range(length - len(out))]
    return out[:length]


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best, median) wall time in seconds over ``repeat`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=5000, help="tokens per sequence, prompt included")
    parser.add_argument("--prompt", type=int, default=200, help="prompt tokens (plain causal)")
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--paths", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    seq = paper_sequence(args.length, args.blocks, args.paths, args.prompt)
    fast = build_mask_and_positions(seq, TAGS, response_start=args.prompt)
    ref = build_mask_and_positions_reference(seq, TAGS, response_start=args.prompt)
    identical = torch.equal(fast[0], ref[0]) and torch.equal(fast[1], ref[1])
    fast_t = best_of(lambda: build_mask_and_positions(seq, TAGS, response_start=args.prompt), args.repeat)
    ref_t = best_of(lambda: build_mask_and_positions_reference(seq, TAGS, response_start=args.prompt),
                    max(3, args.repeat // 3))
    rows = [("reference (token-by-token fold)", *ref_t), ("build_mask_and_positions", *fast_t)]
    print(f"structured mask, {args.length} tokens ({args.prompt} prompt), {args.blocks} blocks x {args.paths} paths, "
          f"1 CPU thread, identical output: {identical}")
    print(f"{'builder':34s} {'best ms':>9s} {'median ms':>10s}")
    for name, best, median in rows:
        print(f"{name:34s} {best * 1e3:9.2f} {median * 1e3:10.2f}")
    ratio = ref_t[0] / fast_t[0]
    print(f"speed-up (reference best / fast best): {ratio:.1f}x; goal < 10 ms per sequence: "
          f"{'met' if fast_t[0] < 0.010 else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"length": args.length, "blocks": args.blocks, "paths": args.paths, "identical": identical,
                       "fast_best_ms": fast_t[0] * 1e3, "fast_median_ms": fast_t[1] * 1e3,
                       "reference_best_ms": ref_t[0] * 1e3, "reference_median_ms": ref_t[1] * 1e3,
                       "speedup": ratio}, handle, indent=1)
    if not identical:
        raise SystemExit("the fast builder and the reference disagree")


if __name__ == "__main__":
    main()
