"""``pr1-eval leaderboard RUNS --until-decided best|ranking``: the adaptive sweep's verdicts on runs already stored.

Why: a live sweep (or runs someone else scored) holds samples already; whether they decide which
checkpoint is best, or the ranking at ±δ, is the same question the adaptive sweep asks after each
round, with the same guarantee (:func:`pr1_eval.stats.ranking_verdicts.decide`). Runs written by
``sweep --adaptive --decide`` are replayed at their rounds; other runs get one look at the samples
every problem holds (a single look is as valid as many). "Undecided at this budget" names the gap
the samples resolve, and ``open`` the checkpoints that more samples would help.

Runs are read through the one loader (:mod:`analysis.runs.loader`), compared on the problems they
all hold, in step order (arrival order for the α reserve), else in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.runs.loader import load_runs
from pr1_eval.cli.sweep_adaptive import decision_tables
from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats.ranking_verdicts import DecideSettings, decide

SECTION = "adaptive_sweep"


def stored_matrices(samples: pd.DataFrame, names: Sequence[str]) -> tuple[list[np.ndarray], int]:
    """Per run, problems × n verdicts on the problems every run holds (n: what every problem holds)."""
    keys = samples[["task", "problem_id"]].astype(str).agg("\x1f".join, axis=1)
    frame = samples.assign(key=keys, ok=samples["correct"].fillna(False).astype(bool))
    shared = set.intersection(*(set(frame.loc[frame["run"] == n, "key"]) for n in names))
    if not shared:
        raise Pr1EvalError("the runs share no problem; --until-decided compares runs on the same problems")
    order = sorted(shared)
    out = []
    for name in names:
        part = frame[(frame["run"] == name) & frame["key"].isin(shared)].sort_values(["key", "sample_idx"])
        groups = {k: g["ok"].to_numpy() for k, g in part.groupby("key", sort=False)}
        n = min(len(groups[k]) for k in order)
        out.append(np.array([groups[k][:n] for k in order], dtype=bool).reshape(len(order), n))
    return out, len(order)


def until_decided(paths: Sequence[str | Path], question: str, delta: float, alpha: float) -> str:
    """The tables for ``leaderboard --until-decided``."""
    loaded = load_runs(paths, tokenizer=None, columns=["correct", "n_response_tokens"], blocks=False)
    if loaded.samples.empty:
        raise Pr1EvalError("no run could be loaded: " + ("; ".join(f"{p}: {r}" for p, r in loaded.failures) or
                                                         "nothing given"))
    names = list(dict.fromkeys(loaded.samples["run"]))
    steps = {n: loaded.run_info[n].model.step if n in loaded.run_info else None for n in names}
    if all(s is not None for s in steps.values()):
        names.sort(key=lambda n: steps[n] or 0)
    sections = [loaded.run_info[n].extra.get(SECTION) if n in loaded.run_info else None for n in names]
    mats, problems = stored_matrices(loaded.samples, names)
    k_max = max(m.shape[1] for m in mats)
    if all(isinstance(s, dict) for s in sections):  # one adaptive sweep: replay its rounds
        settings = DecideSettings.from_dict(sections[0])  # type: ignore[arg-type]
        settings = DecideSettings(question, alpha, delta, settings.k_max, settings.first, settings.growth,
                                  settings.planned, settings.reserve).check()
        looks = settings.bounds()
    else:
        settings, looks = DecideSettings(question, alpha, delta, k_max, k_max).check(), []
    decision = decide(mats, settings, looks)
    tokens = loaded.samples.groupby("run")["n_response_tokens"].sum()
    header = (f"until decided ({question}, δ = {100 * delta:g} points, α = {alpha:g}) on the {problems} problem(s) "
              f"all {len(names)} run(s) hold; " + ("replayed at the sweep's rounds" if looks else
                                                  "one look at the samples held"))
    return decision_tables(header, decision, names, [int(tokens.get(n, 0) or 0) for n in names],
                           [str(n) for n in names])
