"""The ``!function`` hooks behind the pr1_* lm-eval tasks.

Why hooks and not YAML: the issue's rule is one implementation. Documents come from
:func:`pr1_eval.inputs.tasks.load_task` (the ``PR1_DATA_DIR`` folder, else the packaged copy, else the hub,
exactly as ``pr1-eval run`` reads them), the prompt is :func:`pr1_eval.inputs.prompts.load_template`'s
paper template, each response is parsed and graded by :mod:`pr1_eval.grading.annotate` (the functions
``pr1-eval import`` runs), and the aggregations call :mod:`pr1_eval.stats.metrics`. So an lm-eval run
and ``pr1-eval report`` on the same generations give the same numbers by construction.

How the pieces meet lm-eval 0.4.13's evaluator:

* ``repeats: N`` sends each prompt N times; the ``all`` filter (:func:`keep_every_sample`) hands
  :func:`process_results` ``results == [[r_0, …, r_N-1]]`` (one request per document, its N
  responses in generation order, which becomes ``sample_idx`` on import). lm-eval's
  ``take_first_k`` would need its own ``k`` kept equal to ``repeats`` by hand (and fails when
  ``k > repeats``), its default ``take_first`` keeps one response; this filter keeps them all.
* k is read from the results, never fixed here: it is the number of responses each document
  got, so the same tasks score ``repeats: 1`` (greedy), 4 or 64. Metric names therefore say
  ``K`` (``mean@K``, ``pass@K``, ``best@K_paper``: the report's label for "this task's k",
  :mod:`pr1_eval.stats.names`) and the metric ``k`` gives its value; a task whose documents got
  different numbers of responses gets NaN everywhere (the report's rule: no number over an
  incomplete task).
* :func:`process_results` returns, under every metric name, the same per-problem summary
  (:class:`ProblemSummary`: samples, correct, majority verdict, samples with a parallel
  block); each aggregation turns the list of summaries into one number with the report's own
  functions (:func:`pr1_eval.stats.metrics.problem_values` per problem, averaged over problems;
  :func:`pr1_eval.stats.metrics.parallel_ratio` over samples), under the report's names
  (:meth:`pr1_eval.report.schema.TaskMetrics.metric_key`).

This module is imported by file path from the YAML (``!function utils.…``), so it uses
absolute imports only. Importing it also makes lm-eval's ``hf`` backend keep the six tags in
decoded text (see :func:`keep_tags_in_hf_decode`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypedDict

import numpy as np

from pr1_eval.grading.annotate import annotate_grades, annotate_structure
from pr1_eval.inputs.prompts import PromptTemplate, load_template
from pr1_eval.inputs.tasks import load_task
from pr1_eval.protocol.decode import decode_keeping_tags, tag_keeping_ids
from pr1_eval.protocol.paper_settings import PAPER_PROMPT
from pr1_eval.records.answer_policy import check_policy, default_policy
from pr1_eval.records.sample import SCORED_STATUSES, SampleRecord
from pr1_eval.report.schema import TaskMetrics
from pr1_eval.stats.metrics import majority_correct, problem_values
from pr1_eval.stats.metrics import parallel_ratio as pooled_parallel_ratio

log = logging.getLogger(__name__)

#: What stands for k in the metric names (each task's k is read from its results; see the module docstring).
K_LABEL = "K"
#: The prompt template (the paper's).
TEMPLATE = PAPER_PROMPT
#: Set to "0" to leave lm-eval's hf backend decoding untouched (tags are then stripped).
KEEP_TAGS_ENV = "PR1_LM_EVAL_KEEP_TAGS"


class ProblemSummary(TypedDict):
    """What one problem contributes to every metric (logged per document by ``--log_samples``)."""

    problem_id: str
    n: int  # samples
    c: int  # correct by math-verify (unscorable counts as wrong, as in the report)
    c_paper: int  # correct by the paper's string checker (correct_paper)
    maj: bool  # the most frequent math-equivalent answer is correct
    n_parallel: int  # samples with at least one <Parallel> block
    n_unscored: int  # samples graded timeout/error


# ----- documents and prompt -----------------------------------------------------------------
def load_docs(pr1_task: str, pr1_data_dir: str | None = None, pr1_answer_policy: str | None = None,
              **_: Any) -> Any:
    """``custom_dataset`` hook: the pr1-eval task's problems as a ``DatasetDict`` with a test split.

    lm-eval calls this with the task's ``dataset_kwargs`` (``pr1_task``) merged with the run's
    metadata (``--model_args`` keys and ``--metadata``), hence the catch-all. The folder is
    ``--metadata '{"pr1_data_dir": ...}'`` when given, else pr1-eval's usual resolution
    (``PR1_DATA_DIR``, else the packaged copy, else the hub).

    ``--metadata '{"pr1_answer_policy": "lenient"}'`` grades under another answer policy
    (:mod:`pr1_eval.grading.policy`); the default is the one ``pr1-eval run`` takes for the
    paper's prompt, which these tasks use. lm-eval hands metadata only to this hook, so the policy
    travels to :func:`process_results` inside every document (its ``answer_policy`` field, which
    ``--log_samples`` then records beside each problem's counts).
    """
    import datasets

    policy = check_policy(pr1_answer_policy, "--metadata pr1_answer_policy") if pr1_answer_policy else \
        default_policy(TEMPLATE)
    loaded = load_task(pr1_task, pr1_data_dir)
    log.info("%s: %d problems from %s (sha256 %s), answer policy %s", pr1_task, len(loaded.problems), loaded.source,
             loaded.data_hash[:16], policy)
    rows = [{"task": p.task, "problem_id": p.problem_id, "problem": p.problem, "gold": p.gold, "answer_policy": policy}
            for p in loaded.problems]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


@lru_cache(maxsize=1)
def _template() -> PromptTemplate:
    return load_template(TEMPLATE)


def doc_to_text(doc: dict[str, Any]) -> str:
    """The user message: the paper's template around the problem (lm-eval then applies the
    model's chat template when run with ``--apply_chat_template``)."""
    return _template().render(str(doc["problem"]))


# ----- scoring ------------------------------------------------------------------------------
def _responses(results: Sequence[Any]) -> list[str]:
    """The k responses of one document: ``[[r_0..r_k-1]]`` after the ``all`` filter; a flat list
    (a filter that keeps one string per request) is accepted too."""
    out: list[str] = []
    for item in results:
        if isinstance(item, list | tuple):
            out.extend(str(r) for r in item)
        else:
            out.append(str(item))
    return out


def summarize_problem(doc: dict[str, Any], responses: Sequence[str]) -> ProblemSummary:
    """Parse and grade one problem's responses with the importer's own functions."""

    records = [
        annotate_structure(SampleRecord(task=str(doc["task"]), problem_id=str(doc["problem_id"]), sample_idx=i,
                                        problem=str(doc.get("problem", "")), response=r, gold=str(doc["gold"])))
        for i, r in enumerate(responses)
    ]
    annotate_grades(records, policy=str(doc.get("answer_policy") or default_policy(TEMPLATE)))
    correct = [bool(r.correct) for r in records]  # None (timeout/error) counts as wrong, as in the report
    return ProblemSummary(
        problem_id=str(doc["problem_id"]),
        n=len(records),
        c=sum(correct),
        c_paper=sum(bool(r.correct_paper) for r in records),
        maj=majority_correct([r.answer_class for r in records], correct),
        n_parallel=sum(bool(r.has_parallel) for r in records),
        n_unscored=sum(r.grade_status not in SCORED_STATUSES for r in records),
    )


def keep_every_sample(resps: Sequence[Any], docs: Sequence[Any]) -> list[list[Any]]:
    """The ``all`` filter (lm-eval's ``custom`` filter): every response of every request, as
    generated, so :func:`process_results` sees all ``repeats`` of a document whatever their number."""
    return [list(r) for r in resps]


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, ProblemSummary]:
    """``process_results`` hook: one summary per document, under every metric name."""
    summary = summarize_problem(doc, _responses(results))
    return {name: summary for name in METRICS}


