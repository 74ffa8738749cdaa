"""The bootstrap's expanded tails (:func:`pr1_eval.stats.metrics.expanded_tail`) kept in a table.

Why a table: the tail needs Student's t quantile, and importing ``scipy.special`` for it took
0.4–0.7 s of CPU, about a third of the floor of a leaderboard on a 96,000-response sweep (every
report and leaderboard takes at least one interval). The tail depends only on the number of
problems and α, and nearly every call asks α = 0.05 with a few hundred or thousand problems, so
``expanded_tails.json`` holds the floats scipy gives at α = 0.05 for P = 2 … :data:`LAST_P`,
written by this module (``python -m pr1_eval.stats.tail_table --write``) from the same scalar
calls :func:`scipy_tail` makes; any other (P, α) still asks scipy. JSON writes a float's shortest
repr, which reads back as the same float. ``python -m pr1_eval.stats.tail_table`` checks every
entry against scipy on this machine (0 differences when it was written); the tests hold the table
to scipy within 1e-12 relative (another machine's libm may differ in a last bit).
"""

from __future__ import annotations

import argparse
import json
import math
from functools import lru_cache
from pathlib import Path

#: The file beside this module (package data).
TABLE = Path(__file__).with_name("expanded_tails.json")
#: The α the table is for, and its range of problem counts.
TABLED_ALPHA = 0.05
FIRST_P = 2
LAST_P = 5000


def scipy_tail(n_problems: int, alpha: float) -> float:
    """Φ(−√(P/(P−1)) · t_{P−1, 1−α/2}) for P ≥ 2 by ``scipy.special``'s ``stdtrit`` and ``ndtr``,
    the functions ``scipy.stats.t.ppf`` and ``scipy.stats.norm.cdf`` call (the same floats)."""
    from scipy.special import ndtr, stdtrit

    quantile = float(stdtrit(n_problems - 1, 1 - alpha / 2)) * math.sqrt(n_problems / (n_problems - 1))
    return float(ndtr(-quantile))


def tabled_tail(n_problems: int, alpha: float) -> float | None:
    """The table's tail for (``n_problems``, ``alpha``), or None when the table does not hold it."""
    if alpha != TABLED_ALPHA or not FIRST_P <= n_problems <= LAST_P:
        return None
    tails = _tails()
    return tails[n_problems - FIRST_P] if tails is not None else None


@lru_cache(maxsize=1)
def _tails() -> tuple[float, ...] | None:
    """The table's tails (None when the file is missing or not this table: scipy answers instead)."""
    try:
        document = json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return None
    if (document.get("alpha"), document.get("first_p"), len(document.get("tails", ()))) != (
            TABLED_ALPHA, FIRST_P, LAST_P - FIRST_P + 1):
        return None
    return tuple(float(t) for t in document["tails"])


def build() -> dict[str, object]:
    """The table's document, computed with scipy."""
    import scipy

    return {"what": "expanded bootstrap tails Phi(-sqrt(P/(P-1)) * t_{P-1, 1-alpha/2}) for P = first_p, first_p + 1, ...",
            "written_by": "python -m pr1_eval.stats.tail_table --write", "scipy": scipy.__version__,
            "alpha": TABLED_ALPHA, "first_p": FIRST_P,
            "tails": [scipy_tail(p, TABLED_ALPHA) for p in range(FIRST_P, LAST_P + 1)]}


def main(argv: list[str] | None = None) -> int:
    """``--write``: (re)write the table; else count its entries that differ from scipy here."""
    parser = argparse.ArgumentParser(description="the expanded-tail table: write it, or check it against scipy")
    parser.add_argument("--write", action="store_true", help="rewrite expanded_tails.json from scipy")
    args = parser.parse_args(argv)
    if args.write:
        TABLE.write_text(json.dumps(build()) + "\n")
        print(f"wrote {TABLE}")
        return 0
    tails = _tails()
    if tails is None:
        print(f"{TABLE}: missing or not this table")
        return 1
    differing = [p for p, t in zip(range(FIRST_P, LAST_P + 1), tails, strict=True) if t != scipy_tail(p, TABLED_ALPHA)]
    print(f"{len(tails)} tails, {len(differing)} differ from scipy here" + (f" (P = {differing[:10]})" if differing else ""))
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
