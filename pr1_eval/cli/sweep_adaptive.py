"""``pr1-eval sweep --adaptive --decide best|ranking``: its options and its end tables.

The sweep itself is :mod:`pr1_eval.generate.adaptive_sweep`; the verdicts
:mod:`pr1_eval.stats.ranking_verdicts`. What is printed: one row per checkpoint (samples per
problem it reached, tokens, its mean, best / eliminated / open), one row per comparison (Δ in points
with its confidence sequence, the verdict, or "undecided at this budget" with the gap it resolves),
and the guarantee in one line under the tables.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pr1_eval.cli.numbers import float_in, positive_int
from pr1_eval.terminal import terminal_text

#: The questions of :data:`pr1_eval.stats.ranking_sequential.QUESTIONS`, here so that building the
#: parser imports no numpy (``pr1-eval --help`` stays fast; a test holds the two equal).
QUESTIONS = ("best", "ranking")
#: The tests of :data:`pr1_eval.stats.ranking_verdicts.TESTS`, here for the same reason (a test holds them equal).
DECIDE_TESTS = ("obrien-fleming", "pocock", "cs")

if TYPE_CHECKING:
    from pr1_eval.generate.adaptive_sweep import AdaptiveSweep
    from pr1_eval.generate.config import RunConfig
    from pr1_eval.generate.sweep import SweepRequest
    from pr1_eval.stats.ranking_verdicts import Decision


FRACTION = float_in(0, 1, low_open=True, high_open=True)
"""A resolution or a level: a fraction strictly between 0 and 1 (0.05 is 5 points)."""
_growth = float_in(1, low_open=True)


def add_decide_options(p: argparse.ArgumentParser) -> None:
    """The comparison-level rule's options (sweep only)."""
    p.add_argument("--decide", choices=QUESTIONS, default=None,
                   help="with --adaptive: sample the checkpoints in rounds until the question is decided with an "
                        "guarantee valid at every round (best: which checkpoint is best, within --delta; ranking: every "
                        "pair's sign or 'within ±delta'), or until -k samples per problem (k_max); --adaptive-alpha is "
                        "the chance of any wrong verdict across the sweep")
    p.add_argument("--decide-test", choices=DECIDE_TESTS, default=None,
                   help="with --decide: the test looked at after every round. obrien-fleming (the default for "
                        "ranking): the fixed-k z-test with alpha spent over the rounds up to -k, so running to k_max "
                        "decides what fixed k decides, and decided checkpoints stop early; pocock (the default for "
                        "best): spends alpha evenly over the rounds, so checkpoints clearly behind are dropped after a "
                        "round or two whatever -k is; cs: confidence sequences, valid with no k_max (a sweep that may "
                        "run on), about 1.3x wider at any one look")
    p.add_argument("--delta", type=FRACTION, default=0.05, metavar="D",
                   help="with --decide: resolution, a fraction of problems solved (default 0.05 = 5 points)")
    p.add_argument("--first-round", type=positive_int, default=4, metavar="N",
                   help="with --decide: samples per problem in the first round (default 4)")
    p.add_argument("--round-growth", type=_growth, default=2.0, metavar="G",
                   help="with --decide: each round's samples per problem = the last's × G (default 2: a model is "
                        "loaded about log2(k/first) + 1 times)")


def default_test(question: str) -> str:
    """The test a question gets unless ``--decide-test`` names one. Measured on the budget testbed
    (``bench/bench_ranking.py``, docs/performance.md): for the best, Pocock's spending drops the
    checkpoints clearly behind in the first rounds at any k_max (0.26-0.29 of fixed k = 16's samples on
    AIME24 for k_max 8-64) where O'Brien-Fleming's waits for a share of k_max (0.34 at 8, 0.85 at 64);
    for the ranking, O'Brien-Fleming's keeps the last look's power (at or above fixed k everywhere)
    where Pocock's falls below it at k = 8-16."""
    return "pocock" if question == "best" else "obrien-fleming"


