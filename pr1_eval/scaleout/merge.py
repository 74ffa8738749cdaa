"""``pr1-eval merge SHARD_RUN… --out RUN``: join the shards of a job array into one run.

Refused, with every reason named, unless: each folder is a finished ``--shard`` run; all share
every setting that decides the samples (model, k, seed, sampling, decoding, prompt, answer policy, limit, tasks
with their versions and data hashes, shard count, engine backend); the shard indices are exactly
``0..n-1``, each once (a missing or repeated shard is named); the shards' problems are disjoint and
together are every problem of every task; each shard holds exactly k samples of each of its
problems. The merged run is an ordinary run — the same ``run.json`` layout, no ``shard`` section,
``merged_from`` listing the shards — so ``report``, ``analysis`` and a resumed ``run`` read it like
any other. Duplicated sample keys are refused before anything is written.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.provenance import now_iso
from pr1_eval.records.run import RunRecord, task_entries, task_entry
from pr1_eval.store.out_folder import check_new_run_folder
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore


@dataclass
class ShardRun:
    """One shard folder: its run record and the sample keys it stores."""

    path: Path
    info: RunRecord
    keys: list[tuple[str, str, int]]

    @property
    def shard(self) -> dict[str, Any]:
        return self.info.shard or {}

    @property
    def index(self) -> int:
        return int(self.shard["index"])

    @property
    def label(self) -> str:
        return f"{self.path} (shard {self.index}/{self.shard['count']})"


def settings_of(info: RunRecord) -> dict[str, Any]:
    """Everything that must be equal across the shards of one run."""
    shard = info.shard or {}
    return {
        "model": dataclasses.asdict(info.model),
        "k": info.k,
        "seed": info.seed,
        "sampling": info.sampling,
        "decoding": info.decoding,
        "prompt": info.prompt.sha256 if info.prompt is not None else None,
        "limit": info.limit,
        "answer policy": info.policy,
        "shard count": shard.get("count"),
        "engine": info.backend,
        "tasks": {name: (t.version, t.data_hash, (shard.get("task_sizes") or {}).get(name))
                  for name, t in sorted(info.tasks.items())},
        "adaptive rule": {k: v for k, v in (info.adaptive or {}).items() if k not in _ADAPTIVE_OUTCOMES} or None,
    }


#: What each shard of an adaptive run records about its own problems (joined by the merge).
_ADAPTIVE_OUTCOMES = ("samples_drawn", "settled")


def _merged_adaptive(ordered: Sequence[ShardRun]) -> dict[str, Any] | None:
    """The adaptive section of the whole run: the rule, and every shard's problems' samples and sides."""
    first = ordered[0].info.adaptive
    if not first:
        return None
    out: dict[str, Any] = dict(first)
    for key in _ADAPTIVE_OUTCOMES:
        joined: dict[str, dict[str, Any]] = {}
        for s in ordered:
            for task, problems in ((s.info.adaptive or {}).get(key) or {}).items():
                joined.setdefault(task, {}).update(problems)
        out[key] = joined
    return out


def load_shard(path: str | Path) -> ShardRun:
    store = RunStore(path)
    info = store.read_run()
    if not info.shard:
        raise Pr1EvalError(f"{path} is not a shard: it was not run with --shard INDEX/COUNT")
    cols = store.read_table(columns=["task", "problem_id", "sample_idx"]).to_pydict()
    return ShardRun(Path(path), info, list(zip(cols["task"], cols["problem_id"], cols["sample_idx"], strict=True)))


def _setting_problems(shards: Sequence[ShardRun]) -> list[str]:
    first = settings_of(shards[0].info)
    problems = []
    for shard in shards[1:]:
        other = settings_of(shard.info)
        for key in first:
            if other[key] != first[key]:
                problems.append(f"{key} differs: {other[key]!r} in {shard.path}, {first[key]!r} in {shards[0].path}")
    return problems


def _index_problems(shards: Sequence[ShardRun]) -> list[str]:
    count = int(shards[0].shard["count"])
    seen = Counter(s.index for s in shards)
    problems = [f"shard {i}/{count} is missing" for i in range(count) if i not in seen]
    for index, times in sorted(seen.items()):
        if times > 1:
            paths = ", ".join(str(s.path) for s in shards if s.index == index)
            problems.append(f"shard {index}/{count} is given {times} times ({paths})")
    return problems


def _coverage_problems(shards: Sequence[ShardRun], count_tasks: bool = True) -> list[str]:
    """Disjoint problems that add up to every task (``count_tasks``: not when a shard is already
    named missing), and k samples of each in every shard (in an adaptive shard, the samples its run
    recorded drawing for the problem)."""
    problems = []
    owner: dict[tuple[str, str], Path] = {}
    k = int(shards[0].info.k or 0)
    for shard in shards:
        if shard.info.status != "complete":
            problems.append(f"{shard.label} is not finished (status {shard.info.status!r}); rerun its command")
        declared = shard.shard["problem_ids"]
        for task, ids in declared.items():
            for pid in ids:
                if (task, pid) in owner:
                    problems.append(f"problem {task}/{pid} is in both {owner[(task, pid)]} and {shard.path}")
                owner[(task, pid)] = shard.path
        drawn = (shard.info.adaptive or {}).get("samples_drawn") or {}  # an adaptive shard: what each problem drew
        want = Counter({(task, pid): int(drawn.get(task, {}).get(pid, k)) for task, ids in declared.items() for pid in ids})
        have = Counter((task, pid) for task, pid, _ in shard.keys)
        wrong = sorted(key for key in want.keys() | have.keys() if want[key] != have[key])
        if wrong:
            task, pid = wrong[0]
            problems.append(f"{shard.label} holds {have[wrong[0]]} of {want[wrong[0]]} samples of {task}/{pid}"
                            + (f" (and {len(wrong) - 1} more problems)" if len(wrong) > 1 else ""))
    sizes = shards[0].shard["task_sizes"] if count_tasks else {}
    for task, size in sizes.items():
        covered = sum(1 for t, _ in owner if t == task)
        if covered != size:
            problems.append(f"task {task}: the shards cover {covered} of its {size} problems")
    return problems


def check_shards(shards: Sequence[ShardRun]) -> None:
    """Raise one error naming every reason these shards cannot be merged."""
    if not shards:
        raise Pr1EvalError("merge needs the shard run folders to join")
    problems = _setting_problems(shards)
    if not problems:  # coverage is only meaningful between shards of the same settings
        missing = _index_problems(shards)
        problems = missing + _coverage_problems(shards, count_tasks=not missing)
    if problems:
        raise Pr1EvalError("cannot merge: " + "; ".join(problems))


def merged_run_record(shards: Sequence[ShardRun], out: Path) -> RunRecord:
    """Shard 0's record as a whole run: every problem, both ends of time, the shards listed (each
    with its own wall clock, ``generation``: the merged run has none of its own)."""
    ordered = sorted(shards, key=lambda s: s.index)
    first = ordered[0].info
    tasks = task_entries(first.tasks)
    for name, task in tasks.items():
        task.n_problems = sum(len(s.shard["problem_ids"].get(name, [])) for s in ordered)
        if task.problem_ids is not None:
            ids = [pid for s in ordered for pid in (s.info.tasks[name].problem_ids or [])]
            tasks[name] = task_entry(ids, int(first.k or 0), version=task.version, source=task.source,
                                     data_hash=task.data_hash)
    config = {**{k: v for k, v in first.config.items() if k != "shard"}, "out": str(out)} if first.config is not None else None
    return dataclasses.replace(
        first, name=out.name, tasks=tasks, shard=None, config=config, scaleout=None, generation=None, status="complete",
        adaptive=_merged_adaptive(ordered),
        started_at=min(str(s.info.started_at or "") for s in ordered) or None,
        finished_at=max(str(s.info.finished_at or "") for s in ordered) or None,
        command=list(sys.argv), merged_at=now_iso(),
        merged_from=[{"path": str(s.path), "index": s.index, "engine": s.info.engine,
                      "started_at": s.info.started_at, "finished_at": s.info.finished_at,
                      **({} if s.info.generation is None else {"generation": s.info.generation})} for s in ordered])


def _duplicate_problems(shards: Sequence[ShardRun]) -> list[str]:
    """Sample keys stored twice (in one shard, or in two): a merged run holding them would be refused
    by every reader, so merge refuses them before it writes anything."""
    where: dict[tuple[str, str, int], Path] = {}
    problems = []
    for shard in shards:
        for key in shard.keys:
            if key in where:
                task, pid, idx = key
                problems.append(f"sample {task}/{pid}#{int(idx)} is stored twice ({where[key]} and {shard.path})")
            where.setdefault(key, shard.path)
    return problems[:1] + ([f"{len(problems) - 1} more samples are stored twice"] if len(problems) > 1 else [])


def _killed_merge(out: Path) -> bool:
    """``out`` holds what a killed merge left (status ``merging``): a rerun writes it again."""
    store = RunStore(out)
    try:
        return store.exists() and store.read_run().status == "merging"
    except Pr1EvalError:
        return False


def merge_shards(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Check the shards (see the module docstring) and write them as one run at ``out``.

    Holds ``out``'s writer lock throughout (:mod:`pr1_eval.store.run_lock`). A merge killed before
    it finished leaves a run marked ``merging``: the same command again redoes it from the start."""
    with run_lock(out, "pr1-eval merge"):
        redo = _killed_merge(Path(out))
        if not redo:
            check_new_run_folder(out, command="merge", offers_replace=False)
        target = RunStore(out)
        shards = [load_shard(p) for p in paths]
        check_shards(shards)
        if duplicates := _duplicate_problems(shards):
            raise Pr1EvalError("cannot merge: " + "; ".join(duplicates) + "; rerun the shard that holds them")
        target.write_run(dataclasses.replace(merged_run_record(shards, Path(out)), status="merging"))
        if redo and target.samples_dir.exists():
            shutil.rmtree(target.samples_dir)  # the killed merge's parts: written again below
        for shard in sorted(shards, key=lambda s: s.index):
            target.append(RunStore(shard.path).read_records())
        target.write_run(merged_run_record(shards, Path(out)))
    return Path(out)
