"""Controllers replayed for every seed of a question at once: the same answers and charges as the
step-for-step classes (:mod:`pr1_eval.replay.probe`, :mod:`pr1_eval.replay.controllers`), many
times faster. Two fast paths:

* **SC and SC + SAC** (:class:`~pr1_eval.replay.controllers.MajorityVote` of whole branches or of
  :class:`~pr1_eval.replay.controllers.ConvergenceProbe`): each branch is read alone, so its answer
  and charge do not depend on the order; they are worked out once per branch, and a seed only
  picks which ``n`` branches vote, in its order (the vote's tie-break follows that order);
* **Parallel-Probe** (both variants), below.

Why: the step-for-step controllers make one Python call per branch per probe (64 branches, up to
100 steps, 100 seeds, per question), which made the Parallel-Probe rows take 10-20 s each and a
three-task replay 90 s. Two facts make a batched form exact:

* every branch that is neither pruned nor finished advances by ``burst`` reads each step, so after
  step ``s`` it has read ``min(1 + (s + 1) × burst, L)`` of its ``L`` answers (probes, then the
  final one); a pruned branch keeps the count it had when pruned. Its last answer and its charge
  (``interval`` per probe read, plus what the branch has left once the final answer is read)
  follow from that count alone, as :class:`pr1_eval.replay.state.QuestionState` charges them;
* the vote's tie-break (``Counter.most_common``: the answer seen first, in branch order, among
  the most frequent) is "the first branch whose answer has the top count", which a mask and an
  ``argmax`` give for all seeds together.

So one question's seeds run as rows of ``(seeds × branches)`` arrays, step by step. The
step-for-step classes stay the readable definition; a test holds both equal on random questions,
and ``bench/bench_replay.py`` holds the authors' published rows. Anything outside what this form
covers (fewer branches than the budget, parameters that are not whole numbers) is answered by the
step-for-step path: :func:`batched_outcomes` returns ``None`` for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from pr1_eval.ingest.parallel_probe import ProbeQuestion
from pr1_eval.replay.controllers import ConvergenceProbe, MajorityVote, read_whole
from pr1_eval.replay.probe import ParallelProbe, ParallelProbeAllVote
from pr1_eval.replay.state import QuestionState, branch_order

#: (answer or None, tokens, sequential tokens, branches started) for one seed.
SeedOutcome = tuple[str | None, int, int, int]


def _covered(controller: object, question: ProbeQuestion) -> bool:
    fields = [getattr(controller, f) for f in ("branches", "stable", "patience", "warm_up", "max_steps")]
    fields.append(getattr(controller, "burst", 1))
    return all(isinstance(v, int) and not isinstance(v, bool) for v in fields) \
        and 1 <= controller.branches <= len(question.branches) and fields[-1] >= 1  # type: ignore[attr-defined]


class _Arrays:
    """One question's branches for a batch of seeds: answer codes by read count, lengths, charges."""

    def __init__(self, question: ProbeQuestion, seeds: Sequence[int], branches: int, burst: int) -> None:
        self.answers: list[str] = []
        index: dict[str, int] = {}
        rows = []
        for b in question.branches:
            sequence = [*b.probe_answers, b.final_answer]
            rows.append([index.setdefault(a, len(index)) for a in sequence])
        self.answers = list(index)
        width = max(len(r) for r in rows)
        table = np.array([r + [r[-1]] * (width - len(r)) for r in rows], dtype=np.int64)
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        order = np.array([branch_order(s, len(rows))[:branches] for s in seeds], dtype=np.int64)
        picked = table[order]  # (seeds, branches, width): each seed's first `branches` in its order
        self.flat = picked.reshape(-1)
        self.base = np.arange(picked.shape[0] * picked.shape[1], dtype=np.int64).reshape(picked.shape[:2]) * width - 1
        self.lengths = lengths[order]
        probes = self.lengths - 1
        interval = question.probe_interval
        tokens = np.array([b.tokens for b in question.branches], dtype=np.int64)[order]
        self.probes, self.interval, self.tokens = probes, interval, tokens
        self.burst = burst

    def read(self, reads: np.ndarray) -> np.ndarray:
        """The answer code each branch last read, given how many it has read (≥ 1)."""
        return self.flat[self.base + reads]

    def charges(self, reads: np.ndarray) -> np.ndarray:
        """Tokens charged to each branch after ``reads`` reads (the authors' accounting)."""
        probe_reads = np.minimum(reads, self.probes)
        final = np.where(reads > self.probes, np.maximum(0, self.tokens - self.interval * self.probes), 0)
        return self.interval * probe_reads + final


def _majority(codes: np.ndarray, voting: np.ndarray, n_codes: int) -> np.ndarray:
    """Per row, the most frequent code among the voting branches, ties to the first in branch
    order (``Counter.most_common``'s); -1 where no branch votes."""
    rows = codes.shape[0]
    offsets = codes + (np.arange(rows) * n_codes)[:, None]
    counts = np.bincount(offsets[voting], minlength=rows * n_codes).reshape(rows, n_codes)
    top = counts.max(axis=1)
    first = np.argmax(voting & (counts.reshape(-1)[offsets] == top[:, None]), axis=1)
    winner = codes[np.arange(rows), first]
    return np.where(voting.any(axis=1), winner, -1)


