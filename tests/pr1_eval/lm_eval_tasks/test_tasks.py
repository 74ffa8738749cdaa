"""The pr1_* lm-eval tasks, loaded through lm-eval 0.4.13's own TaskManager (no model).

Checks the settings the issue fixes (16 samples by default, every one kept by the ``all`` filter,
the paper's sampling, no seed, no "\\n\\n" stop; k read from the results, so any ``repeats`` works), that documents and prompt are pr1-eval's, that scoring goes through
pr1-eval's grader and metrics and aggregates like ``pr1-eval report``, and that the hf backend
keeps the six tags.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from pr1_eval.inputs.paths import packaged_benchmarks_dir  # noqa: E402
from pr1_eval.inputs.prompts import load_template  # noqa: E402
from pr1_eval.inputs.tasks import load_task  # noqa: E402
from pr1_eval.lm_eval_tasks import GREEDY_GROUP, GROUP, LM_EVAL_TASKS, include_path  # noqa: E402
from pr1_eval.lm_eval_tasks import utils as hooks  # noqa: E402

BENCH = packaged_benchmarks_dir()  # the benchmarks shipped in the package (a fresh clone has no data folder)

METRIC_NAMES = ["mean@K", "pass@1", "pass@K", "best@K", "maj@K", "mean@K_paper", "best@K_paper", "parallel_ratio", "k"]


@pytest.fixture(scope="module")
def loaded(monkeypatch_module: pytest.MonkeyPatch) -> dict[str, Any]:
    from lm_eval.tasks import TaskManager

    monkeypatch_module.setenv("PR1_DATA_DIR", str(BENCH))
    manager = TaskManager(include_path=include_path(), include_defaults=False)  # built-ins: the CLI test
    return manager.load([GROUP, "pr1_math300", "pr1_gsm8k"])


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_include_path_is_this_package_and_holds_the_yaml() -> None:
    folder = Path(include_path())
    assert folder == Path(hooks.__file__).resolve().parent
    assert {p.stem for p in folder.glob("pr1_*.yaml")} == {*LM_EVAL_TASKS, GROUP, GREEDY_GROUP}


def test_group_runs_the_default_benchmarks(loaded: dict[str, Any]) -> None:
    group = loaded["groups"][GROUP]
    assert [t.task_name for t in group.get_all_tasks()] == ["pr1_aime24", "pr1_aime25", "pr1_amc23", "pr1_math500"]
    assert set(loaded["tasks"]) == set(LM_EVAL_TASKS)
    assert LM_EVAL_TASKS["pr1_gsm8k"] == "gsm8k"  # the GSM8K of `pr1-eval run --tasks gsm8k`


def test_greedy_group_is_one_greedy_sample_per_problem(monkeypatch_module: pytest.MonkeyPatch) -> None:
    from lm_eval.tasks import TaskManager

    loaded = TaskManager(include_path=include_path(), include_defaults=False).load([GREEDY_GROUP])
    group = loaded["groups"][GREEDY_GROUP]
    assert [t.task_name for t in group.get_all_tasks()] == ["pr1_aime24", "pr1_aime25", "pr1_amc23", "pr1_math500"]
    for task in group.get_all_tasks():
        assert task.config.repeats == 1
        assert task.config.generation_kwargs == {"until": [], "do_sample": False, "temperature": 0.0,
                                                 "max_gen_toks": 3000}


@pytest.mark.parametrize("lm_task", sorted(LM_EVAL_TASKS))
def test_task_settings_are_k16_sampling_without_seed(loaded: dict[str, Any], lm_task: str) -> None:
    config = loaded["tasks"][lm_task].config
    assert config.repeats == 16 and config.output_type == "generate_until" and config.num_fewshot == 0
    [only] = config.filter_list  # lm-eval imports utils.py by its path: its own copy of the hook
    assert only["name"] == "all" and [f["function"] for f in only["filter"]] == ["custom"]
    keep = only["filter"][0]["filter_fn"]
    assert keep.__name__ == "keep_every_sample" and keep.__code__.co_filename == hooks.__file__
    assert list(keep([["a", "b", "c"], ["d", "e", "f"]], [{}, {}])) == [["a", "b", "c"], ["d", "e", "f"]]
    gen = config.generation_kwargs
    assert gen == {"until": [], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_gen_toks": 3000}
    assert "seed" not in gen
    assert [m["metric"] for m in config.metric_list] == METRIC_NAMES == list(hooks.METRICS)
    assert loaded["tasks"][lm_task].aggregation().keys() == set(METRIC_NAMES)


@pytest.mark.parametrize(("lm_task", "pr1_task"), sorted(LM_EVAL_TASKS.items()))
def test_documents_and_prompt_are_pr1_evals(loaded: dict[str, Any], lm_task: str, pr1_task: str) -> None:
    task = loaded["tasks"][lm_task]
    docs = list(task.eval_docs)
    problems = load_task(pr1_task, BENCH).problems
    assert [(d["problem_id"], d["problem"], d["gold"]) for d in docs] == [(p.problem_id, p.problem, p.gold) for p in problems]
    assert {d["task"] for d in docs} == {pr1_task}
    assert task.doc_to_text(docs[0]) == load_template("parallel_r1_v3").render(problems[0].problem)
    assert task.doc_to_target(docs[0]) == problems[0].gold


def _response(answer: str, parallel: bool) -> str:
    block = "<Parallel>\n<Path>\nx\n</Path>\n<Path>\ny\n</Path>\n</Parallel>\n<Summary>\nz\n</Summary>\n" if parallel else ""
    return f"Let me think.\n{block}\nFinal Answer: {answer}"


@pytest.mark.parametrize("k", [16, 4, 1])
def test_process_results_grades_with_pr1_eval_and_aggregates_like_the_report(tmp_path: Path, k: int) -> None:
    """Per-document summaries from the hook, aggregated by the YAML's functions, equal
    ``run_report`` at the same k on the same responses imported through pr1-eval's importer;
    k is whatever number of responses each document got (no k is fixed in the hooks)."""
    from pr1_eval.ingest.importer import import_rows
    from pr1_eval.report.run_report import run_report
    from pr1_eval.store.run_store import RunStore

    docs = [
        {"task": "aime24", "problem_id": "p0", "problem": "?", "gold": "204"},
        {"task": "aime24", "problem_id": "p1", "problem": "?", "gold": "\\frac{1}{2}"},
        {"task": "aime24", "problem_id": "p2", "problem": "?", "gold": "7"},
    ]
    answers = [
        (["204"] * 3 + ["205"] * 9 + ["none"] * 4)[-k:],  # k = 16: c=3, majority wrong
        (["0.5", "1/2", "\\frac{1}{2}"] * 5 + ["3"])[:k],  # math-equivalent forms: k = 16: c=15, majority right
        ["8"] * k,  # c=0
    ]
    responses = [[_response(a, parallel=(i % 4 == 0)) for i, a in enumerate(row)] for row in answers]
    summaries = [hooks.process_results(doc, [resps]) for doc, resps in zip(docs, responses, strict=True)]
    assert all(set(s) == set(METRIC_NAMES) for s in summaries)
    if k == 16:
        assert [s["mean@K"]["c"] for s in summaries] == [3, 15, 0]
        assert [s["maj@K"]["maj"] for s in summaries] == [False, True, False]
    lm_eval_values = {name: hooks.METRICS[name]([s[name] for s in summaries]) for name in METRIC_NAMES}
    assert lm_eval_values["k"] == k

    rows = [{"task": d["task"], "problem_id": d["problem_id"], "sample_idx": i, "response": r, "gold": d["gold"]}
            for d, resps in zip(docs, responses, strict=True) for i, r in enumerate(resps)]
    report = run_report(RunStore(import_rows(rows, tmp_path / "run", source="test")).read_frame(), k).tasks["aime24"].to_json()
    for name in METRIC_NAMES[:-1]:
        assert lm_eval_values[name] == pytest.approx(report[name.replace("@K", f"@{k}")], abs=1e-12), name
    if k == 16:  # by hand: c = 3, 15, 0 of 16; 12 of 48 samples open a block
        assert lm_eval_values["mean@K"] == pytest.approx((3 / 16 + 15 / 16 + 0) / 3)
        assert lm_eval_values["pass@K"] == pytest.approx(2 / 3) and lm_eval_values["maj@K"] == pytest.approx(1 / 3)
        assert lm_eval_values["parallel_ratio"] == pytest.approx(12 / 48)
    if k == 4:  # c = 0 ("none" ×4), 3 ("0.5", "1/2", "\\frac{1}{2}", "0.5"): all 4 right; 0
        assert lm_eval_values["mean@K"] == pytest.approx((0 + 1 + 0) / 3)
        assert lm_eval_values["best@K"] == pytest.approx(1 / 3)


def test_answer_policy_comes_from_metadata_and_reaches_the_grader() -> None:
    """``--metadata '{"pr1_answer_policy": ...}'`` (lm-eval hands it to ``load_docs``): every document
    carries the policy, ``process_results`` grades under it. By hand: the prose answer "The answer is
    $110$." has no ``Final Answer:`` line and no box, so the paper policy reads nothing (wrong) and
    the lenient one reads 110 (right); the boxed answer is right under both."""
    from pr1_eval.errors import Pr1EvalError

    paper, lenient = (hooks.load_docs("aime24", str(BENCH), **extra)["test"]
                      for extra in ({}, {"pr1_answer_policy": "lenient"}))
    assert set(paper["answer_policy"]) == {"paper"} and set(lenient["answer_policy"]) == {"lenient"}
    with pytest.raises(Pr1EvalError, match="pr1_answer_policy.*unknown answer policy 'loose'"):
        hooks.load_docs("aime24", str(BENCH), pr1_answer_policy="loose")
    responses = ["Adding them up, the answer is $110$.", "So we get \\boxed{110}."]
    for policy, expected in (("paper", 1), ("lenient", 2), (None, 1)):
        doc = {"task": "aime24", "problem_id": "p0", "problem": "?", "gold": "110", "answer_policy": policy}
        assert hooks.process_results(doc, [responses])["mean@K"]["c"] == expected, policy


def test_aggregations_refuse_uneven_sample_counts() -> None:
    full = hooks.ProblemSummary(problem_id="a", n=16, c=4, c_paper=1, maj=True, n_parallel=2, n_unscored=0)
    short = hooks.ProblemSummary(problem_id="b", n=9, c=4, c_paper=1, maj=True, n_parallel=2, n_unscored=0)
    for aggregate in hooks.METRICS.values():
        assert not math.isnan(aggregate([full]))
        assert not math.isnan(aggregate([short]))  # 9 samples each is k = 9, not "short of 16"
        assert math.isnan(aggregate([full, short]))  # the report, too, refuses a number for an incomplete task


def test_hf_backend_keeps_the_six_tags_and_drops_eos_and_pad(monkeypatch: pytest.MonkeyPatch) -> None:
    from lm_eval.models.huggingface import HFLM

    from pr1_eval.testing.tiny_model import DEFAULT_PROMPT, build_tokenizer
    from pr1_eval.testing.tiny_traces import load_template_text

    assert hooks.keep_tags_in_hf_decode()  # importing the hooks already patched; idempotent
    tokenizer = build_tokenizer(load_template_text(DEFAULT_PROMPT))
    lm = HFLM.__new__(HFLM)
    lm.tokenizer = tokenizer
    text = "Hi<Parallel><Path>a</Path><Path>b</Path></Parallel><Summary>s</Summary>Final Answer: 3"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id, tokenizer.pad_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "HiabsFinal Answer: 3"  # what lm-eval would keep
    assert lm.tok_decode(ids) == text
    assert lm.tok_decode(tokenizer.eos_token_id, skip_special_tokens=False) == tokenizer.eos_token
    monkeypatch.setenv(hooks.KEEP_TAGS_ENV, "0")
    assert not hooks.keep_tags_in_hf_decode()
