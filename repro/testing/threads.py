"""One torch thread count in every process of a CPU training job.

Why: a float reduction split over another number of threads rounds differently, so a job whose
processes took whatever torch chose (the core count, Ray's own default) would not give the same
figures twice. Kept apart from :mod:`repro.testing.verl_cpu`, which registers VERL's CPU platform on
import, so the rollout server can pin its threads without that side effect.
"""

from __future__ import annotations

import os

import torch


def fix_threads() -> int:
    """Pin torch's intra-op threads to ``OMP_NUM_THREADS`` (1 unless set); the count used."""
    threads = max(1, int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
