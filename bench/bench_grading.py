"""Grading throughput: the worker pool against sequential in-process grading.

    python bench/bench_grading.py [--n 2000] [--workers 2] [--seed 0]

Builds ``--n`` varied responses (4 samples per problem) from the MATH-500 gold answers (equivalent rewrites, exact
answers, wrong answers, boxed-only answers, answers hidden in paths, no answer; some with
parallel blocks and long reasoning), then grades them three ways in this one process:

- sequential: ``grade_responses(..., workers=0)``, math-verify on this main thread, warmed
  up as a worker is (``worker.warm_up``), so the ratios compare steady states;
- pool (cold): ``grade_responses(..., workers=N)``, a dedicated pool started for the call;
- pool (warm): the shared pool, already started, with N workers.

All three share the parent-side work (extraction, the paper's checker, de-duplication), and
must produce identical verdicts; the script checks that and prints throughput and ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

def load_golds() -> list[str]:
    """MATH-500 gold answers, from the copy packaged with pr1-eval."""
    from pr1_eval.inputs.tasks import load_task

    return [p.gold for p in load_task("math500", source="packaged").problems]


def rewrite(gold: str, rng: random.Random) -> str:
    """An equivalent but differently written form of ``gold`` (so math-verify does the work)."""
    if gold.lstrip("-").isdigit():
        n = int(gold)
        return rng.choice([f"{n}.0", f"\\frac{{{2 * n}}}{{2}}", f"{n} + 0", f"$ {n} $"])
    if "\\frac" in gold and "\\dfrac" not in gold:
        return gold.replace("\\frac", "\\dfrac")
    if "," in gold and gold.startswith(("(", "\\left(")):  # a tuple: respace it
        return gold.replace(",", " , ")
    if "\\text" in gold or "\\mbox" in gold or "," in gold:
        return f" {gold} "
    return rng.choice([f"{{{gold}}}", f"\\left({gold}\\right)", f"{gold} "])


def reasoning(rng: random.Random, words: int) -> str:
    vocab = ["so", "then", "we", "have", "x", "=", "2", "+", "\\frac{1}{2}", "check", "the", "sum", "is", "$a_n$"]
    return " ".join(rng.choice(vocab) for _ in range(words))


def make_response(gold: str, golds: list[str], rng: random.Random) -> str:
    """One response of a randomly chosen kind."""
    kind = rng.choices(["rewrite", "exact", "wrong", "boxed", "in_path", "none"], weights=[45, 15, 20, 10, 5, 5])[0]
    answer = {"rewrite": rewrite(gold, rng), "exact": gold, "wrong": rng.choice(golds)}.get(kind, gold)
    body = reasoning(rng, rng.randint(50, 600))
    if rng.random() < 0.4:  # a parallel block in the middle
        paths = "".join(f"<Path>\n{reasoning(rng, 80)}\nFinal Answer: {rng.choice(golds)}\n</Path>" for _ in range(2))
        body += f"\n<Parallel>{paths}</Parallel>\n<Summary>\n{reasoning(rng, 40)}\n</Summary>\n"
    if kind == "boxed":
        return f"{body}\nSo the answer is $\\boxed{{{answer}}}$."
    if kind == "in_path":
        return f"{body}\n<Parallel><Path>\nFinal Answer: {answer}\n</Path><Path>\nx\n</Path></Parallel>"
    if kind == "none":
        return body
    return f"{body}\nFinal Answer: ${answer}$"


def build(n: int, seed: int, k: int = 4) -> list[tuple[str, str]]:
    """``n`` responses, ``k`` adjacent samples per problem (as a run stores them)."""
    rng = random.Random(seed)
    golds = load_golds()
    return [(make_response(gold, golds, rng), gold) for gold in (golds[(i // k) % len(golds)] for i in range(n))]


def timed(label: str, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    seconds = time.perf_counter() - start
    print(f"  {label}: {seconds:.2f}s", flush=True)
    return result, seconds


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ["PR1_EVAL_GRADING_WORKERS"] = str(args.workers)  # size of the shared (warm) pool

    from pr1_eval.grading import grade_responses, shared_pool
    from pr1_eval.grading.grade import _prepare
    from pr1_eval.grading.worker import warm_up

    pairs = build(args.n, args.seed)
    keys = {p.key for p, v in (_prepare(r, g) for r, g in pairs) if v is None}
    started = time.process_time()
    for response, gold in pairs:  # the parent-side share: extraction + paper checker, no math-verify
        _prepare(response, gold)
    parent_cpu = time.process_time() - started
    print(
        f"{len(pairs)} responses, {len(keys)} distinct (gold, answer) checks for math-verify; "
        f"{os.cpu_count()} CPUs; load average before {_load()}",
        flush=True,
    )

    warm_up()  # import and warm math-verify in this process exactly as each worker warms itself
    cpu_start = time.process_time()
    sequential, t_seq = timed("sequential, in-process", grade_responses, pairs, workers=0)
    seq_cpu = time.process_time() - cpu_start
    cold, t_cold = timed(f"pool, {args.workers} workers, cold start", grade_responses, pairs, workers=args.workers)
    warmup = [(f"Final Answer: {i}/2", str(i / 2)) for i in range(1, 4 * args.workers + 1)]
    grade_responses(warmup)  # start every worker of the shared pool and warm its math-verify
    pids = shared_pool().worker_pids
    assert len(pids) == args.workers
    cpu_before = [_cpu_seconds(pid) for pid in pids]
    sent_before = shared_pool().texts_sent
    warm, t_warm = timed(f"pool, {args.workers} workers, warm", grade_responses, pairs)
    worker_cpu = [_cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
    parsed = [after - before for after, before in zip(shared_pool().texts_sent, sent_before, strict=True)]

    mismatches = sum(a != b or a != c for a, b, c in zip(sequential, cold, warm, strict=True))
    statuses: dict[str, int] = {}
    for r in sequential:
        statuses[r.grade_status] = statuses.get(r.grade_status, 0) + 1
    print(f"\nload average after {_load()} (other processes on the machine skew the wall-clock ratios)")
    print(
        f"CPU seconds: sequential {seq_cpu:.1f}; warm pool workers {' + '.join(f'{c:.1f}' for c in worker_cpu)}; "
        f"idle-machine speedup bound from CPU time {seq_cpu / max(worker_cpu):.2f}x"
    )
    checks_cpu = max(seq_cpu - parent_cpu, 1e-9)
    cores = min(os.cpu_count() or 1, args.workers)
    bound = seq_cpu / max(seq_cpu / cores, parent_cpu, checks_cpu / args.workers)
    print(
        f"what bounds the pool: of the sequential {seq_cpu:.1f} s of CPU, {parent_cpu:.1f} s is parent-side "
        f"(extraction, paper checker: it stays in this process) and {checks_cpu:.1f} s math-verify; on {cores} cores "
        f"the best a pool can do is {bound:.2f}x (parent and workers share the cores; IPC and the dispatcher add "
        f"{max(0.0, sum(worker_cpu) - checks_cpu):.1f} s of worker CPU on top)"
    )
    texts = len({text for key in keys for text in key})
    print(
        f"math-verify parses (each several times a comparison): one process {texts} distinct texts; the warm "
        f"pool's workers {' + '.join(map(str, parsed))} = {sum(parsed)} ({sum(parsed) / texts - 1:+.0%}: a text "
        f"that reaches both workers is parsed twice, e.g. a gold that is another problem's wrong answer)"
    )
    print(f"verdict mismatches between modes: {mismatches}; statuses: {statuses}")
    print(
        f"accuracy math-verify {sum(bool(r.correct) for r in sequential) / len(pairs):.3f}, "
        f"paper checker {sum(r.correct_paper for r in sequential) / len(pairs):.3f}\n"
    )
    print(f"| {'mode':<34} | {'seconds':>7} | {'responses/s':>11} | {'vs sequential':>13} |")
    print(f"|{'-' * 36}|{'-' * 9}|{'-' * 13}|{'-' * 15}|")
    for label, seconds in [
        ("sequential, in-process", t_seq),
        (f"pool, {args.workers} workers, cold start", t_cold),
        (f"pool, {args.workers} workers, warm", t_warm),
    ]:
        print(f"| {label:<34} | {seconds:7.2f} | {len(pairs) / seconds:11.0f} | {t_seq / seconds:12.2f}x |")


if __name__ == "__main__":
    main()