# ----- aggregations (over problems, as pr1-eval's report) -------------------------------------
def task_k(items: Sequence[ProblemSummary]) -> int | None:
    """The task's k: the number of samples every problem holds; ``None`` (and an error in the
    log) when problems hold different numbers or none, as the report gives no number then."""
    sizes = {item["n"] for item in items}
    if len(sizes) == 1 and min(sizes) >= 1:
        return sizes.pop()
    log.error("incomplete: samples per problem %s, need the same number for every problem (the task's repeats); "
              "metric reported as NaN", sorted(sizes))
    return None


def _per_problem_mean(items: Sequence[ProblemSummary], metric: str) -> float:
    """The mean over problems of the report's per-problem value of ``metric`` (a TaskMetrics field) at the task's k."""
    k = task_k(items) if items else None
    if k is None:
        return float("nan")
    return float(np.mean([problem_values(i["n"], i["c"], i["c_paper"], i["maj"], k)[metric] for i in items]))


def samples_per_problem(items: Sequence[ProblemSummary]) -> float:
    """The ``k`` metric: the K every other metric's name stands for (NaN when problems differ)."""
    k = task_k(items) if items else None
    return float("nan") if k is None else float(k)


def mean_at_k(items: Sequence[ProblemSummary]) -> float:
    """Mean@K: mean over problems of c/n."""
    return _per_problem_mean(items, "mean")


def pass_at_1(items: Sequence[ProblemSummary]) -> float:
    """Unbiased pass@1 (equals Mean@K; kept as its own column as in the report)."""
    return _per_problem_mean(items, "pass_at_1")


