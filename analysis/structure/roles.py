"""Block roles: does a block explore (paths reach different answers) or verify (they agree)?

The paper reads its late-training blocks as multi-perspective verification and early ones as
exploration. Here that reading is made checkable per block from the conclusions the paths reach
(read by :func:`analysis.structure.conclusions.path_conclusion` from each path's text — not by the
grader's ``extract_answer``, which never reads inside a path — and compared by the grader's
math-equivalence ``answer_classes``, so "1/2" and "0.5" agree):

- ``verification``: at least two paths reach an answer and all of those agree;
- ``exploration``: at least two paths reach an answer and they do not all agree;
- ``undetermined``: fewer than two paths reach an answer.

Per response, *summary consistency* asks whether the final answer equals the paths' majority
conclusion (over all the response's blocks), which tells whether the summary follows its paths.

Checked against hand labels: ``tests/data/block_role_labels.json`` holds real blocks of the
Parallel-R1 teacher traces, labelled by reading the paths (see ``tests/analysis/test_roles.py``).

Every function here is the plain computation, synchronous and uncached; how ``analyze`` runs it
at scale (conclusions in worker processes, verdicts kept on disk, the math-verify checks overlapped
with BLEU) is :mod:`analysis.pipeline.scheduled`, and the values are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis.diversity.paths import MOST_PATHS_PER_BLOCK
from analysis.structure.conclusions import Conclusion, conclude_all
from pr1_eval.grading.grade import answer_classes_many

ROLES: tuple[str, ...] = ("verification", "exploration", "undetermined")
ROLE_COLUMN_DOCS: dict[str, str] = {
    "path_conclusions": "The value each path concludes with (analysis.structure.conclusions.path_conclusion); None where none.",
    "path_conclusion_sources": "Which rule found each conclusion: 'boxed', 'final_answer', 'answer_is', "
                               "'last_equals', 'last_number' or 'none'.",
    "path_answer_classes": "Math-equivalence class of each path's conclusion within the block; None where none.",
    "n_answering_paths": "Paths that reach a conclusion.",
    "n_distinct_answers": "Distinct (math-inequivalent) answers among them.",
    "role": "'verification', 'exploration' or 'undetermined' (see module docstring).",
}
CONSISTENCY_COLUMN_DOCS: dict[str, str] = {
    "final_answer": "The response's extracted final answer (samples.extracted_answer).",
    "majority_answer": "The conclusion reached by strictly more paths (all blocks) than any other; None on a tie.",
    "n_answering_paths": "Paths of the response that reach a conclusion.",
    "consistent": "Final answer math-equal to the majority answer; None when undefined (see reason).",
    "reason": "Why consistent is None: 'no path answer', 'no majority' or 'no final answer'.",
    "path_chars": "Characters of the response's path contents (stripped, tags excluded), every block.",
    "disagreeing_path_chars": "Characters of the paths whose conclusion is math-inequivalent to the final answer "
                              "(paths without a conclusion do not disagree); None without a final answer.",
}
_KEYS = ["run", "task", "problem_id", "sample_idx", "model_family", "step", "decoding"]


def equivalence_classes(answers: Sequence[str | None]) -> list[int | None]:
    """Classes as :func:`pr1_eval.grading.answer_classes` numbers them, without starting its
    worker pool when there is nothing to compare (the common case: no or identical answers)."""
    return answer_classes_many([answers])[0]


def block_role(classes: Sequence[int | None]) -> str:
    """The role of one block from its paths' answer classes."""
    answered = [c for c in classes if c is not None]
    if len(answered) < 2:
        return "undetermined"
    return "verification" if len(set(answered)) == 1 else "exploration"


def assign_roles(blocks: pd.DataFrame) -> pd.DataFrame:
    """``blocks`` (with ``path_texts``) with the :data:`ROLE_COLUMN_DOCS` columns added (the plain
    computation; :func:`analysis.pipeline.scheduled.roles_of` gives the same with its values kept on disk)."""
    concluded = with_conclusions(blocks, path_conclusions(blocks["path_texts"].tolist()))
    return with_roles(concluded, answer_classes_many(conclusion_groups(concluded)))


def path_conclusions(blocks: Sequence[Sequence[str]]) -> list[list[Conclusion]]:
    """:func:`path_conclusion` of every path of every block."""
    return regrouped(conclude_all([t for texts in blocks for t in texts]), blocks)


def regrouped(flat: Sequence[Conclusion], blocks: Sequence[Sequence[str]]) -> list[list[Conclusion]]:
    """The conclusions of every block's paths, in order, cut back into ``blocks``' groups."""
    done = iter(flat)
    return [[next(done) for _ in texts] for texts in blocks]


