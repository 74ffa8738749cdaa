"""Block roles: does a block explore (paths reach different answers) or verify (they agree)?

The paper reads its late-training blocks as multi-perspective verification and early ones as
exploration. Here that reading is made checkable per block from the conclusions the paths reach
(read by :func:`analysis.conclusions.path_conclusion` from each path's text — not by the
grader's ``extract_answer``, which never reads inside a path — and compared by the grader's
math-equivalence ``answer_classes``, so "1/2" and "0.5" agree):

- ``verification``: at least two paths reach an answer and all of those agree;
- ``exploration``: at least two paths reach an answer and they do not all agree;
- ``undetermined``: fewer than two paths reach an answer.

Per response, *summary consistency* asks whether the final answer equals the paths' majority
conclusion (over all the response's blocks), which tells whether the summary follows its paths.

Checked against hand labels: ``tests/data/block_role_labels.json`` holds real blocks of the
Parallel-R1 teacher traces, labelled by reading the paths (see ``tests/analysis/test_roles.py``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import pandas as pd

from analysis.conclusions import Conclusion, path_conclusion
from analysis.result_cache import ResultCache, hash_key
from analysis.workers import Chunked, Workers
from pr1_eval.grading.grade import answer_classes_many
from pr1_eval.grading.shared import use_cold_workers

ROLES: tuple[str, ...] = ("verification", "exploration", "undetermined")
ROLE_COLUMN_DOCS: dict[str, str] = {
    "path_conclusions": "The value each path concludes with (analysis.conclusions.path_conclusion); None where none.",
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
    return equivalence_classes_many([answers])[0]


def equivalence_classes_many(groups: Sequence[Sequence[str | None]],
                             verdicts: VerdictCache | None = None) -> list[list[int | None]]:
    """:func:`equivalence_classes` of every group, all groups' checks submitted together and
    each distinct pair checked once (:func:`pr1_eval.grading.grade.answer_classes_many`), its
    verdicts remembered in ``verdicts`` (default: the on-disk :class:`VerdictCache`)."""
    store = VerdictCache() if verdicts is None else verdicts
    classes = answer_classes_many(groups, known=store)
    store.flush()
    return classes


class VerdictCache:
    """math-verify verdicts of gold-free ``(a, b)`` pairs on disk (:mod:`analysis.result_cache`),
    for the code and library versions that computed them."""

    SOURCES = ("pr1_eval.grading.verify", "pr1_eval.grading.fast_verdict")
    PACKAGES = ("math-verify", "latex2sympy2_extended", "sympy")

    def __init__(self, cache: ResultCache | None = None) -> None:
        self.cache = cache if cache is not None else ResultCache.named("verdicts", self.SOURCES, self.PACKAGES)

    def get(self, key: tuple[str, str], /) -> bool | None:
        value = self.cache.get(hash_key(*key))
        return None if value is None else bool(value)

    def __setitem__(self, key: tuple[str, str], value: bool, /) -> None:
        self.cache.put(hash_key(*key), bool(value))

    def flush(self) -> None:
        self.cache.flush()


def use_cold_grading_workers() -> None:
    """Have the grading pool that the role and consistency checks use start one worker, without
    the warm-up (:func:`pr1_eval.grading.shared.use_cold_workers`, which says why; ``analyze``
    calls it before its first check). ``$PR1_EVAL_GRADING_WORKERS`` still sets the size."""
    use_cold_workers(max_workers=1)


def block_role(classes: Sequence[int | None]) -> str:
    """The role of one block from its paths' answer classes."""
    answered = [c for c in classes if c is not None]
    if len(answered) < 2:
        return "undetermined"
    return "verification" if len(set(answered)) == 1 else "exploration"


def assign_roles(blocks: pd.DataFrame) -> pd.DataFrame:
    """``blocks`` (with ``path_texts``) with the :data:`ROLE_COLUMN_DOCS` columns added."""
    concluded = conclude_blocks(blocks)
    groups = [list(answers) for answers in concluded["path_conclusions"]]
    return with_roles(concluded, equivalence_classes_many(groups))


