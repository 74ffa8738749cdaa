"""Benchmark: path-diversity analysis of N two-path blocks (default 10,000) on this machine.

Measures, in one process with one loaded model (its load time reported apart):

1. ours, cold cache: :func:`analysis.diversity.paths.diversity` (BLEU + cosine) with every distinct
   path text embedded once, in length-sorted batches, and written to a fresh disk cache;
2. ours, warm cache: the same analysis again with a new embedder on that cache (no model);
3. the naive baseline: each block's pair embedded by its own ``model.encode([a, b])`` call,
   timed on a subsample of blocks and extrapolated linearly to N (said so in the output).

Path texts are real teacher paths from ``parallel_gsm8k.jsonl`` (891 distinct, mean ~190
characters), each suffixed with a block-unique tag so that all 2N texts are distinct: the
cache and deduplication get no free wins, the comparison is batching against per-pair calls.

BLEU alone is compared with the baseline scorer (:class:`BaselinePairBleu`: each text's n-grams
in ``Counter`` objects, a 256-text memo, sacrebleu's ``_compute_score_from_stats`` per direction),
in CPU seconds of this one process, on the same pairs (every score checked identical); with
``--bleu-runs DIR`` on the blocks of stored runs instead (e.g. a sweep), ``--bleu-pairs`` at most.

It also prints the embedding cost per 10,000 distinct paths (the cold run's model and cache
time over its texts), the same at the model's 256-token cap (``--long-sample`` texts of six
joined paths each: a long path costs what a 256-token one does, since the model truncates),
and, from both, what embedding the ``--sweep-paths`` distinct paths of a 12 × 500 × 16 sweep
costs on a first analysis and on a second one (every vector from the cache).

    .venv/bin/python bench/bench_diversity.py [--blocks 10000] [--naive-sample 300] [--batch-size 64]
        [--bleu-runs DIR [--bleu-pairs N]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from analysis.common.real_data import default_source  # noqa: E402
from analysis.diversity.bleu import _Counted, scorer  # noqa: E402
from analysis.diversity.embedding import load_embedding_model  # noqa: E402
from analysis.diversity.paths import symmetric_bleu  # noqa: E402
from analysis.engine.shards import ResultCache, hash_key  # noqa: E402
from analysis.pipeline.scheduled import Embedder, bleu_scores, pairs_of  # noqa: E402
from pr1_eval.errors import Pr1EvalError  # noqa: E402

#: The 34-row slice of the same file that the tests use: a fresh clone (CI) has no training folder.
FIXTURE_SLICE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "parallel_gsm8k.jsonl"


def trace_file(given: str | None) -> Path:
    """``--source``, else the shared training file, else the fixture slice (said on stdout)."""
    if given:
        return Path(given)
    try:
        return default_source()
    except Pr1EvalError:
        print(f"no training folder (PR1_TRAINING_DIR): path texts from the test slice {FIXTURE_SLICE.name}")
        return FIXTURE_SLICE


def real_paths(source: Path) -> list[str]:
    """Distinct path texts of the real traces (regex over the raw file, tags excluded)."""
    texts: list[str] = []
    with source.open(encoding="utf-8") as handle:
        for line in handle:
            for body in re.findall(r"<Path>(.*?)</Path>", json.loads(line)["response"], flags=re.DOTALL):
                texts.append(body.strip())
    return list(dict.fromkeys(t for t in texts if t))


def make_blocks(n_blocks: int, texts: list[str]) -> pd.DataFrame:
    """``n_blocks`` two-path blocks in the loader's block layout; all 2n texts distinct."""
    rows = []
    for i in range(n_blocks):
        a, b = texts[(2 * i) % len(texts)], texts[(2 * i + 1) % len(texts)]
        rows.append({"run": "bench", "task": "bench", "problem_id": f"p{i}", "sample_idx": 0, "block_idx": 0,
                     "model_family": "bench", "step": None, "decoding": "bench",
                     "path_texts": [f"{a} [{i}a]", f"{b} [{i}b]"]})
    return pd.DataFrame(rows)


def naive_seconds_per_block(model: object, blocks: pd.DataFrame) -> float:
    """Per-block time of the naive baseline: BLEU plus one encode call per pair."""
    start = time.perf_counter()
    for texts in blocks["path_texts"]:
        a, b = texts
        symmetric_bleu(a, b)
        va, vb = model.encode([a, b], normalize_embeddings=True, show_progress_bar=False)  # type: ignore[attr-defined]
        float(np.dot(va, vb))
    return (time.perf_counter() - start) / len(blocks)