def with_conclusions(blocks: pd.DataFrame, conclusions: Sequence[Sequence[Conclusion]]) -> pd.DataFrame:
    """A copy of ``blocks`` with ``path_conclusions`` and ``path_conclusion_sources`` (one list of
    :class:`~analysis.structure.conclusions.Conclusion` per block, its paths' in order)."""
    out = blocks.copy()
    out["path_conclusions"] = pd.Series([[c.text for c in cs] for cs in conclusions], index=out.index, dtype=object)
    out["path_conclusion_sources"] = pd.Series([[c.source for c in cs] for cs in conclusions], index=out.index,
                                               dtype=object)
    return out


#: The most path conclusions of one response classed for its consistency (the first ones). Why:
#: classing is quadratic in the distinct answers (each is compared with every class head), so one
#: response of 4,000 paths concluding 4,000 numbers took 34 s here; real responses hold a few dozen.
MOST_CONCLUSIONS_PER_RESPONSE = 256


def conclusion_groups(concluded: pd.DataFrame) -> list[list[str | None]]:
    """Each block's path conclusions: the groups whose classes decide the roles; at most the first
    :data:`~analysis.diversity.paths.MOST_PATHS_PER_BLOCK` of a block, the paths whose pairs are scored
    (classing is quadratic in the distinct answers; the analysis notes the blocks it cut)."""
    return [list(answers)[:MOST_PATHS_PER_BLOCK] for answers in concluded["path_conclusions"]]


def with_roles(concluded: pd.DataFrame, classes: Sequence[list[int | None]]) -> pd.DataFrame:
    """:func:`with_conclusions`'s frame with the class and role columns added (to that frame, which
    is already a copy), given each block's classes (of :func:`conclusion_groups`)."""
    out = concluded
    padded: list[list[int | None]] = []
    answering: list[int] = []
    distinct: list[int] = []
    roles: list[str] = []
    for cs, answers in zip(classes, out["path_conclusions"].tolist(), strict=True):  # one pass: 150,000 blocks a sweep
        padded.append([*cs, *([None] * (len(answers) - len(cs)))])  # unclassed: None
        answered = [c for c in cs if c is not None]
        kinds = len(set(answered))
        answering.append(len(answered))
        distinct.append(kinds)
        roles.append("undetermined" if len(answered) < 2 else "verification" if kinds == 1 else "exploration")
    out["path_answer_classes"] = pd.Series(padded, index=out.index, dtype=object)
    out["n_answering_paths"] = answering
    out["n_distinct_answers"] = distinct
    out["role"] = roles  # block_role's rule
    return out