def pass_at_k_unbiased(items: Sequence[ProblemSummary]) -> float:
    """Unbiased pass@K: mean over problems of 1 − C(n−c, K)/C(n, K)."""
    return _per_problem_mean(items, "pass_at_k")


def best_at_k_verify(items: Sequence[ProblemSummary]) -> float:
    """best@K: VERL's bootstrap best@K estimator, 1 − (1 − c/n)^K, on math-verify verdicts."""
    return _per_problem_mean(items, "best_at_k")


def mean_at_k_paper(items: Sequence[ProblemSummary]) -> float:
    """mean@K_paper: Mean@K under the paper's string checker (the paper's "Mean@16")."""
    return _per_problem_mean(items, "mean_paper")


def best_at_k_paper(items: Sequence[ProblemSummary]) -> float:
    """best@K_paper: best@K under the paper's string checker (the paper's "Pass@16", exactly)."""
    return _per_problem_mean(items, "best_at_k_paper")


def maj_at_k(items: Sequence[ProblemSummary]) -> float:
    """Maj@K: share of problems whose most frequent math-equivalent answer is correct."""
    return _per_problem_mean(items, "maj_at_k")


def parallel_ratio(items: Sequence[ProblemSummary]) -> float:
    """Share of samples with at least one ``<Parallel>`` block (over samples, as the report)."""
    if not items or task_k(items) is None:
        return float("nan")
    return pooled_parallel_ratio(sum(i["n_parallel"] for i in items), sum(i["n"] for i in items))


#: TaskMetrics field → aggregation, in the report's order; the YAML's ``metric_list`` names the same functions.
_AGGREGATIONS: dict[str, Callable[[Sequence[ProblemSummary]], float]] = {
    "mean": mean_at_k,
    "pass_at_1": pass_at_1,
    "pass_at_k": pass_at_k_unbiased,
    "best_at_k": best_at_k_verify,
    "maj_at_k": maj_at_k,
    "mean_paper": mean_at_k_paper,
    "best_at_k_paper": best_at_k_paper,
    "parallel_ratio": parallel_ratio,
}
#: Metric name (the report's, with :data:`K_LABEL` for k) → aggregation, then ``k`` (the value of K).
METRICS: dict[str, Callable[[Sequence[ProblemSummary]], float]] = {
    **{TaskMetrics.metric_key(name, K_LABEL): aggregate for name, aggregate in _AGGREGATIONS.items()},
    "k": samples_per_problem,
}


# ----- keep the tags through lm-eval's hf backend -----------------------------------------------
__all__ = ["decode_keeping_tags"]  # the protocol's tag-keeping decoding, re-exported for lm-eval hooks


def keep_tags_in_hf_decode() -> bool:
    """Make lm-eval's ``hf`` backend keep the six tags in generated text; True when patched.

    Why: ``HFLM.generate_until`` decodes with ``skip_special_tokens=True`` and offers no option
    to change it, so with a Parallel-R1 tokenizer (tags are special tokens) every response
    would lose its ``<Parallel>``/``<Path>``/``<Summary>`` tags, and ``parallel_ratio`` would read
    0 however often the model branches. The patch keeps only those six ids (eos, pad and every
    other special token are still dropped), changes nothing for a tokenizer without the tags,
    and touches the class only when the hf backend is already loaded in this process. The vllm
    backend needs nothing: lm-eval's ``VLLM.modify_gen_kwargs`` sets ``skip_special_tokens=False``
    unless ``--gen_kwargs`` overrides it (vLLM's own ``SamplingParams`` default is True).
    ``PR1_LM_EVAL_KEEP_TAGS=0`` turns it off.
    """
    if os.environ.get(KEEP_TAGS_ENV, "1") == "0":
        return False
    module = sys.modules.get("lm_eval.models.huggingface")
    cls = getattr(module, "HFLM", None)
    if cls is None:
        return False
    original = cls.tok_decode
    if getattr(original, "_pr1_keeps_tags", False):
        return True

    def tok_decode(self: Any, tokens: Any, skip_special_tokens: bool = True) -> str:
        if skip_special_tokens and tag_keeping_ids(self.tokenizer)[1]:
            return decode_keeping_tags(self.tokenizer, tokens)
        return str(original(self, tokens, skip_special_tokens=skip_special_tokens))

    tok_decode._pr1_keeps_tags = True  # type: ignore[attr-defined]
    tok_decode.__doc__ = (original.__doc__ or "") + "\n(pr1-eval: the six Parallel-R1 tags are kept.)"
    cls.tok_decode = tok_decode
    log.info("pr1-eval: lm-eval's hf backend now keeps the Parallel-R1 tags in decoded text")
    return True


keep_tags_in_hf_decode()
