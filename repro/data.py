"""Data builders: the shared JSONL training sets → VERL parquet files.

* **SFT** (Parallel-GSM8K): one ``messages`` row per trajectory (user = the paper's prompt
  template around the problem, assistant = the trajectory, tags kept as text), read by VERL's
  ``MultiTurnSFTDataset``. The trajectory is the text the official SFT trained on
  (``sft_answer`` of ``parallel_gsm8k_sft.jsonl``: ``extra_info.answer`` of the official SFT
  parquet, which the official dataset class reads with ``response_key=extra_info``,
  ``response_dict_keys=[answer]``); ``--sft-text released`` takes the released Parallel-GSM8K
  ``response`` instead (``parallel_gsm8k.jsonl``), whose answer lines keep ``$4``, ``36.00``, ….
  Either way the whitespace between the tags is rewritten to the rollout's layout (counted in the
  report). Rows failing pr1-eval's strict format check are dropped — a cold start exists to teach
  the format, so a malformed example teaches the wrong thing.
* **RL** (GSM8K train, DAPO-Math-17k, and a validation set from the benchmarks): VERL's RL
  schema — ``data_source``, ``prompt`` (chat messages), ``ability``, ``reward_model.ground_truth``
  and ``extra_info`` (split, index, id, problem).
* **Validation** samples as the paper's validation file did: AIME24, AIME25 and AMC23 16 times per
  problem, MATH300 once — 1,916 rollouts, as the official ``test.parquet``'s 1,916 rows; here one
  row per problem (416) with ``__rollout_n__`` = 16 or 1, so VERL pools each problem's rollouts
  and reports Mean@16 and best@16 (:func:`build_val`). The problems come through
  :func:`pr1_eval.inputs.tasks.load_task` (the packaged, checksum-checked benchmarks, or ``--benchmarks-dir``),
  the same loader and golds ``pr1-eval run`` scores checkpoints with.

The training sets are not packaged with pr1-eval: each comes from its flag (``--sft``, ``--gsm8k``,
``--dapo``), else from the training folder (``--training-dir``, ``$PR1_TRAINING_DIR``, or a
``shared/data/training`` folder beside the checkout). A missing one is a one-line error naming the
file, the flag, and the hub dataset that provides it; every input is checked before anything is built.

Problem texts are kept whole: the official preprocessing cut problems at their first blank line,
which drops figures, givens and even the question (see PROVENANCE.md on MATH300). The shared
``dapo_math_17k.jsonl`` *is* that preprocessing's output (no DAPO problem in it has a blank line,
and 293 end in a colon whose announced content is gone), so the builder takes the original
DAPO-Math-17k file when given one (``--dapo FILE``: the hub parquet or JSONL, whose user message
wraps the full problem in DAPO's instruction, which is stripped) and, on the shared file, drops
the problems that visibly end mid-statement (a trailing colon): the gold answer of a problem
without its givens only rewards guessing. DAPO repeats problems; repeats are collapsed to one row,
and a problem whose copies disagree on the answer is dropped (one of its golds is wrong, so it
would reward wrong answers half the time).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import resolve_training_dir
from pr1_eval.inputs.prompts import PromptTemplate, load_template
from pr1_eval.inputs.tasks import TASKS, gsm8k_final_number, load_task
from pr1_eval.jsonl import iter_jsonl
from pr1_eval.protocol.layout import count_layout_deviations, normalise_block_layout
from pr1_eval.protocol.paper_settings import PAPER_PROMPT
from pr1_eval.protocol.parse import parse_structure

SFT_FILE = "parallel_gsm8k_sft.jsonl"
GSM8K_FILE = "gsm8k_train.jsonl"
DAPO_FILE = "dapo_math_17k.jsonl"
#: Validation tasks and how often each problem is repeated: the tasks of the paper's table, each at its
#: paper k (Mean@16 on AIME/AMC, MATH300 once), read from the task registry.
VAL_REPEATS = {spec.name: spec.paper_k for spec in TASKS.values() if spec.paper_k is not None}
VAL_TASKS = tuple(VAL_REPEATS)
#: Where each training file comes from when it is not in the training folder: (flag, what provides it).
TRAINING_SOURCES = {
    "sft": (SFT_FILE, "JSONL with id, problem, answer, sft_answer: extra_info.answer of zhengkid/Parallel-R1 "
            "verl/data_preprocess_scripts/data/gsm8k/adaptive_parallel_thinking_v2/sft/train.parquet, as the "
            "project's shared/data/training/PROVENANCE.md describes; or --sft-text released for the released "
            "Parallel-GSM8K response"),
    "gsm8k": (GSM8K_FILE, "hub dataset openai/gsm8k, config main, train split, parquet or JSONL"),
    "dapo": (DAPO_FILE, "hub dataset BytedTsinghua-SIA/DAPO-Math-17k, whose parquet keeps problems whole"),
}

@dataclass(frozen=True)
class SftText:
    """Which response text the SFT rows train on: the file it is read from and its field."""

    file: str
    field: str
    source: str  # for --sft's error message


#: ``--sft-text``: ``official`` is the text the official SFT dataset class fed (default).
SFT_TEXTS = {
    "official": SftText(SFT_FILE, "sft_answer", TRAINING_SOURCES["sft"][1]),
    "released": SftText("parallel_gsm8k.jsonl", "response", "Parallel-GSM8K JSONL with id, problem, answer, "
                        "response; released at huggingface.co/Parallel-R1"),
}
OUTPUTS = {
    "sft": "sft_parallel_gsm8k.parquet",
    "gsm8k": "rl_gsm8k.parquet",
    "dapo": "rl_dapo.parquet",
    "val": "rl_val.parquet",
}
#: The counts of every built file and what each was read from, written beside them.
MANIFEST = "data_manifest.json"


@dataclass
class BuildReport:
    """Counts for one output file; ``notes`` explain every row that was dropped or changed."""

    name: str
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    info: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    path: str = ""
    source: str = ""  # what the rows were read from, when a flag chooses it

    def line(self) -> str:
        """One human-readable summary line."""
        parts = [f"{self.name}: {self.rows_in} in → {self.rows_out} out"]
        parts += [self.source] if self.source else []
        parts += [f"dropped {n} ({why})" for why, n in self.dropped.items()]
        parts += [f"{why}: {n}" for why, n in self.info.items()]
        return "; ".join(parts)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines file; a malformed line is an error naming file and line."""
    return [row for _, row in iter_jsonl(path)]


