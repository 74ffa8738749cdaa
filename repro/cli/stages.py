"""``pr1-repro stages``: list the training stages ``pr1-repro run`` knows."""

from __future__ import annotations

import argparse

from repro.stages import STAGES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stages", help="list the stages", description="List the training stages `pr1-repro run` knows, "
                       "with what each starts from and trains on.")
    p.set_defaults(func=cmd_stages)


def cmd_stages(args: argparse.Namespace, extra: list[str]) -> int:
    for stage in STAGES.values():
        kind = "structured" if stage.structured else "causal"
        print(f"{stage.name:13} {stage.kind:4} {kind:10} from {stage.start_from:18} {stage.paper}")
    return 0