def _run(controller: ParallelProbe | ParallelProbeAllVote, arrays: _Arrays, n_codes: int
         ) -> tuple[np.ndarray, np.ndarray]:
    """(answer code per seed, or -1; reads per seed and branch at the end)."""
    active_vote = isinstance(controller, ParallelProbe)
    seeds, branches = arrays.lengths.shape
    reads = np.ones((seeds, branches), dtype=np.int64)
    frozen = np.zeros((seeds, branches), dtype=bool)  # pruned (its reads stop)
    off_track = np.zeros((seeds, branches), dtype=np.int64)
    previous = np.full(seeds, -1, dtype=np.int64)
    stable = np.zeros(seeds, dtype=np.int64)
    result = np.full(seeds, -1, dtype=np.int64)
    running = np.ones(seeds, dtype=bool)
    for step in range(controller.max_steps):
        if not running.any():
            break
        moving = running[:, None] & ~frozen & (reads < arrays.lengths)
        reads = np.where(moving, np.minimum(reads + arrays.burst, arrays.lengths), reads)
        finished = reads >= arrays.lengths
        codes = arrays.read(reads)
        if active_vote:
            voting = ~frozen
            gone = running & ~voting.any(axis=1)  # every branch pruned: the last majority
            result = np.where(gone, previous, result)
            running &= ~gone
        else:
            voting = np.ones_like(frozen)
        winner = _majority(codes, voting, n_codes)
        # more than one branch left to judge: unpruned ones (active vote), else unfinished unpruned ones
        alive = (~frozen).sum(axis=1) if active_vote else (~(finished | frozen)).sum(axis=1)
        if step >= controller.warm_up:
            checks = running & (alive > 1)
            judged = checks[:, None] & ~(finished | frozen)
            off_track = np.where(judged, np.where(codes != winner[:, None], off_track + 1, 0), off_track)
            frozen |= judged & (off_track >= controller.patience)
            if active_vote:
                voting = ~frozen
                gone = checks & ~voting.any(axis=1)
                result = np.where(gone, previous, result)
                running &= ~gone
                winner = np.where(checks, _majority(codes, voting, n_codes), winner)
        stable = np.where(running & (winner == previous), stable + 1, 0)
        previous = np.where(running, winner, previous)
        settled = running & (stable >= controller.stable)
        result = np.where(settled, winner, result)
        running &= ~settled
        done = running & (finished | frozen).all(axis=1)
        result = np.where(done, previous, result)
        running &= ~done
    return np.where(running, previous, result), reads


def _vote_outcomes(controller: MajorityVote, question: ProbeQuestion, seeds: Sequence[int]) -> list[SeedOutcome]:
    """SC / SC + SAC: each branch's (answer, charge) once, then per seed the first ``n`` in its order."""
    alone = []
    for branch in question.branches:
        state = QuestionState(ProbeQuestion(question.index, question.question, question.gold,
                                            question.probe_interval, (branch,)), 0)
        alone.append((controller.rule(state), state.started_charges()[0]))
    out: list[SeedOutcome] = []
    for seed in seeds:
        picked = [alone[i] for i in branch_order(seed, len(alone))[:controller.n]]
        answers = [a for a, _ in picked if a is not None]
        charges = [c for _, c in picked]
        vote = Counter(answers).most_common(1)[0][0] if answers else None
        out.append((vote, sum(charges), max(charges, default=0), len(charges)))
    return out


def batched_outcomes(controller: object, question: ProbeQuestion, seeds: Sequence[int]
                     ) -> list[SeedOutcome] | None:
    """Every seed's (answer, tokens, sequential tokens, branches started) for SC, SC + SAC or a
    Parallel-Probe controller on ``question``; ``None`` where only the step-for-step path applies."""
    if isinstance(controller, MajorityVote) and seeds and question.branches and (
            controller.rule is read_whole or isinstance(controller.rule, ConvergenceProbe)):
        return _vote_outcomes(controller, question, seeds)
    if not isinstance(controller, ParallelProbe | ParallelProbeAllVote) or not seeds \
            or not _covered(controller, question):
        return None
    burst = controller.burst if isinstance(controller, ParallelProbe) else 1
    arrays = _Arrays(question, seeds, controller.branches, burst)
    answers, reads = _run(controller, arrays, len(arrays.answers))
    charges = arrays.charges(reads)
    totals, longest = charges.sum(axis=1), charges.max(axis=1)
    return [(None if a < 0 else arrays.answers[a], int(t), int(m), controller.branches)
            for a, t, m in zip(answers.tolist(), totals.tolist(), longest.tolist(), strict=True)]