def read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(where, row)`` of a JSONL or parquet file: ``FILE:LINE`` or ``FILE row N``, for errors."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [(f"{path} row {i + 1}", row) for i, row in enumerate(pq.read_table(path).to_pylist())]
    return list(iter_jsonl(path))


#: The row layouts each builder reads, as its errors name them (``{field}``: the response field).
SFT_FIELDS = "id, problem, answer, {field} (strings): one Parallel-GSM8K trajectory"
PROBLEM_LAYOUTS = ("problem + answer (pr1-eval's layout, id optional)",
                   "question + answer ending in '#### N' (openai/gsm8k)",
                   "prompt (chat messages with a user turn) + reward_model.ground_truth (VERL / DAPO-Math-17k)")


def shape_error(where: str, row: Any, expected: str) -> Pr1EvalError:
    """The one-line error for a row of unexpected shape: where, what it holds, what was expected."""
    held = f"its fields are {', '.join(sorted(map(str, row)))}" if isinstance(row, dict) and row else \
        f"it is {type(row).__name__ if not isinstance(row, dict) else 'an empty object'}"
    return Pr1EvalError(f"{where}: a row of unexpected shape ({held}); expected {expected}. Fix or remove that row, "
                        "or pass the file the flag asks for")


def _text(row: dict[str, Any], name: str, where: str, expected: str) -> str:
    value = row.get(name)
    if value is None or isinstance(value, (dict, list)):
        raise shape_error(where, row, expected)
    return str(value)


def user_message(template: PromptTemplate, problem: str) -> list[dict[str, str]]:
    """The chat prompt: one user message, no system message (as in the paper)."""
    return [{"role": "user", "content": template.render(problem)}]


