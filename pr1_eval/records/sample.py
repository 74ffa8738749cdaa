"""``SampleRecord``: the one typed row per (run, task, problem, sample) that every stage shares.

Generation fills the identity, prompt and response fields; structure parsing fills the block
fields; grading fills the answer and verdict fields. ``samples.parquet`` stores exactly these
columns (see :data:`SAMPLE_SCHEMA`), and every reader (report, analysis, dashboards, lm-eval
import, RL reward tests) goes through this declaration instead of guessing column names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pr1_eval.records.checks import doc_field as _doc

#: Grade statuses whose ``correct`` is a real verdict (``no_answer`` is a verdict: wrong).
SCORED_STATUSES = frozenset({"ok", "no_answer"})
#: The grade status of a sample whose gold is blank: could not score, and its problem is left out
#: of every metric (a problem cannot be scored at all without its gold).
NO_GOLD = "no_gold"


@dataclass
class SampleRecord:
    """One generated (or imported) response and everything derived from it."""

    # identity
    task: str = _doc("Task name, e.g. 'aime24' (imported runs may use unregistered names).")
    problem_id: str = _doc("Stable id of the problem within the task (the data file's `id`).")
    sample_idx: int = _doc("0-based index of this sample among the k samples of the problem.")
    task_version: str = _doc("Version of the task definition the problem came from.", "")
    prompt_hash: str = _doc("sha256 (first 16 hex) of the exact rendered prompt text.", "")
    problem: str = _doc("Problem text as given to the template (may be empty for imports).", "")
    # generation
    response: str = _doc("Raw response, special tags kept; only pad/eos stripped.", "")
    finish_reason: str = _doc(
        "'stop' (eos or stop token), 'length' (budget or model length), 'block_limit' (fork-join/structured: "
        "ended after the last allowed block's </Summary>, as the paper's rollout does), 'abort'/'error' (the "
        "engine gave up on the request, e.g. vLLM's abort/error finishes: the response is partial), or 'unknown'.",
        "unknown",
    )
    n_prompt_tokens: int | None = _doc("Prompt length in tokens (None when unknown).", None)
    n_response_tokens: int | None = _doc("Response length in tokens (None when unknown).", None)
    engine_calls: int | None = _doc("Engine calls that produced this sample (fork-join > 1).", None)
    critical_path_tokens: int | None = _doc(
        "Tokens on the critical path: main line + longest path + summary per block.", None
    )
    engine_inserted_tokens: int | None = _doc("Tags the decoder inserted (closing cut-off tags).", None)
    # grading
    gold: str = _doc("Gold final answer as a string.", "")
    extracted_answer: str | None = _doc("Answer extracted from the response (None when none).", None)
    answer_source: str = _doc("Where the answer came from: 'final_answer', 'boxed', 'sentence' (the final "
                              "sentence's value, answer policy 'lenient' only) or 'none'.", "none")
    correct: bool | None = _doc("math-verify verdict; None when it could not score (timeout/error/no gold).", None)
    correct_paper: bool | None = _doc("The paper's string checker verdict; None when there is no gold.", None)
    grade_status: str = _doc(
        "'ok', 'no_answer', 'timeout', 'error', 'no_gold' (blank gold: could not score, left out of every metric) "
        "or 'ungraded'.", "ungraded")
    grade_error: str | None = _doc("Why grading failed, when grade_status is timeout/error.", None)
    answer_class: int | None = _doc(
        "Math-equivalence class of extracted_answer among this problem's samples (for maj@k); "
        "None when there is no answer.",
        None,
    )
    # structure
    has_parallel: bool = _doc("At least one <Parallel> block.", False)
    format_ok: bool = _doc("Passes the strict format check (Algorithm 1).", True)
    format_error: str | None = _doc("First format violation, with its character offset.", None)
    n_blocks: int = _doc("Number of <Parallel> blocks.", 0)
    paths_per_block: list[int] = _doc("Number of <Path>s in each block.", factory=list)
    block_char_starts: list[int] = _doc("Character offset of each <Parallel>.", factory=list)
    block_char_ends: list[int] = _doc("Character offset just after each </Parallel>.", factory=list)
    block_token_starts: list[int] | None = _doc("Token index of each <Parallel> (None: no tokenizer).", None)
    block_token_ends: list[int] | None = _doc("Token index just after each </Parallel>.", None)
    block_rel_starts: list[float] = _doc(
        "Position of each <Parallel> relative to the response: tokens before it / response tokens "
        "(characters when token positions are unknown; see position_unit).",
        factory=list,
    )
    # training rollouts (runs imported from a training job's dumps; None elsewhere)
    reward: float | None = _doc(
        "The reward the training job gave this sample (a VERL dump's `score`); None outside training runs.", None
    )
    reward_acc: bool | None = _doc(
        "The training job's own accuracy verdict (a VERL dump's `acc`); None when the job recorded none.", None
    )
    reward_info: str | None = _doc(
        "JSON object of the reward's other keys as the job recorded them (e.g. pred, has_parallel); None: none.",
        None,
    )
    position_unit: str = _doc(
        "'token' or 'char': the unit of block_rel_starts. 'token' when the run knew a tokenizer (generated runs; "
        "imports given --tokenizer), else 'char'; run.json's position_unit records the same for the whole run.",
        "char",
    )
    # token latency (pr1_eval.protocol.critical_path; derived on read for samples stored before it existed)
    critical_path: int | None = _doc(
        "Length of the critical path in length_unit: main line + for each block its longest path with its tags + "
        "join + summary (what an engine running sibling paths side by side waits for), from the parsed text; "
        "None only when the response has no text. Fork-join's own measured count is critical_path_tokens.", None)
    response_length: int | None = _doc(
        "The response's length in length_unit (re-tokenised tokens when 'token', else characters); None: no text.",
        None)
    losing_path_length: int | None = _doc(
        "Length spent in sibling paths shorter than their block's longest (response_length - critical_path), in "
        "length_unit; None: no text.", None)
    length_unit: str | None = _doc(
        "'token' or 'char': the unit of critical_path, response_length and losing_path_length. position_unit for "
        "every sample annotated since these columns exist; 'char' for a sample stored before them whose lengths "
        "are derived on read from its text (no tokenizer at hand), whatever its position_unit; None: no text.",
        None)
    # wall clock (generated runs; None for imports and runs generated before it was recorded)
    wall_s: float | None = _doc(
        "Seconds from the start of the first engine call that worked on this sample to the end of the one that "
        "finished it (generated runs). Its batch-mates share those calls, so it is the latency this batch gave the "
        "sample, not its cost alone; see docs/efficiency.md. None for imports and older runs.", None
    )

    # probes (answers-only imports of probed trajectories, e.g. Parallel-Probe's; None elsewhere)
    probe_answers: list[str] | None = _doc(
        "The answer the branch would have given had it stopped after every probe_interval tokens, in order, as "
        "the importing file recorded it ('ERR': none could be read there); what offline early-stopping "
        "controllers read (pr1-eval replay). None outside probed imports.", None)
    probe_interval: int | None = _doc(
        "Tokens between two probes of probe_answers (Parallel-Probe: 500); None outside probed imports.", None)

    def key(self) -> tuple[str, str, int]:
        """The identity under which a run stores this sample exactly once."""
        return (self.task, self.problem_id, self.sample_idx)

    def to_row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SampleRecord:
        """Build from a stored row, ignoring unknown columns and converting arrays to lists."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in row:
                continue
            value = row[f.name]
            if hasattr(value, "tolist"):
                value = value.tolist()
            values[f.name] = value
        return cls(**values)