class BaselinePairBleu:
    """The baseline BLEU scorer: per distinct text, ``Counter`` n-grams (``analysis.diversity.bleu._Counted``),
    at most 256 texts held; per pair, clipped matches by set intersection and sacrebleu's
    ``_compute_score_from_stats`` for each direction; no cache."""

    def __init__(self) -> None:
        self._texts: dict[str, _Counted] = {}

    def _counted(self, text: str) -> _Counted:
        if text not in self._texts:
            if len(self._texts) >= 256:
                self._texts.clear()
            self._texts[text] = _Counted(text)
        return self._texts[text]

    def scores(self, pairs: list[tuple[str, str]]) -> list[float | None]:
        out: list[float | None] = []
        bleu = scorer()
        for a, b in pairs:
            if not a.strip() or not b.strip():
                out.append(None)
                continue
            hash_key(*sorted((hash_key(a), hash_key(b))))  # the cache key, as the scorer computes it
            first, second = self._counted(a), self._counted(b)
            correct = [sum(min(ca[g], cb[g]) for g in ca.keys() & cb.keys())
                       for ca, cb in zip(first.by_order, second.by_order, strict=True)]
            one = bleu._compute_score_from_stats([first.length, second.length, *correct, *first.totals]).score
            two = bleu._compute_score_from_stats([second.length, first.length, *correct, *second.totals]).score
            out.append((float(one) + float(two)) / 200.0)
        self._texts.clear()
        return out


def sibling_pairs(path_lists: list[list[str]]) -> list[tuple[str, str]]:
    """Every pair of sibling paths, block by block (as :func:`analysis.diversity.paths.diversity` lists them)."""
    return [(paths[i], paths[j]) for paths in path_lists for i in range(len(paths)) for j in range(i + 1, len(paths))]


def bleu_ratio(pairs: list[tuple[str, str]]) -> dict[str, float]:
    """CPU seconds of the scorer (memory-only cache) and of the baseline on ``pairs``; identical scores."""
    start = time.process_time()
    ours = bleu_scores(pairs, cache=ResultCache(None)).result()
    ours_s = time.process_time() - start
    start = time.process_time()
    baseline = BaselinePairBleu().scores(pairs)
    baseline_s = time.process_time() - start
    if ours != baseline:
        raise SystemExit("bench_diversity: the BLEU scores differ from the baseline's")
    texts = len({t for pair in pairs for t in pair})
    print(f"BLEU, {len(pairs)} pairs of {texts} distinct texts, CPU of this process: ours {ours_s:.2f} s, "
          f"baseline {baseline_s:.2f} s: {baseline_s / max(ours_s, 1e-9):.1f}x less; every score identical")
    return {"bleu_pairs": len(pairs), "bleu_cpu_s": round(ours_s, 3), "bleu_baseline_cpu_s": round(baseline_s, 3),
            "bleu_ratio": round(baseline_s / max(ours_s, 1e-9), 2)}