def build_sft(rows: list[dict[str, Any]] | list[tuple[str, dict[str, Any]]], template: PromptTemplate,
              response_field: str = "sft_answer") -> tuple[list[dict[str, Any]], BuildReport]:
    """SFT rows from Parallel-GSM8K trajectories (the text of ``response_field``); drops rows failing the
    strict format check, and counts the rows and tag joins whose whitespace it rewrote to the
    rollout's layout (``report.info``).

    ``rows``: dicts, or ``(where, dict)`` pairs (:func:`read_rows`) so a malformed row is named by
    file and line."""
    report = BuildReport("sft", rows_in=len(rows), source=f"response text: {response_field}")
    expected = SFT_FIELDS.format(field=response_field)
    out: list[dict[str, Any]] = []
    for i, item in enumerate(rows):
        where, row = item if isinstance(item, tuple) else (f"row {i + 1}", item)
        if not isinstance(row, dict):
            raise shape_error(where, row, expected)
        for name in ("id", "problem", "answer", response_field):
            _text(row, name, where, expected)
        response = _rollout_layout(str(row[response_field]), report)
        structure = parse_structure(response)
        if not structure.format_ok:
            report.dropped["format check failed"] = report.dropped.get("format check failed", 0) + 1
            report.examples.setdefault("format check failed", []).append(f"{row['id']}: {structure.error}")
            continue
        if not structure.has_parallel:
            report.info["kept without a parallel block"] = report.info.get("kept without a parallel block", 0) + 1
        messages = [*user_message(template, str(row["problem"])), {"role": "assistant", "content": response}]
        extra = {"id": str(row["id"]), "answer": str(row["answer"]), "n_blocks": structure.n_blocks}
        out.append({"messages": messages, "data_source": "parallel_gsm8k", "extra_info": extra})
    report.rows_out = len(out)
    return out, report


def _rollout_layout(text: str, report: BuildReport) -> str:
    """``text`` in fork-join's block layout; a rewritten row and its joins are counted in ``report``."""
    joins = count_layout_deviations(text).total
    if joins:
        report.info["rows with tag whitespace rewritten to the rollout's"] = (
            report.info.get("rows with tag whitespace rewritten to the rollout's", 0) + 1)
        report.info["tag joins rewritten"] = report.info.get("tag joins rewritten", 0) + joins
    return normalise_block_layout(text)


DAPO_PREFIX = "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def strip_dapo_instruction(content: str) -> str:
    """The problem inside DAPO's original user message (its instruction prefix and suffix removed)."""
    if content.startswith(DAPO_PREFIX):
        content = content[len(DAPO_PREFIX) :]
    if content.endswith(DAPO_SUFFIX):
        content = content[: -len(DAPO_SUFFIX)]
    return content


def load_problems(path: Path) -> list[dict[str, Any]]:
    """``{id, problem, answer}`` rows from JSONL or parquet, in pr1's schema (``problem``/``answer``),
    openai/gsm8k's (``question``, ``answer`` ending in ``#### N``) or VERL/hub RL schema (``prompt``
    messages, ``reward_model.ground_truth``, ``extra_info.index``). A row in none of these is an
    error naming file, line and the layouts expected."""
    return [_problem_row(i, where, row) for i, (where, row) in enumerate(read_rows(path))]


def _problem_row(i: int, where: str, row: Any) -> dict[str, str]:
    expected = "one of: " + "; ".join(PROBLEM_LAYOUTS)
    if not isinstance(row, dict):
        raise shape_error(where, row, expected)
    if "problem" in row:
        return {"id": str(row.get("id", i)), "problem": _text(row, "problem", where, expected),
                "answer": _text(row, "answer", where, expected)}
    if "question" in row:  # openai/gsm8k: the gold follows "####" in the worked solution
        answer = gsm8k_final_number(_text(row, "answer", where, expected))
        return {"id": str(row.get("id", f"gsm8k-train-{i}")), "problem": _text(row, "question", where, expected),
                "answer": answer}
    prompt, reward = row.get("prompt"), row.get("reward_model")
    messages = prompt if isinstance(prompt, list) else []
    user = next((m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    if user is None or not isinstance(reward, dict) or reward.get("ground_truth") is None:
        raise shape_error(where, row, expected)
    extra = row.get("extra_info")
    index = extra.get("index", i) if isinstance(extra, dict) else i
    return {"id": str(index), "problem": strip_dapo_instruction(str(user)), "answer": str(reward["ground_truth"])}


def looks_truncated(problem: str) -> bool:
    """The statement announces content that is not there (ends with a colon): cut by preprocessing."""
    return problem.rstrip().endswith((":", "："))


def drop_truncated(rows: list[dict[str, Any]], report: BuildReport) -> list[dict[str, Any]]:
    """Remove visibly truncated problems, counting them in ``report``."""
    kept = [r for r in rows if not looks_truncated(str(r["problem"]))]
    if len(kept) < len(rows):
        report.dropped["problem ends with ':' (truncated upstream)"] = len(rows) - len(kept)
        report.examples["truncated"] = [str(r["id"]) for r in rows if looks_truncated(str(r["problem"]))][:5]
    return kept


def rl_row(
    data_source: str, template: PromptTemplate, problem: str, answer: str, index: int, row_id: str, split: str
) -> dict[str, Any]:
    """One row in VERL's RL schema; ``extra_info.index`` lets VERL group rollouts per prompt."""
    return {
        "data_source": data_source,
        "prompt": user_message(template, problem),
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(answer)},
        "extra_info": {"split": split, "index": index, "id": row_id, "problem": problem},
    }


def problem_key(problem: str) -> str:
    """De-duplication key: the problem with runs of whitespace collapsed."""
    return " ".join(problem.split())


def dedup(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], BuildReport]:
    """Collapse repeated problems to their first row; drop problems whose copies disagree on the answer."""
    report = BuildReport("dedup", rows_in=len(rows))
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[problem_key(str(row["problem"]))].append(row)
    out = []
    for copies in groups.values():
        answers = {str(c["answer"]).strip() for c in copies}
        if len(answers) > 1:
            report.dropped["problems with conflicting answers"] = (
                report.dropped.get("problems with conflicting answers", 0) + 1
            )
            report.info["rows of conflicting problems"] = report.info.get("rows of conflicting problems", 0) + len(
                copies
            )
            report.examples.setdefault("conflicting", []).append(f"{copies[0]['id']}: answers {sorted(answers)}")
            continue
        out.append(copies[0])
    report.info["unique problems"] = len(groups)
    report.info["repeated rows collapsed"] = sum(
        len(c) - 1 for c in groups.values() if len({str(x["answer"]).strip() for x in c}) == 1
    )
    report.rows_out = len(out)
    return out, report


