"""The wall clock of a generated run's engine calls: run.json's ``generation`` section.

Why per wave and not only per sample: a sample's ``wall_s`` (:class:`pr1_eval.records.sample.SampleRecord`)
says how long the batch kept it waiting, but fork-join's cost is in its waves (one engine call for
every sample at the same protocol step), and whether the paths' waves are short beside the main
line's is what says if parallel paths buy time on this engine. Each decoder lists the engine calls
of its last ``decode`` (:class:`pr1_eval.decoding.base.Wave`); the runner gives them here chunk by
chunk, and the section is written with the run's final ``run.json``::

    "generation": {
      "scope": "session",         # the session that finished the run (a resume's earlier ones are not in it)
      "decoding": "forkjoin",
      "chunks": 2, "samples": 16, "waves_total": 9,
      "wall_s": 1.93,             # sum of every wave's seconds
      "by_kind": {"main": {"waves": 4, "requests": 40, "wall_s": 1.1}, "paths": {...}, "summary": {...}},
      "waves": [{"chunk": 0, "kind": "main", "requests": 4, "wall_s": 0.41}, ...]
    }

Runs on a Ray pool decode in their replicas: they keep each sample's ``wall_s`` but write no
``generation`` section. See docs/efficiency.md for what these seconds do and do not say.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pr1_eval.decoding.base import Wave

#: Waves listed one by one; beyond this only ``by_kind`` and the totals grow (run.json stays small).
MAX_LISTED_WAVES = 5000


class WaveLog:
    """The waves of every chunk this session decoded, for run.json's ``generation`` section."""

    def __init__(self, decoding: str) -> None:
        self.decoding = decoding
        self.chunks = 0
        self.samples = 0
        self.waves: list[tuple[int, Wave]] = []
        self.by_kind: dict[str, dict[str, Any]] = {}
        self.total = 0

    def add(self, waves: Sequence[Wave], samples: int) -> None:
        """The waves of one decoded chunk of ``samples`` samples."""
        for wave in waves:
            kind = self.by_kind.setdefault(wave.kind, {"waves": 0, "requests": 0, "wall_s": 0.0})
            kind["waves"] += 1
            kind["requests"] += wave.requests
            kind["wall_s"] += wave.wall_s
            self.total += 1
            if len(self.waves) < MAX_LISTED_WAVES:
                self.waves.append((self.chunks, wave))
        self.chunks += 1
        self.samples += samples

    def section(self) -> dict[str, Any] | None:
        """run.json's ``generation`` section; None when nothing was decoded (a run resumed when complete)."""
        if not self.chunks:
            return None
        return {
            "scope": "session", "decoding": self.decoding, "chunks": self.chunks, "samples": self.samples,
            "waves_total": self.total, "wall_s": round(sum(k["wall_s"] for k in self.by_kind.values()), 6),
            "by_kind": {name: {**kind, "wall_s": round(kind["wall_s"], 6)} for name, kind in self.by_kind.items()},
            "waves": [{"chunk": chunk, "kind": w.kind, "requests": w.requests, "wall_s": round(w.wall_s, 6)}
                      for chunk, w in self.waves],
            "waves_listed": len(self.waves),
        }