def run_blocks(runs: str, limit: int) -> list[tuple[str, str]]:
    """The sibling pairs of the stored runs under ``runs``, the first ``limit``."""
    from analysis.runs.loader import load_runs

    loaded = load_runs(runs, tokenizer=None)
    return sibling_pairs([list(p) for p in loaded.blocks["path_texts"]])[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--naive-sample", type=int, default=300, help="blocks timed for the naive baseline")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--long-sample", type=int, default=400,
                        help="texts at the 256-token cap timed (at most --blocks)")
    parser.add_argument("--sweep-paths", type=int, default=327_000,
                        help="distinct paths of the sweep to extrapolate to (bench_dashboard's 12 x 500 x 16 sweep: "
                             "148,705 blocks x 2.2 paths per block)")
    parser.add_argument("--source", default=None, metavar="FILE",
                        help="traces with <Path> blocks (default: parallel_gsm8k.jsonl of the training folder, "
                             "else the tests' slice of it)")
    parser.add_argument("--bleu-runs", default=None, metavar="DIR",
                        help="compare BLEU with the baseline on the blocks of these stored runs (e.g. a sweep)")
    parser.add_argument("--bleu-pairs", type=int, default=1_000_000, help="at most this many pairs of --bleu-runs")
    args = parser.parse_args()
    import torch

    texts = real_paths(trace_file(args.source))
    blocks = make_blocks(args.blocks, texts)
    print(f"machine: {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, load average "
          f"{os.getloadavg()[0]:.1f}; {args.blocks} two-path blocks from {len(texts)} real path texts, "
          f"{2 * args.blocks} distinct texts, mean {np.mean([len(t) for p in blocks['path_texts'] for t in p]):.0f} chars")
    start = time.perf_counter()
    model = load_embedding_model("all-MiniLM-L6-v2", device="cpu")
    print(f"model load (excluded below): {time.perf_counter() - start:.1f} s")
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        pairs_of(blocks, None)
        bleu_s = time.perf_counter() - start
        cold = Embedder("all-MiniLM-L6-v2", cache_dir=cache, batch_size=args.batch_size, model=model)
        start = time.perf_counter()
        pairs = pairs_of(blocks, cold)
        ours_s = time.perf_counter() - start
        warm = Embedder("all-MiniLM-L6-v2", cache_dir=cache, batch_size=args.batch_size)
        start = time.perf_counter()
        again = pairs_of(blocks, warm)
        warm_s = time.perf_counter() - start
        assert not warm.model_loaded and np.allclose(again["cosine"], pairs["cosine"])
    long_texts = [" ".join(texts[(i + j) % len(texts)] for j in range(6)) + f" [{i}]"
                  for i in range(min(args.long_sample, args.blocks))]
    capped = Embedder("all-MiniLM-L6-v2", cache_dir=False, batch_size=args.batch_size, model=model)
    capped.embed(long_texts)
    sample = blocks.sample(n=min(args.naive_sample, len(blocks)), random_state=0)
    naive_s = naive_seconds_per_block(model, sample) * len(blocks)
    result = {"blocks": args.blocks, "ours_cold_s": round(ours_s, 1), "ours_bleu_only_s": round(bleu_s, 1),
              "ours_embedded_texts": cold.n_encoded, "ours_warm_cache_s": round(warm_s, 1),
              "naive_s_extrapolated": round(naive_s, 1), "naive_sample_blocks": len(sample),
              "speedup_cold": round(naive_s / ours_s, 2), "speedup_warm": round(naive_s / warm_s, 1),
              "bleu_mean": round(float(pairs["bleu"].mean()), 4), "cosine_mean": round(float(pairs["cosine"].mean()), 4)}
    print(f"ours, cold cache : {ours_s:8.1f} s  ({bleu_s:.1f} s of it BLEU; {cold.n_encoded} texts embedded once, "
          f"batch {args.batch_size})")
    print(f"ours, warm cache : {warm_s:8.1f} s  (no model loaded; every vector from the disk cache)")
    print(f"naive baseline   : {naive_s:8.1f} s  EXTRAPOLATED from {len(sample)} blocks timed "
          f"({naive_s / len(blocks) * 1000:.1f} ms/block x {len(blocks)})")
    print(f"speed-up vs naive: {naive_s / ours_s:.2f}x cold, {naive_s / warm_s:.0f}x warm")
    per_10k = cold.encode_seconds / cold.n_encoded * 10_000
    long_10k = capped.encode_seconds / max(1, capped.n_encoded) * 10_000
    warm_10k = warm_s / (2 * args.blocks) * 10_000
    threads = torch.get_num_threads()
    print(f"embeddings: {per_10k:.0f} s per 10,000 distinct paths (batch {args.batch_size}, threads {threads}; "
          f"these paths: mean {np.mean([len(t) for t in texts]):.0f} chars)")
    print(f"embeddings at the 256-token cap: {long_10k:.0f} s per 10,000 distinct paths ({capped.n_encoded} timed)")
    print(f"warm cache: {warm_10k:.1f} s per 10,000 paths (BLEU, cache read and cosines, no model)")
    sweep = args.sweep_paths / 10_000
    print(f"sweep of {args.sweep_paths:,} distinct paths: first analysis {sweep:.1f} x {per_10k:.0f} s = "
          f"{sweep * per_10k / 3600:.1f} h (short paths) to {sweep:.1f} x {long_10k:.0f} s = "
          f"{sweep * long_10k / 3600:.1f} h (paths at the cap) of embedding; a second analysis reads every vector "
          f"from the cache")
    pairs_for_bleu = (run_blocks(args.bleu_runs, args.bleu_pairs) if args.bleu_runs
                      else sibling_pairs([list(p) for p in blocks["path_texts"]]))
    result.update(bleu_ratio(pairs_for_bleu))
    result.update({"embed_s_per_10k": round(per_10k, 1), "embed_s_per_10k_at_cap": round(long_10k, 1),
                   "batch_size": args.batch_size, "torch_threads": threads})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
