"""Reading Parallel-Probe trajectory files: many branches per question, answers-only, probed.

The format (the Parallel-R1 authors' follow-up, Parallel-Probe, ``evaluation/<model>/<task>.json``)
is one JSON array of questions, each ``{"question", "gold_answer", "probe_freq",
"final_answers_trace", "each_branch"}``, where ``each_branch`` lists one
``[probe_answers, branch_tokens, final_answer]`` per branch: the answer the branch would give if
stopped after every ``probe_freq`` tokens (``"ERR"`` where none could be read), its total token
count and its final answer. No response text is kept: these are *answers-only* trajectories.

Why a reader of its own rather than the JSON Lines import: a file holds 30 × 128 branches with
their probe answers, which no SampleRecord field could carry before; the reader validates every
field (naming file, question and branch) and hands :mod:`pr1_eval.ingest.parallel_probe_import`
and the offline controller replay (:mod:`pr1_eval.replay`) the same typed questions, so the two
cannot read the file differently. Branch order is kept exactly as in the file: the authors'
replay shuffles *that* order with seeds 0–99, so an import that reordered branches could not be
replayed to their numbers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.tasks import TASKS, load_task
from pr1_eval.jsonl import unique_keys

#: The probe answer the authors' extraction writes when a probe held no readable answer.
NO_ANSWER = "ERR"
#: How a branch's final answer is stored as a sample's response (and read back by the replay).
ANSWER_PREFIX = "Final Answer: "
#: Line breaks as ``str.splitlines`` sees them: a final answer holding one would be read as two
#: ``Final Answer:`` lines by the grader but as one string by the replay's exact match.
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


@dataclass(frozen=True)
class ProbeBranch:
    """One sampled branch: its answer at every probe, its total tokens and its final answer."""

    probe_answers: tuple[str, ...]
    tokens: int
    final_answer: str


@dataclass(frozen=True)
class ProbeQuestion:
    """One question with its gold and all its branches, in file order."""

    index: int
    question: str
    gold: str
    probe_interval: int
    branches: tuple[ProbeBranch, ...]


@dataclass(frozen=True)
class ProbeFile:
    """A whole trajectory file: model and task (from the file name unless given) and its questions."""

    path: Path
    model: str
    task: str
    questions: tuple[ProbeQuestion, ...]

    @property
    def n_branches(self) -> int:
        """The branches every question holds (the reader refuses files where they differ)."""
        return len(self.questions[0].branches) if self.questions else 0


def names_from_file(path: str | Path) -> tuple[str | None, str | None]:
    """(model, task) from ``MODEL__TASK.json`` (the released files renamed with ``__`` for ``/``),
    or (None, stem) when the name has no ``__``."""
    stem = Path(path).stem
    if "__" not in stem:
        return None, stem
    model, task = stem.rsplit("__", 1)
    return model, task


def _fail(where: str, what: str) -> Pr1EvalError:
    return Pr1EvalError(f"{where}: {what}; a Parallel-Probe file is a JSON list of questions, each with question, "
                        "gold_answer, probe_freq and each_branch ([[probe answers], tokens, final answer] per branch)")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"expected a string, got {type(value).__name__} {str(value)[:40]!r}")
    return value


def _whole(value: Any, where: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _fail(where, f"expected a whole number >= {least}, got {str(value)[:40]!r}")
    return value


def response_of(answer: str) -> str:
    """The stored response of a branch whose final answer is ``answer``: one ``Final Answer:``
    line, empty for ``"ERR"`` (graded *no answer*). :func:`answer_of` is its inverse; the import
    writes with one and the replay reads with the other, so the two read one answer one way."""
    return "" if answer == NO_ANSWER else f"{ANSWER_PREFIX}{answer}"


def answer_of(response: str) -> str:
    """The final answer a replay reads from a stored response (:func:`response_of`'s inverse): the
    text after ``Final Answer:``, ``"ERR"`` for an empty response, else the response as it is."""
    if response.startswith(ANSWER_PREFIX):
        return response[len(ANSWER_PREFIX):]
    return response if response else NO_ANSWER


def check_probe_count(branch: ProbeBranch, interval: int, where: str) -> None:
    """Refuse a branch with more probe answers than its tokens allow: a probe is taken every
    ``interval`` tokens, so a branch of T tokens holds at most ceil(T / interval) of them (every
    branch of the released files does). More means the counts disagree, and a replay would charge
    ``interval`` per extra probe (100,000 probes on a 3,856-token branch raised probe-all@4's cost
    from 33,069 to 42,319 tokens per question without a word)."""
    most = math.ceil(branch.tokens / interval)
    if len(branch.probe_answers) > most:
        raise _fail(where, f"{len(branch.probe_answers):,} probe answers, but a branch of {branch.tokens:,} tokens "
                    f"probed every {interval:,} tokens holds at most {most:,}; the token count or the probes are wrong "
                    "(regenerate the file)")


def _branch(value: Any, where: str) -> ProbeBranch:
    if not isinstance(value, list) or len(value) != 3:
        raise _fail(where, "expected [probe answers, tokens, final answer]")
    probes, tokens, final = value
    if not isinstance(probes, list):
        raise _fail(f"{where}[0]", f"expected a list of probe answers, got {type(probes).__name__}")
    final_answer = _text(final, f"{where}[2]")
    if not _LINE_BREAKS.isdisjoint(final_answer):
        raise _fail(f"{where}[2]", f"the final answer {final_answer[:40]!r} holds a line break; a final answer is one "
                    "line (the grader would read each line as its own answer, the replay the whole string)")
    return ProbeBranch(tuple(_text(a, f"{where}[0][{i}]") for i, a in enumerate(probes)),
                       _whole(tokens, f"{where}[1]", 0), final_answer)


def _question(value: Any, where: str, index: int) -> ProbeQuestion:
    if not isinstance(value, dict):
        raise _fail(where, f"expected an object, got {type(value).__name__}")
    missing = [k for k in ("question", "gold_answer", "probe_freq", "each_branch") if k not in value]
    if missing:
        raise _fail(where, f"missing field(s) {', '.join(missing)}")
    branches_value = value["each_branch"]
    if not isinstance(branches_value, list) or not branches_value:
        raise _fail(f"{where}.each_branch", "expected a non-empty list of branches")
    branches = tuple(_branch(b, f"{where}.each_branch[{j}]") for j, b in enumerate(branches_value))
    trace = value.get("final_answers_trace")
    if trace is not None and trace != [b.final_answer for b in branches]:
        raise _fail(f"{where}.final_answers_trace", "disagrees with the final answers of each_branch "
                    "(the file is inconsistent: regenerate it)")
    interval = _whole(value["probe_freq"], f"{where}.probe_freq", 1)
    for j, branch in enumerate(branches):
        check_probe_count(branch, interval, f"{where}.each_branch[{j}]")
    return ProbeQuestion(index=index, question=_text(value["question"], f"{where}.question"),
                         gold=_text(value["gold_answer"], f"{where}.gold_answer"),
                         probe_interval=interval, branches=branches)


def read_parallel_probe(path: str | Path, *, model: str | None = None, task: str | None = None) -> ProbeFile:
    """Read and validate one trajectory file; errors name file, question and branch.

    ``model`` and ``task`` default to the file name's ``MODEL__TASK``. Every question must hold
    the same number of branches (the replay draws k of n from each)."""
    path = Path(path)
    if not path.is_file():
        raise Pr1EvalError(f"{path}: file not found; pass a Parallel-Probe trajectory file (MODEL__TASK.json)")
    try:
        text = path.read_bytes().decode("utf-8-sig")
        data = json.loads(text, object_pairs_hook=unique_keys(str(path), text))  # a repeated key is refused
    except UnicodeDecodeError as exc:
        raise Pr1EvalError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise Pr1EvalError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise Pr1EvalError(f"{path}: not valid JSON (nested too deeply to read)") from None
    if not isinstance(data, list) or not data:
        raise _fail(str(path), "expected a non-empty JSON list of questions")
    questions = tuple(_question(q, f"{path}: question {i}", i) for i, q in enumerate(data))
    counts = {len(q.branches) for q in questions}
    if len(counts) > 1:
        raise _fail(str(path), f"questions hold different numbers of branches ({sorted(counts)})")
    file_model, file_task = names_from_file(path)
    chosen_task = task or file_task
    if not chosen_task:
        raise Pr1EvalError(f"{path}: no task name in the file name; pass --task")
    return ProbeFile(path=path, model=model or file_model or "unknown", task=chosen_task, questions=questions)


def packaged_ids(task: str) -> dict[str, str]:
    """Problem text (white space folded) → packaged problem id, for a packaged benchmark's name."""
    if task not in TASKS:
        return {}
    return {" ".join(p.problem.split()): p.problem_id for p in load_task(task, source="packaged").problems}


def import_rows_of(probe_file: ProbeFile) -> list[dict[str, Any]]:
    """The import rows of a trajectory file: one sample per branch, in file order.

    Decision: the response is the branch's final answer as a ``Final Answer:`` line (the answer
    format the grader reads), empty when the file's answer is ``"ERR"`` (none could be read: graded
    *no answer*, i.e. wrong, as the authors count it). The text itself was never released, so
    structure columns of these samples say nothing about the model; run.json marks the run
    answers-only. ``problem_id`` is the packaged benchmark's id of the same problem text where the
    task is a packaged benchmark (aime24, aime25: the files list the questions in another order),
    else ``TASK-qINDEX``; the problem text is kept either way."""
    packaged = packaged_ids(probe_file.task)
    rows = []
    for q in probe_file.questions:
        problem_id = packaged.get(" ".join(q.question.split()), f"{probe_file.task}-q{q.index}")
        for j, branch in enumerate(q.branches):
            rows.append({
                "task": probe_file.task, "problem_id": problem_id, "sample_idx": j,
                "problem": q.question, "gold": q.gold, "model": probe_file.model,
                "response": response_of(branch.final_answer),
                "n_response_tokens": branch.tokens, "probe_answers": list(branch.probe_answers),
                "probe_interval": q.probe_interval, "_where": f"{probe_file.path}: question {q.index} branch {j}",
            })
    return rows


def run_info_of(probe_file: ProbeFile) -> dict[str, Any]:
    """The run.json section that says what an imported trajectory file is and is not."""
    return {"trajectories": {
        "format": "parallel-probe", "answers_only": True, "questions": len(probe_file.questions),
        "branches_per_question": probe_file.n_branches,
        "probe_interval": probe_file.questions[0].probe_interval,
        "note": "answers-only: each sample's response is its branch's final answer as a 'Final Answer:' line; "
                "the text was not released, so structure figures (parallel ratio, blocks) do not describe the model",
    }}
