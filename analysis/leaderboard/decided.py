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

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.common.safe_text import html_text
from analysis.leaderboard.page import html_table, page
from analysis.runs.loader import load_runs
from pr1_eval.cli.sweep_adaptive import checkpoint_status, decision_tables, verdict_text
from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats.ranking_sequential import guarantee_line
from pr1_eval.stats.ranking_verdicts import DecideSettings, Decision, decide
from pr1_eval.store.safe_write import write_atomic

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


def until_decided(paths: Sequence[str | Path], question: str, delta: float, alpha: float, test: str | None = None,
                  as_json: bool = False, html: str | Path | None = None) -> str:
    """The tables (or, ``as_json``, the JSON document) for ``leaderboard --until-decided``; ``html``: also
    write the page there."""
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
    if all(isinstance(s, dict) for s in sections):  # one adaptive sweep: replay its rounds, with its test
        recorded = DecideSettings.from_dict(sections[0])  # type: ignore[arg-type]
        settings = DecideSettings(question, alpha, delta, recorded.k_max, recorded.first, recorded.growth,
                                  recorded.planned, recorded.reserve, test or recorded.test).check()
        looks = settings.bounds()
    else:
        settings, looks = DecideSettings(question, alpha, delta, k_max, k_max, test=test or "obrien-fleming").check(), []
    decision = decide(mats, settings, looks)
    tokens = loaded.samples.groupby("run")["n_response_tokens"].sum()
    spent = [int(tokens.get(n, 0) or 0) for n in names]
    how = "replayed at the sweep's rounds" if looks else "one look at the samples held"
    doc = decision_document(decision, [str(n) for n in names], spent, problems, how)
    if html is not None:
        write_atomic(html, page("pr1-eval: until decided", decided_body(doc)))
    if as_json:
        return json.dumps(doc, indent=2)
    header = (f"until decided ({question}, δ = {100 * delta:g} points, α = {alpha:g}) on the {problems} problem(s) "
              f"all {len(names)} run(s) hold; {how}")
    return decision_tables(header, decision, names, spent, [str(n) for n in names])


def decision_document(d: Decision, names: list[str], tokens: list[int], problems: int, how: str) -> dict[str, object]:
    """The decision as JSON: settings, one entry per checkpoint and per comparison (names, not indices; Δ and its
    interval as fractions), the best, and the guarantee line."""
    s = d.settings
    checkpoints = [{"run": name, "samples_per_problem": d.held[i], "tokens": tokens[i],
                    "mean": d.means[i] if d.held[i] else None,
                    "status": checkpoint_status(d, i)} for i, name in enumerate(names)]
    comparisons = [{**{k: v for k, v in asdict(p).items() if k not in ("a", "b")}, "a": names[p.a], "b": names[p.b]}
                   for p in d.pairs]
    return {"question": s.question, "settings": s.to_dict(), "problems": problems, "looks": how,
            "checkpoints": checkpoints, "comparisons": comparisons, "finished": d.finished,
            "best": names[d.best] if d.best is not None else None,
            "guarantee": guarantee_line(s.alpha, s.delta, s.question, s.test, s.k_max)}


def decided_body(doc: dict[str, object]) -> str:
    """The page's body: the question, the checkpoints, the comparisons (Δ in points over its interval) and the
    guarantee, from :func:`decision_document`."""
    settings = doc["settings"]
    assert isinstance(settings, dict)
    delta = float(settings["delta"])
    runs = [{"run": c["run"], "samples / problem": str(c["samples_per_problem"]), "tokens": f"{c['tokens']:,}",
             "mean": "-" if c["mean"] is None else f"{c['mean']:.3f}", "status": c["status"]}
            for c in doc["checkpoints"]]  # type: ignore[attr-defined]
    pairs = [{"run": p["a"], "vs": p["b"], "n": str(p["pairs"]),
              "Δ (points)": f"{100 * p['estimate']:+.1f} [{100 * p['low']:+.1f}, {100 * p['high']:+.1f}]",
              "verdict": verdict_text(p["verdict"], p["resolved"], delta)}
             for p in doc["comparisons"]]  # type: ignore[attr-defined]
    best = doc["best"] if doc["best"] is not None else "undecided at this budget"
    head = (f"{doc['question']}, δ = {100 * delta:g} points, α = {settings['alpha']:g}, test {settings['test']}, on the "
            f"{doc['problems']} problem(s) every run holds; {doc['looks']}")
    return (f"<p class='note'>{html_text(head)}</p><h2>Checkpoints</h2>{html_table(runs)}"
            + (f"<p><b>best:</b> {html_text(str(best))}</p>" if doc["question"] == "best" else "")
            + f"<h2>Comparisons</h2>{html_table(pairs)}<p class='note'>{html_text(str(doc['guarantee']))}</p>")