def build_rl(
    rows: list[dict[str, Any]], data_source: str, template: PromptTemplate, split: str = "train"
) -> list[dict[str, Any]]:
    """RL rows, full problem texts, in input order."""
    return [
        rl_row(data_source, template, str(r["problem"]), str(r["answer"]), i, str(r["id"]), split)
        for i, r in enumerate(rows)
    ]


ROLLOUT_N_KEY = "__rollout_n__"
"""Per-row rollout count VERL 0.9.1's V1 trainer honours (``trainer_base._validate`` and
``agent_loop_tq._run_prompt`` read it in place of ``val_kwargs.n``)."""


def build_val(
    template: PromptTemplate, benchmarks_dir: Path | None = None, repeats: dict[str, int] | None = None
) -> tuple[list[dict[str, Any]], BuildReport]:
    """The paper's validation mix, one ``data_source`` per benchmark, ``repeats[task]`` samples per problem.

    Each problem is **one** row whose ``__rollout_n__`` asks VERL for ``repeats[task]`` rollouts
    (16 on AIME/AMC, 1 on MATH300). Why not 16 copies of the row, as the official file has: the 0.4.1
    fork grouped validation rows by prompt text, but VERL 0.9.1's V1 trainer gives every row its
    own ``uid`` (``trainer_base._validate``), so copies would never be pooled and best@16 would not
    exist. With one row, the 16 rollouts share its uid, and ``process_validation_metrics`` reports
    ``mean@16`` (the paper's Mean@16) and ``best@16/mean`` (its Pass@16: VERL's bootstrap best@k) per
    benchmark. Problems and golds come from :func:`pr1_eval.inputs.tasks.load_task`, so validation
    scores the data ``pr1-eval run`` scores (MATH300 with the MATH answer where the paper's lost a
    base subscript).
    """
    repeats = repeats or VAL_REPEATS
    out: list[dict[str, Any]] = []
    report = BuildReport("rl_val")
    for task, times in repeats.items():
        problems = load_task(task, benchmarks_dir).problems
        report.rows_in += len(problems)
        report.info[f"{task} problems ×{times} rollouts"] = len(problems)
        for problem in problems:
            row = rl_row(task, template, problem.problem, problem.gold, len(out), problem.problem_id, "test")
            row[ROLLOUT_N_KEY] = int(times)
            out.append(row)
    report.rows_out = len(out)
    return out, report


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """Write rows with pyarrow (nested lists/dicts become list/struct columns VERL reads back)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@dataclass
class Sources:
    """Input files; any left ``None`` comes from the training folder (``training_dir`` or
    :func:`pr1_eval.inputs.paths.resolve_training_dir`). ``benchmarks_dir`` None: the packaged benchmarks."""

    training_dir: Path | None = None
    benchmarks_dir: Path | None = None
    sft: Path | None = None
    gsm8k: Path | None = None
    dapo: Path | None = None
    keep_truncated: bool = False
    sft_text: str = "official"  # a key of SFT_TEXTS

    def _folder(self) -> Path | None:
        return self.training_dir or resolve_training_dir()

    def _where(self) -> str:
        folder = self._folder()
        if folder is not None:
            return f"not in {folder}"
        return "no training folder: no --training-dir, no $PR1_TRAINING_DIR, no shared/data/training beside the checkout"

    def source(self, name: str) -> tuple[str, str]:
        """``(file name, what provides it)`` of input ``name``; the SFT file follows ``sft_text``."""
        if name != "sft":
            return TRAINING_SOURCES[name]
        if self.sft_text not in SFT_TEXTS:
            raise Pr1EvalError(f"--sft-text {self.sft_text}: unknown; choose one of {', '.join(SFT_TEXTS)}")
        text = SFT_TEXTS[self.sft_text]
        return text.file, text.source

    def resolve(self, name: str) -> Path:
        """The file for input ``name`` (``sft``, ``gsm8k``, ``dapo``); a one-line error when it is missing."""
        filename, provider = self.source(name)
        explicit = getattr(self, name)
        if explicit is not None:
            if not Path(explicit).is_file():
                raise Pr1EvalError(f"--{name} {explicit}: file not found; pass a {provider}")
            return Path(explicit)
        folder = self._folder()
        if folder is not None and (folder / filename).is_file():
            return folder / filename
        raise Pr1EvalError(f"{filename} not found ({self._where()}); pass --{name} FILE ({provider}) or --training-dir DIR")

    def check(self) -> dict[str, Path]:
        """Every training input resolved up front, so nothing is built when one is missing; the
        error names each missing file with its flag and source, in one line."""
        found: dict[str, Path] = {}
        errors: dict[str, str] = {}
        for name in TRAINING_SOURCES:
            try:
                found[name] = self.resolve(name)
            except Pr1EvalError as error:
                errors[name] = str(error)
        if len(errors) == 1:
            raise Pr1EvalError(next(iter(errors.values())))
        if errors:
            named = [n for n in errors if getattr(self, n) is not None]
            parts = [errors[n] for n in named] + [
                f"{self.source(n)[0]}: pass --{n} FILE ({self.source(n)[1]})" for n in errors if n not in named
            ]
            raise Pr1EvalError(f"training files missing ({self._where()}): " + " | ".join(parts) + " | or pass --training-dir DIR")
        return found


def build_dapo(sources: Sources, template: PromptTemplate) -> tuple[list[dict[str, Any]], BuildReport]:
    """De-duplicated DAPO rows; visibly truncated problems dropped unless ``keep_truncated``."""
    rows, report = dedup(load_problems(sources.resolve("dapo")))
    report.name = "rl_dapo"
    if not sources.keep_truncated:
        rows = drop_truncated(rows, report)
    return build_rl(rows, "dapo_math_17k", template), report


def build_all(
    out_dir: Path, sources: Sources | None = None, template_name: str = PAPER_PROMPT
) -> list[BuildReport]:
    """Build every parquet file the stages read; returns one report per file.

    Every input (the three training files, the template, the validation benchmarks) is read
    before the first file is written, so a missing input leaves ``out_dir`` untouched. The reports
    are also written to ``out_dir/data_manifest.json`` (:data:`MANIFEST`), so a built folder says
    which SFT text it holds.
    """
    sources = sources or Sources()
    template = load_template(template_name)
    files = sources.check()
    val_rows, val_report = build_val(template, sources.benchmarks_dir)
    sft_rows, sft_report = build_sft(read_rows(files["sft"]), template, SFT_TEXTS[sources.sft_text].field)
    sft_report.source += f" of {files['sft'].name} (--sft-text {sources.sft_text})"
    gsm = load_problems(files["gsm8k"])
    dapo, dapo_report = build_dapo(sources, template)
    reports = [
        _write(sft_rows, out_dir / OUTPUTS["sft"], sft_report),
        _write(build_rl(gsm, "gsm8k", template), out_dir / OUTPUTS["gsm8k"], BuildReport("rl_gsm8k", len(gsm))),
        _write(dapo, out_dir / OUTPUTS["dapo"], dapo_report),
        _write(val_rows, out_dir / OUTPUTS["val"], val_report),
    ]
    manifest = {"sft_text": sources.sft_text, "prompt": template_name, "files": [asdict(r) for r in reports]}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return reports


def _write(rows: list[dict[str, Any]], path: Path, report: BuildReport) -> BuildReport:
    write_parquet(rows, path)
    report.rows_out, report.path = len(rows), str(path)
    return report
