"""What a user asks of a run: :class:`RunConfig`, the options of ``pr1-eval run`` as one record.

Why a module of its own: the plan (:mod:`pr1_eval.generate.plan`), its checks
(:mod:`pr1_eval.generate.preflight`), the runner and the CLI all read it; living here it ties
none of them to another. The defaults are the paper's (:mod:`pr1_eval.protocol.paper_settings`).
The record goes into ``run.json`` as given (``config``), so its field names are part of that file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pr1_eval.engines.base import SamplingConfig
from pr1_eval.protocol.paper_settings import (
    PAPER_AFTER_LAST_BLOCK,
    PAPER_K,
    PAPER_MAX_BLOCKS,
    PAPER_MAX_NEW_TOKENS,
    PAPER_MAX_PATH_TOKENS,
    PAPER_PATH_TEMPERATURE,
    PAPER_PATHS,
    PAPER_PROMPT,
    PAPER_SECONDARY_EOS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
)
from pr1_eval.scaleout.shard import parse_shard, shard_suffix

if TYPE_CHECKING:  # the rule's module brings numpy and scipy, which `pr1-eval --help` must not load
    from pr1_eval.stats.sequential import StopRule

GRADE_TIMEOUT_S = 10.0
"""Seconds one sample's grading may take before it is recorded as a timeout."""


@dataclass
class RunConfig:
    """Everything that determines a run's samples (and so goes into ``run.json``)."""

    model: str
    tasks: list[str]
    k: int = PAPER_K
    limit: int | None = None
    max_new_tokens: int = PAPER_MAX_NEW_TOKENS
    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    top_k: int = 0
    seed: int = 0
    engine: str = "auto"
    decoding: str = "sequential"
    paths: int = PAPER_PATHS
    max_blocks: int = PAPER_MAX_BLOCKS
    after_last_block: str = PAPER_AFTER_LAST_BLOCK  # end: the paper's rollout stops after the last block; continue
    path_temperature: float | None = PAPER_PATH_TEMPERATURE  # fork-join paths (official: 1.0); None: the run's
    max_path_tokens: int = PAPER_MAX_PATH_TOKENS  # fork-join per-path cap (official max_path_response_length); 0: none
    secondary_eos: str = PAPER_SECONDARY_EOS  # a second EOS id inside a path/summary: keep (official) | replace
    prompt: str = PAPER_PROMPT
    answer_policy: str | None = None  # pr1_eval.grading.policy; None: the prompt template's default
    data_dir: str | None = None
    data_source: str = "auto"  # auto | packaged | hub (pr1_eval.inputs.tasks.load_task)
    out: str | None = None
    problems_per_chunk: int | None = None
    grade_workers: int | None = None
    grade_timeout_s: float = GRADE_TIMEOUT_S
    revision: str | None = None
    step: int | None = None
    family: str | None = None  # the training job the checkpoint belongs to (``run --family``, a sweep's)
    engine_options: dict[str, Any] = field(default_factory=dict)  # only the options the user set
    ray: str | None = None  # None: this process; "auto" | "local" | ADDRESS: replicas on a Ray cluster
    replicas: int | None = None  # Ray replicas (None: the cluster's GPUs / gpus_per_replica)
    gpus_per_replica: int | None = None  # None: 1 on a cluster with GPUs, else 0
    shard: str | None = None  # "i/n": only every n-th problem from i, for job arrays (then `merge`)
    adaptive: bool = False  # draw in rounds, stop a problem once settled (pr1_eval.stats.sequential)
    round_size: int = 4  # adaptive: samples per problem per round
    adaptive_alpha: float = 0.05  # adaptive: error rate of the confidence sequence
    adaptive_margin: float = 0.5  # adaptive: settled when p is surely below it or above 1 - it

    def stop_rule(self) -> StopRule | None:
        """The adaptive run's stopping rule, checked; None for a fixed-k run."""
        if not self.adaptive:
            return None
        from pr1_eval.stats.sequential import StopRule  # numpy and scipy: only once a run is planned

        return StopRule(self.k, self.round_size, self.adaptive_alpha, self.adaptive_margin).check()

    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_p, self.top_k, self.max_new_tokens, self.seed)

    def default_out(self) -> Path:
        name = Path(self.model.rstrip("/")).name or "model"
        suffix = shard_suffix(*parse_shard(self.shard)) if self.shard else ""
        adaptive = "-adaptive" if self.adaptive else ""
        return Path("runs") / f"{name}-{self.decoding}-k{self.k}{adaptive}-seed{self.seed}{suffix}"
