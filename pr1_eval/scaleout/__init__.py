"""Scale-out: Ray replicas fed from a work queue, Slurm-style shards and their merge.

``queue`` holds the pure scheduling logic (chunk planning, the work queue that survives a lost
replica, the scheduling simulation the bench replays); ``ray_pool`` runs replicas as Ray actors;
``shard`` and ``merge`` cut a run into deterministic slices and join them back. Nothing here is
imported by ``pr1_eval`` unless a run asks for it, so Ray stays an optional extra.
"""

from __future__ import annotations

from pathlib import Path


def summary_note(run_dir: str | Path) -> str | None:
    """One line for the end of ``pr1-eval run``: how the replicas fared (None without ``--ray``)."""
    from pr1_eval.store.run_store import RunStore

    store = RunStore(run_dir)
    info = store.read_run().scaleout if store.exists() else None
    if not info:
        return None
    lost, restarted = info.get("replicas_lost", 0), info.get("replicas_restarted", 0)
    dead_engines, given_up = info.get("engine_deaths", 0), info.get("replicas_given_up", 0)
    note = (f"ray: {info['replicas']} replica(s), {info['chunks']} chunk(s), {info['retried_chunks']} retried after "
            f"{lost} replica loss(es) ({dead_engines} dead engine(s)) and {info.get('chunk_errors', 0)} failed call(s); "
            f"{restarted} replica(s) restarted")
    if given_up:
        note += f", {given_up} given up (not back within the start timeout)"
    return note