def decided_sweep(args: argparse.Namespace, request: SweepRequest, config: RunConfig) -> int:
    """Run the adaptive sweep and print its tables; exit 1 when a checkpoint failed."""
    from pr1_eval.generate.adaptive_sweep import run_adaptive_sweep
    from pr1_eval.generate.sweep import plan_sweep
    from pr1_eval.stats.ranking_verdicts import DecideSettings

    settings = DecideSettings(args.decide, args.adaptive_alpha, args.delta, args.k, args.first_round,
                              args.round_growth, test=args.decide_test or default_test(args.decide)).check()
    result = run_adaptive_sweep(plan_sweep(request, config), settings)
    print("\n" + format_decision(result))
    return 1 if any(r.status == "failed" for r in result.rows) else 0


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def format_decision(result: AdaptiveSweep) -> str:
    """The checkpoints' table, the comparisons' table and the guarantee line."""
    d = result.decision
    s = d.settings
    header = (f"adaptive sweep ({s.question}, δ = {100 * s.delta:g} points, α = {s.alpha:g}, k_max = {s.k_max}): "
              f"{result.rounds} round(s) this session; record {terminal_text(result.record)}")
    places = [terminal_text(r.run_dir if r.run_dir else (r.reason or "-")) for r in result.rows]
    failed = [r.status == "failed" for r in result.rows]
    return decision_tables(header, d, [r.checkpoint.label for r in result.rows], result.tokens, places, failed)


def checkpoint_status(d: Decision, i: int, failed: bool = False) -> str:
    """What checkpoint ``i`` is in a decision: best, eliminated, failed, open (more samples help) or done."""
    return ("best" if d.best == i else "eliminated" if d.eliminated[i] else
            "failed" if failed else "open" if d.open[i] else "done")


def verdict_text(verdict: str, resolved: float, delta: float) -> str:
    """A comparison's verdict as printed (tables, page): the side, within ±δ in points, or the gap it resolves."""
    return {"a better": "A better", "b better": "B better", "within ±δ": f"within ±{100 * delta:g}"}.get(
        verdict, f"undecided at this budget (resolves ±{100 * resolved:.1f})")


def decision_tables(header: str, d: Decision, names: list[str], tokens: list[int], places: list[str],
                    failed: list[bool] | None = None) -> str:
    """The tables of a decision, for a sweep or for stored runs (``leaderboard --until-decided``)."""
    s = d.settings
    labels = [terminal_text(n) for n in names]
    failed = failed or [False] * len(names)
    lines = [header]
    table: list[list[Any]] = [["checkpoint", "samples/problem", "tokens", "mean", "status", "run / reason"]]
    for i, label in enumerate(labels):
        table.append([label, str(d.held[i]), f"{tokens[i]:,}", f"{d.means[i]:.3f}" if d.held[i] else "-",
                      checkpoint_status(d, i, failed[i]), places[i]])
    lines += _columns(table)
    pairs: list[list[Any]] = [["A", "B", "n", "Δ (points)", "interval", "verdict"]]
    for p in d.pairs:
        pairs.append([labels[p.a], labels[p.b], str(p.pairs), _points(p.estimate),
                      f"[{_points(p.low)}, {_points(p.high)}]", verdict_text(p.verdict, p.resolved, s.delta)])
    lines += [""] + _columns(pairs)
    if s.question == "best":
        lines.append("best: " + (labels[d.best] if d.best is not None else
                                 "undecided at this budget (candidates: " + ", ".join(
                                     labels[i] for i in range(len(labels)) if not d.eliminated[i]) + ")"))
    from pr1_eval.stats.ranking_sequential import guarantee_line

    lines.append(guarantee_line(s.alpha, s.delta, s.question, s.test, s.k_max))
    return "\n".join(lines)


def _columns(table: list[list[Any]]) -> list[str]:
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]) - 1)]
    return ["  ".join(str(c).rjust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + str(row[-1])
            for row in table]