_ARROW_TYPES: dict[str, pa.DataType] = {
    "sample_idx": pa.int64(),
    "n_prompt_tokens": pa.int64(),
    "n_response_tokens": pa.int64(),
    "engine_calls": pa.int64(),
    "critical_path_tokens": pa.int64(),
    "engine_inserted_tokens": pa.int64(),
    "answer_class": pa.int64(),
    "reward": pa.float64(),
    "reward_acc": pa.bool_(),
    "correct": pa.bool_(),
    "correct_paper": pa.bool_(),
    "has_parallel": pa.bool_(),
    "format_ok": pa.bool_(),
    "n_blocks": pa.int64(),
    "paths_per_block": pa.list_(pa.int64()),
    "block_char_starts": pa.list_(pa.int64()),
    "block_char_ends": pa.list_(pa.int64()),
    "block_token_starts": pa.list_(pa.int64()),
    "block_token_ends": pa.list_(pa.int64()),
    "block_rel_starts": pa.list_(pa.float64()),
    "critical_path": pa.int64(),
    "response_length": pa.int64(),
    "losing_path_length": pa.int64(),
    "wall_s": pa.float64(),
    "probe_answers": pa.list_(pa.string()),
    "probe_interval": pa.int64(),
}

SAMPLE_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SampleRecord))
#: Columns added after the first run format, so a part written before them lacks them: read as
#: nulls (the token-latency lengths derived from the text). Every other column is required: a part
#: without one was not written by pr1-eval, or was edited, and reading it as nulls would change a
#: number silently (a part without ``correct`` read as every sample wrong).
ADDED_COLUMNS: frozenset[str] = frozenset({"reward", "reward_acc", "reward_info", "critical_path", "response_length",
                                           "losing_path_length", "length_unit", "wall_s", "probe_answers",
                                           "probe_interval"})
#: The grade columns: what grading fills (``GradeResult.fill`` and the answer classes), so
#: ``pr1-eval regrade`` computes them again from the response and the gold.
GRADE_COLUMNS: frozenset[str] = frozenset({"extracted_answer", "answer_source", "correct", "correct_paper",
                                           "grade_status", "grade_error", "answer_class"})
SAMPLE_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field(name, _ARROW_TYPES.get(name, pa.string()), metadata={"doc": f.metadata["doc"]})
        for name, f in ((f.name, f) for f in dataclasses.fields(SampleRecord))
    ]
)
COLUMN_DOCS: dict[str, str] = {f.name: f.metadata["doc"] for f in dataclasses.fields(SampleRecord)}


def records_to_table(records: list[SampleRecord]) -> pa.Table:
    """Records as an Arrow table with the declared schema, built column by column.

    Why not rows of :meth:`SampleRecord.to_row`: ``dataclasses.asdict`` deep-copies every list
    field of every record, which was over half of ``import-verl``'s time; Arrow copies the values
    into its buffers anyway, so reading each attribute once per column gives the same table.
    """
    columns = {name: [getattr(r, name) for r in records] for name in SAMPLE_COLUMNS}
    return pa.Table.from_pydict(columns, schema=SAMPLE_SCHEMA)