def conclude_blocks(blocks: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``blocks`` with ``path_conclusions`` and ``path_conclusion_sources``: the part of
    :func:`assign_roles` that runs in this process (the rest waits on math-verify)."""
    return start_concluding(blocks)()


def start_concluding(blocks: pd.DataFrame, workers: Workers | None = None) -> Callable[[], pd.DataFrame]:
    """:func:`conclude_blocks`, begun: the paths the cache lacks are handed to ``workers`` now (when
    given), so this process can start other work; the function returned collects them."""
    grouped = [list(texts) for texts in blocks["path_texts"]]
    pending = ConclusionCache().start([t for texts in grouped for t in texts], workers)

    def finish() -> pd.DataFrame:
        conclusions = _regrouped(pending(), grouped)
        out = blocks.copy()
        out["path_conclusions"] = pd.Series([[c.text for c in cs] for cs in conclusions], index=out.index,
                                            dtype=object)
        out["path_conclusion_sources"] = pd.Series([[c.source for c in cs] for cs in conclusions], index=out.index,
                                                   dtype=object)
        return out

    return finish


def with_roles(concluded: pd.DataFrame, classes: Sequence[list[int | None]]) -> pd.DataFrame:
    """:func:`conclude_blocks`'s frame with the class and role columns added (to that frame, which
    is already a copy), given each block's classes (:func:`equivalence_classes_many` of its
    ``path_conclusions``)."""
    out = concluded
    out["path_answer_classes"] = pd.Series(list(classes), index=out.index, dtype=object)
    out["n_answering_paths"] = [sum(c is not None for c in cs) for cs in classes]
    out["n_distinct_answers"] = [len({c for c in cs if c is not None}) for cs in classes]
    out["role"] = [block_role(cs) for cs in classes]
    return out


class StartedRoles:
    """Block roles and summary consistency with their math-verify checks already under way.

    Why: the checks run in the grading pool's processes while this one would only wait, so
    :func:`start_roles` reads the conclusions, then hands every block's and every response's
    group to :func:`equivalence_classes_many` on a background thread (one call, so a pair
    shared by a block and its response is checked once) and returns at once; the caller
    computes other tables (BLEU, …) meanwhile and asks for :meth:`roles` and
    :meth:`consistency` when it needs them. The classes are those of :func:`assign_roles` and
    :func:`summary_consistency`: each group is classed on its own, in the same comparison order.
    """

    def __init__(self, blocks: pd.DataFrame, samples: pd.DataFrame, verdicts: VerdictCache | None = None,
                 concluded: pd.DataFrame | None = None) -> None:
        self._blocks = conclude_blocks(blocks) if concluded is None else concluded
        self._heads, groups = consistency_groups(samples, self._blocks)
        role_groups = [list(answers) for answers in self._blocks["path_conclusions"]]
        self._n_roles = len(role_groups)
        self._groups = groups
        self._classes = classes_in_background([*role_groups, *groups], verdicts)

    def roles(self) -> pd.DataFrame:
        """What :func:`assign_roles` returns for the blocks (waits for their checks)."""
        return with_roles(self._blocks, self._classes.result()[: self._n_roles])

    def consistency(self) -> pd.DataFrame:
        """What :func:`summary_consistency` returns for the samples (waits for the checks)."""
        if self._blocks.empty:
            return pd.DataFrame(columns=_KEYS + list(CONSISTENCY_COLUMN_DOCS))
        return consistency_table(self._heads, self._groups, self._classes.result()[self._n_roles :])


def start_roles(blocks: pd.DataFrame, samples: pd.DataFrame, verdicts: VerdictCache | None = None,
                concluded: pd.DataFrame | None = None) -> StartedRoles:
    """:class:`StartedRoles` of ``blocks`` (the loader's, with ``path_texts``) and ``samples``; the
    conclusions are read here, or are ``concluded`` (:func:`start_concluding`'s frame of these
    blocks, read in worker processes)."""
    return StartedRoles(blocks, samples, verdicts, concluded)


def classes_in_background(groups: Sequence[Sequence[str | None]],
                          verdicts: VerdictCache | None = None) -> Future[list[list[int | None]]]:
    """:func:`equivalence_classes_many` of ``groups`` computed on a daemon thread (it mostly
    waits on the grading pool, so it takes little of this process's time); its future."""
    future: Future[list[list[int | None]]] = Future()

    def run() -> None:
        try:
            future.set_result(equivalence_classes_many(groups, verdicts))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=run, name="pr1-analysis-classes", daemon=True).start()
    return future


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
    return consistency_table(heads, groups, equivalence_classes_many(groups))


def consistency_groups(samples: pd.DataFrame, blocks: pd.DataFrame
                       ) -> tuple[list[tuple[dict[str, Any], str | None]], list[list[str | None]]]:
    """Per response with blocks: its key columns and final answer, and the group to class (every
    path conclusion of its blocks, then the final answer); ``blocks`` with ``path_conclusions``."""
    answers_by_response: dict[tuple[Any, ...], list[str | None]] = {}
    lengths_by_response: dict[tuple[Any, ...], list[int]] = {}
    block_keys = zip(*(blocks[k].tolist() for k in _KEYS[:4]), strict=True)  # columns, not 30-field row tuples
    lengths = blocks["path_char_lengths"].tolist() if "path_char_lengths" in blocks else [None] * len(blocks)
    for key, conclusions, sizes in zip(block_keys, blocks["path_conclusions"].tolist(), lengths, strict=True):
        answers_by_response.setdefault(key, []).extend(conclusions)
        lengths_by_response.setdefault(key, []).extend(sizes if sizes is not None else [0] * len(conclusions))
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
    rows = [{**head, **_consistency(group[:-1], final, cls), **_disagreeing(head.get(_LENGTHS) or [], cls)}
            for (head, final), group, cls in zip(heads, groups, classes, strict=True)]
    return pd.DataFrame(rows, columns=_KEYS + list(CONSISTENCY_COLUMN_DOCS))


#: The head key carrying each path's length from :func:`consistency_groups` to :func:`consistency_table`.
_LENGTHS = "_path_char_lengths"


def _disagreeing(lengths: Sequence[int], classes: Sequence[int | None]) -> dict[str, Any]:
    """Path characters in all, and in paths concluding other than the final answer (the last class)."""
    final = classes[-1] if classes else None
    paths = classes[:-1]
    disagreeing = None if final is None else sum(int(n) for n, c in zip(lengths, paths, strict=False)
                                                  if c is not None and c != final)
    return {"path_chars": int(sum(int(n) for n in lengths)), "disagreeing_path_chars": disagreeing}


def response_consistency(path_answers: Sequence[str | None], final: str | None) -> dict[str, Any]:
    """Majority of the path answers and whether ``final`` equals it (math-equivalence)."""
    return _consistency(path_answers, final, equivalence_classes([*path_answers, final]))


def _consistency(path_answers: Sequence[str | None], final: str | None, classes: Sequence[int | None]) -> dict[str, Any]:
    """:func:`response_consistency` given the classes of ``[*path_answers, final]``."""
    path_classes, final_class = classes[:-1], classes[-1]
    counts = Counter(c for c in path_classes if c is not None).most_common()
    n_answering = sum(c for _, c in counts)
    majority = counts[0][0] if counts and (len(counts) == 1 or counts[0][1] > counts[1][1]) else None
    majority_answer = next((a for a, c in zip(path_answers, path_classes, strict=True) if c == majority), None)
    reason = None
    if not counts:
        reason = "no path answer"
    elif majority is None:
        reason = "no majority"
    elif final_class is None:
        reason = "no final answer"
    consistent = None if reason else bool(final_class == majority)
    return {"final_answer": final, "majority_answer": None if majority is None else majority_answer,
            "n_answering_paths": n_answering, "consistent": consistent, "reason": reason}


class ConclusionCache:
    """Path conclusions by the hash of the path text, on disk (:mod:`analysis.result_cache`),
    for the reader's current code (its module and the grader's answer-line reader)."""

    SOURCES = ("analysis.conclusions", "pr1_eval.grading.answer_text")

    def __init__(self, cache: ResultCache | None = None) -> None:
        self.cache = cache if cache is not None else ResultCache.named("conclusions", self.SOURCES)

    def conclude(self, texts: Sequence[str]) -> list[Conclusion]:
        """:func:`path_conclusion` of each text; each distinct text read once, ever."""
        return self.start(texts)()

    def start(self, texts: Sequence[str], workers: Workers | None = None) -> Callable[[], list[Conclusion]]:
        """:meth:`conclude`, begun: the texts the cache lacks are handed to ``workers`` (when given)
        :data:`CONCLUDE_CHUNK` at a time as they are found, so the workers start on the first
        chunk while this process still hashes the rest; the function returned collects them,
        stores them in the cache and gives every conclusion."""
        found: dict[str, Conclusion] = {}
        todo: dict[str, tuple[str, str]] = {}  # text -> (its plain text, its key)
        reading = Chunked(workers, conclude_all, CONCLUDE_CHUNK)
        for text in texts:
            if text in found or text in todo:
                continue
            plain = text if isinstance(text, str) else ("" if text is None else str(text))
            key = hash_key(plain)
            cached = self.cache.get(key)
            if cached is not None:
                found[text] = Conclusion(cached[0], cached[1])
                continue
            todo[text] = (plain, key)
            reading.add(plain)
        reading.close()

        def collect() -> list[Conclusion]:
            for (text, (_, key)), conclusion in zip(todo.items(), reading.results(), strict=True):
                self.cache.put(key, [conclusion.text, conclusion.source])
                found[text] = conclusion
            self.cache.flush()
            return [found[t] for t in texts]

        return collect


#: Paths per call to a worker: enough that pickling them is a small part of reading them.
CONCLUDE_CHUNK = 2_000


def conclude_all(texts: Sequence[str]) -> list[Conclusion]:
    """:func:`path_conclusion` of each text (what one worker does with one chunk)."""
    return [path_conclusion(text) for text in texts]


def path_conclusions(blocks: Sequence[Sequence[str]], cache: ConclusionCache | None = None) -> list[list[Conclusion]]:
    """:func:`path_conclusion` of every path of every block (through ``cache``, default on disk)."""
    return _regrouped((cache or ConclusionCache()).conclude([t for texts in blocks for t in texts]), blocks)


def _regrouped(flat: Sequence[Conclusion], blocks: Sequence[Sequence[str]]) -> list[list[Conclusion]]:
    """The conclusions of every block's paths, in order, cut back into ``blocks``' groups."""
    done = iter(flat)
    return [[next(done) for _ in texts] for texts in blocks]