def role_shares(blocks: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group: ``n_blocks_roles`` and ``share_<role>`` for each role (null without blocks)."""
    keys = list(by)
    columns = keys + ["n_blocks_roles"] + [f"share_{r}" for r in ROLES]
    if blocks.empty:
        return pd.DataFrame(columns=columns)
    counts = blocks.groupby(keys + ["role"], dropna=False).size().unstack("role", fill_value=0)
    counts = counts.reindex(columns=list(ROLES), fill_value=0)
    total = counts.sum(axis=1)
    shares = counts.div(total, axis=0).add_prefix("share_")
    shares.insert(0, "n_blocks_roles", total)
    return shares.reset_index()[columns]


def summary_consistency(samples: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    """One row per response with at least one block (:data:`CONSISTENCY_COLUMN_DOCS`); ``blocks``
    as :func:`assign_roles` returns them (their ``path_conclusions``)."""
    if blocks.empty:
        return pd.DataFrame(columns=_KEYS + list(CONSISTENCY_COLUMN_DOCS))
    if "path_conclusions" not in blocks.columns:
        blocks = assign_roles(blocks)
    heads, groups = consistency_groups(samples, blocks)
    return consistency_table(heads, groups, answer_classes_many(groups))


def consistency_groups(samples: pd.DataFrame, blocks: pd.DataFrame
                       ) -> tuple[list[tuple[dict[str, Any], str | None]], list[list[str | None]]]:
    """Per response with blocks: its key columns and final answer, and the group to class (every
    path conclusion of its blocks, then the final answer); ``blocks`` with ``path_conclusions``."""
    answers_by_response: dict[tuple[Any, ...], list[str | None]] = {}
    lengths_by_response: dict[tuple[Any, ...], list[int]] = {}
    block_keys = zip(*(blocks[k].tolist() for k in _KEYS[:4]), strict=True)  # columns, not 30-field row tuples
    lengths = blocks["path_char_lengths"].tolist() if "path_char_lengths" in blocks else [None] * len(blocks)
    for key, conclusions, sizes in zip(block_keys, blocks["path_conclusions"].tolist(), lengths, strict=True):
        held = answers_by_response.setdefault(key, [])
        room = max(0, MOST_CONCLUSIONS_PER_RESPONSE - len(held))  # the first ones only (see the constant)
        held.extend(list(conclusions)[:room])
        lengths_by_response.setdefault(key, []).extend(
            (list(sizes) if sizes is not None else [0] * len(conclusions))[:room])
    heads: list[tuple[dict[str, Any], str | None]] = []
    groups: list[list[str | None]] = []
    columns = [samples[k].tolist() for k in _KEYS]
    for values, extracted in zip(zip(*columns, strict=True), samples["extracted_answer"].tolist(), strict=True):
        key = values[:4]
        if key in answers_by_response:
            final = extracted if isinstance(extracted, str) else None
            heads.append(({**dict(zip(_KEYS, values, strict=True)), _LENGTHS: lengths_by_response[key]}, final))
            groups.append([*answers_by_response[key], final])
    return heads, groups


def consistency_table(heads: Sequence[tuple[dict[str, Any], str | None]], groups: Sequence[Sequence[str | None]],
                      classes: Sequence[Sequence[int | None]]) -> pd.DataFrame:
    """The :func:`summary_consistency` frame from :func:`consistency_groups` and their classes."""
    names = _KEYS + list(CONSISTENCY_COLUMN_DOCS)
    if not heads:
        return pd.DataFrame(columns=names)
    rows = [(*(head[k] for k in _KEYS), *_consistency_values(group[:-1], final, cls),
             *_disagreeing_values(head.get(_LENGTHS) or [], cls))
            for (head, final), group, cls in zip(heads, groups, classes, strict=True)]
    return pd.DataFrame(dict(zip(names, map(list, zip(*rows, strict=True)), strict=True)), columns=names)


#: The head key carrying each path's length from :func:`consistency_groups` to :func:`consistency_table`.
_LENGTHS = "_path_char_lengths"


def _disagreeing_values(lengths: Sequence[int], classes: Sequence[int | None]) -> tuple[int, int | None]:
    """``path_chars`` and ``disagreeing_path_chars``: path characters in all, and in paths concluding
    other than the final answer (the last class)."""
    final = classes[-1] if classes else None
    total = int(sum(map(int, lengths)))
    if final is None:
        return total, None
    disagreeing = 0
    for n, c in zip(lengths, classes[:-1], strict=False):
        if c is not None and c != final:
            disagreeing += int(n)
    return total, disagreeing


def response_consistency(path_answers: Sequence[str | None], final: str | None) -> dict[str, Any]:
    """Majority of the path answers and whether ``final`` equals it (math-equivalence)."""
    values = _consistency_values(path_answers, final, equivalence_classes([*path_answers, final]))
    return dict(zip(_CONSISTENCY_KEYS, values, strict=True))


#: The keys of :func:`response_consistency`, the first columns of :data:`CONSISTENCY_COLUMN_DOCS`.
_CONSISTENCY_KEYS = tuple(CONSISTENCY_COLUMN_DOCS)[:5]


def _consistency_values(path_answers: Sequence[str | None], final: str | None, classes: Sequence[int | None]
                        ) -> tuple[str | None, str | None, int, bool | None, str | None]:
    """:func:`response_consistency` given the classes of ``[*path_answers, final]``, as a tuple in
    :data:`_CONSISTENCY_KEYS` order (a table of 86,000 responses is built from these tuples: a dict
    per row was a fifth of its time)."""
    path_classes, final_class = classes[:-1], classes[-1]
    counts: dict[int, int] = {}
    for c in path_classes:
        if c is not None:
            counts[c] = counts.get(c, 0) + 1
    n_answering = sum(counts.values())
    top = max(counts.values(), default=0)
    leaders = [c for c, n in counts.items() if n == top]
    majority = leaders[0] if len(leaders) == 1 else None  # strictly more paths than any other class
    majority_answer = next((a for a, c in zip(path_answers, path_classes, strict=True) if c == majority), None)
    reason = None
    if not counts:
        reason = "no path answer"
    elif majority is None:
        reason = "no majority"
    elif final_class is None:
        reason = "no final answer"
    consistent = None if reason else bool(final_class == majority)
    return final, None if majority is None else majority_answer, n_answering, consistent, reason
