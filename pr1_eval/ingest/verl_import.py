"""``pr1-eval import-verl DUMP_DIR --out RUNS_ROOT``: a VERL job's dumps become one run per step.

What is read. ``DUMP_DIR`` is a folder of ``{step}.jsonl`` files (``trainer.rollout_data_dir`` or
``trainer.validation_data_dir``), or a folder holding such folders (the fork's scripts write
``rollout-log`` and ``validation-log`` under the checkpoint folder). A folder whose name contains
``val`` holds validation, ``rollout`` or ``train`` training rollouts; ``--kind`` names the kind of
a folder passed directly. Formats: :mod:`pr1_eval.ingest.verl_formats`; problem matching:
:mod:`pr1_eval.ingest.verl_match`.

What is written. One run per (kind, step): ``RUNS_ROOT/train/step-000120`` and
``RUNS_ROOT/val/step-000120``, through the run store, one :class:`SampleRecord` per rollout and a
:class:`RunRecord` whose ``model.step`` is the step, ``model.family`` the job, and whose
``training`` section says (keys): ``job``, ``kind`` ('train' | 'validation'), ``step``, ``format``,
``tags_kept``, ``structure_measurable`` (False for VERL 0.9.1, whose dumps lost the tags:
parallel ratio and block positions cannot be read from them, accuracy, reward and length can),
``source`` (``file``, ``size``, ``mtime_ns``, ``sha256``), ``rows``, ``padding_rows_dropped``,
``earlier_turns_dropped``, ``groups``, ``problems_matched``, ``problems_unmatched``,
``rows_with_other_step`` (always 0: such a row is refused, see below), ``lengths``, and ``summary``: the step's numbers
(:func:`pr1_eval.report.step_summary.step_summary`, computed once here from the graded samples, so
per-step curves never read the responses); every key is a field of
:class:`pr1_eval.records.training.TrainingSection`, and the layout (folders, names, tasks, summary) is
built by :mod:`pr1_eval.ingest.training_layout`, which repro's rollout writer shares. Samples: the job's ``score`` and ``acc`` are kept as
``reward`` / ``reward_acc`` (its other reward keys in ``reward_info``), and every sample with a
known gold is graded again by pr1-eval's grader (``correct``, ``correct_paper``). A task named
like a packaged benchmark is checked against it (``benchmark_check``, as ``pr1-eval import``
does), so a validation set holding part of a benchmark reports as partial.

Groups. V1 rows are grouped by their uid's uuid (a multi-turn session keeps its last output, as
VERL's metrics do); legacy and fork rows by prompt text. Groups of the same problem are pooled
(the fork's validation file repeats each AIME/AMC problem 16 times at n = 1: pooled, k = 16), so a
sample's ``sample_idx`` is its place among the problem's samples, in file order. Each task's k is
the most common number of samples per problem (a problem twice in a batch holds more, not the
others fewer).

When a step is read (the completeness rule). VERL rewrites a step's file whole, and VERL 0.9.1
writes from a background thread, so a file can be read half-written. A step's file is read only
once the job has written a *later* step (in the same folder or the job's other dump folder: one
writer writes the files in turn), or when ``--final`` says the job has ended. The newest step
waits otherwise, and the summary says so. A file that changes while it is read is left for the
next run.

Refused, never guessed (decisions). Two files naming one step (``7.jsonl`` and ``007.jsonl``):
each would replace the other's run on every rerun, and which one is the step is the user's to
say. A row whose ``step`` is not its file's: VERL writes each step's rows to that step's file, so
such a row means a damaged or hand-joined file; counting it in the file's step doubles that
step's k, and moving it into another step's run would mix two files' rows in one run. The error
names the line and both steps.

Reruns. Each run records its file's size, mtime and sha256. A rerun skips a step whose file is
unchanged (same size and mtime, or the same sha256), and imports a new or changed one; a run of a
changed file is moved, never deleted, to ``RUNS_ROOT.superseded/<kind>/step-N.replaced-<time>``
(outside ``RUNS_ROOT``, and a name run discovery skips, so no reader counts a step twice). A step's run is written whole (status
``importing`` until its samples are in), so no sample is ever stored twice; a killed import's
own incomplete run is redone in place. A folder holding a run that is not an import of this kind
is refused.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.annotate import annotate_grades
from pr1_eval.ingest.benchmark_check import check_import
from pr1_eval.ingest.importer import load_tokenizer
from pr1_eval.ingest.training_layout import step_record, step_run_dir, supersede, with_samples
from pr1_eval.ingest.verl_formats import FORK, Lengths
from pr1_eval.ingest.verl_groups import ParsedStep, read_step, step_records
from pr1_eval.ingest.verl_match import UNMATCHED, KnownProblem, ProblemIndex
from pr1_eval.inputs.paths import file_sha256
from pr1_eval.inputs.tasks import TASKS
from pr1_eval.records.checks import MAX_INT64
from pr1_eval.records.provenance import now_iso
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.records.training import DumpSource, TrainingSection
from pr1_eval.store.out_folder import holds_run
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RUN_JSON, RunStore
from pr1_eval.terminal import terminal_text


@dataclass(frozen=True)
class StepFile:
    path: Path
    kind: str  # 'train' | 'validation'
    step: int


@dataclass
class StepResult:
    """One line of the summary."""

    file: StepFile
    status: str  # imported | replaced | unchanged | waiting | changed-while-read
    run: Path | None = None
    rows: int = 0
    groups: int = 0
    matched: int = 0
    unmatched: int = 0
    padding: int = 0
    format: str = ""


@dataclass
class ImportOptions:
    job: str | None = None
    kind: str | None = None
    final: bool = False
    data: list[str] = field(default_factory=list)
    benchmarks: bool = True
    lengths: Lengths = Lengths()
    grade: bool = True
    workers: int | None = None
    tokenizer: str | None = None  # a local model folder: token positions and counts (see verl_groups)


# ----- finding the step files ---------------------------------------------------------------------
def _step_of(path: Path) -> int:
    if not path.stem.isdigit():
        raise Pr1EvalError(f"{path}: cannot read a step number from the file name; VERL names each dump "
                           "{step}.jsonl (e.g. 120.jsonl): move other .jsonl files out of the dump folder")
    step = int(path.stem)
    if step > MAX_INT64:
        raise Pr1EvalError(f"{path}: step {step} is past the largest step a run records ({MAX_INT64}); rename the "
                           "file to its real step ({step}.jsonl)")
    return step


def kind_of(folder: Path) -> str | None:
    """'validation' or 'train' from a dump folder's name, None when the name says neither."""
    name = folder.name.lower()
    if "val" in name or "test" in name:
        return "validation"
    if "rollout" in name or "train" in name:
        return "train"
    return None


def find_step_files(dump_dir: str | Path, kind: str | None = None) -> list[StepFile]:
    """Every ``{step}.jsonl`` of ``dump_dir`` (or of its dump subfolders), with its kind."""
    root = Path(dump_dir).expanduser()
    if not root.is_dir():
        raise Pr1EvalError(f"{root}: not a folder; pass the job's rollout_data_dir, validation_data_dir or the "
                           "folder holding both")
    own = sorted(root.glob("*.jsonl"))
    if own:
        folder_kind = kind or kind_of(root) or "train"
        return _one_file_per_step([StepFile(p, folder_kind, _step_of(p)) for p in own])
    if kind is not None:
        raise Pr1EvalError(f"{root}: holds no {{step}}.jsonl files; --kind applies to a dump folder itself")
    files: list[StepFile] = []
    kinds: dict[str, Path] = {}
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*.jsonl"))):
        sub_kind = kind_of(sub)
        if sub_kind is None:
            raise Pr1EvalError(f"{sub}: cannot tell whether it holds training rollouts or validation; name it "
                               "rollout-log / validation-log, or import it alone with --kind train|validation")
        if sub_kind in kinds:
            raise Pr1EvalError(f"{sub} and {kinds[sub_kind]} both look like {sub_kind} dumps; import them one at a "
                               "time with --kind")
        kinds[sub_kind] = sub
        files.extend(StepFile(p, sub_kind, _step_of(p)) for p in sorted(sub.glob("*.jsonl")))
    if not files:
        raise Pr1EvalError(f"{root}: no {{step}}.jsonl files in it or in its subfolders; pass the folder VERL's "
                           "trainer.rollout_data_dir or validation_data_dir points at")
    return _one_file_per_step(files)


def _one_file_per_step(files: list[StepFile]) -> list[StepFile]:
    """Refuse two files naming one step of one kind (``7.jsonl`` and ``007.jsonl``): both would be
    imported to the same run, each replacing the other on every rerun."""
    seen: dict[tuple[str, int], StepFile] = {}
    for file in files:
        if (other := seen.setdefault((file.kind, file.step), file)) is not file:
            raise Pr1EvalError(f"{other.path} and {file.path} both name {file.kind} step {file.step}; VERL writes one "
                               "file per step: keep the right one and move the other out of the dump folder")
    return files


def default_job(dump_dir: str | Path) -> str:
    """The job's name: the folder holding the dump folders (``…/Parallel-R1-S1/rollout-log``).

    Decision: the name stays that folder's name, readable in every table; the folder's path keeps
    jobs apart where names meet. Into one ``--out`` only one job's dumps are imported
    (:func:`check_one_job` refuses a second one, whose steps would replace the first's), and two
    same-named jobs in two run roots are shown apart by the part of their paths that differs
    (:func:`analysis.runs.steps.step_table`), never pooled into one series."""
    root = Path(dump_dir).expanduser().resolve()
    return (root.parent if any(root.glob("*.jsonl")) else root).name


# ----- one step: the run -------------------------------------------------------------------------
def _signature(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def run_dir_of(root: Path, file: StepFile) -> Path:
    return step_run_dir(root, file.kind, file.step)


def _training(file: StepFile, parsed: ParsedStep, opts: ImportOptions, job: str, size_mtime: tuple[int, int],
              groups: int, matched: int, unmatched: int) -> TrainingSection:
    tags = parsed.format == FORK
    return TrainingSection(
        job=job, kind=file.kind, step=file.step, format=parsed.format, tags_kept=tags, structure_measurable=tags,
        structure_note=None if tags else ("VERL 0.9.1 decodes with skip_special_tokens=True, which deletes the "
                                          "Parallel-R1 tags: parallel ratio and block positions cannot be "
                                          "measured; accuracy, reward and length can"),
        source=DumpSource(file=str(file.path.resolve()), size=size_mtime[0], mtime_ns=size_mtime[1],
                          sha256=parsed.sha256),
        rows=len(parsed.rows), padding_rows_dropped=parsed.padding, earlier_turns_dropped=parsed.earlier_turns,
        groups=groups, problems_matched=matched, problems_unmatched=unmatched, rows_with_other_step=parsed.other_step,
        lengths={"max_prompt_length": opts.lengths.prompt, "max_response_length": opts.lengths.response},
        tokenizer=None if opts.tokenizer is None else str(Path(opts.tokenizer).expanduser().resolve()),
    )


def _run_record(file: StepFile, records: list[SampleRecord], tasks: dict[str, KnownProblem],
                training: TrainingSection) -> RunRecord:
    record = step_record(training, status="importing",
                         engine={"backend": "import", "source": "verl-dump", "format": training.format,
                                 **({"tokenizer": training.tokenizer} if training.tokenizer else {})},
                         decoding={"mode": "unknown", "tags_kept": training.tags_kept})
    record = with_samples(record, records, lambda task: (tasks[task].version or None, tasks[task].source or None))
    # a benchmark's task holding part of it (a thinned validation set) reports as partial
    return replace(record, imported_from=str(file.path.resolve())).with_sections(
        {"benchmark_check": _benchmark_check(file, records)})


def _benchmark_check(file: StepFile, records: list[SampleRecord]) -> dict[str, Any]:
    """Validation steps are compared with the packaged benchmarks (a thinned set reports as
    partial); training rollouts are not: they are the job's training data (GSM8K's train split
    matched under the name ``gsm8k``), never a benchmark's score, and comparing them put the same
    "different problem set" warning on every step of a job."""
    if file.kind != "validation":
        return {}
    return check_import(r for r in records if r.task in TASKS)


def _previous(out: Path, file: StepFile) -> RunRecord | None:
    """The run at ``out`` when it is an import of a VERL dump; None when there is none; refused otherwise."""
    if not holds_run(out):
        return None
    store = RunStore(out)
    record = store.read_run() if store.exists() else None
    if record is None or record.training is None or record.training.kind != file.kind:
        raise Pr1EvalError(f"{out} already holds a run that is not an import of {file.kind} step {file.step} of a "
                           "VERL dump; import-verl never writes over it. Pass another --out")
    return record


def _unchanged(previous: RunRecord, size_mtime: tuple[int, int], path: Path) -> bool:
    source = previous.training.source if previous.training is not None else None
    if previous.status != "complete" or source is None:
        return False
    if (source.size, source.mtime_ns) == size_mtime:
        return True
    if source.size != size_mtime[0]:
        return False
    return file_sha256(path) == source.sha256


def import_step(file: StepFile, root: Path, index: ProblemIndex, opts: ImportOptions, job: str,
                tokenizer: Any = None) -> StepResult:
    """Import one complete step file as a run (or skip it when its run is up to date), holding
    the step run's writer lock (:mod:`pr1_eval.store.run_lock`) from its first look to its last write."""
    out = run_dir_of(root, file)
    with run_lock(out, "pr1-eval import-verl"):
        return _import_step_locked(file, root, out, index, opts, job, tokenizer)


def _import_step_locked(file: StepFile, root: Path, out: Path, index: ProblemIndex, opts: ImportOptions, job: str,
                        tokenizer: Any) -> StepResult:
    previous = _previous(out, file)
    before = _signature(file.path)
    if previous is not None and _unchanged(previous, before, file.path):
        return StepResult(file, "unchanged", out, rows=int(previous.training.rows or 0) if previous.training else 0)
    parsed = read_step(file.path, file.step, opts.lengths)
    if _signature(file.path) != before:
        return StepResult(file, "changed-while-read", None)
    if not parsed.rows:
        raise Pr1EvalError(f"{file.path}: no rows to import (only padding rows, or an empty file)")
    _warn(parsed.notes)
    records, tasks, groups, unmatched = step_records(parsed, index, tokenizer)
    matched = len({(r.task, r.problem_id) for r in records if r.task != UNMATCHED})
    if opts.grade and (graded := [r for r in records if r.gold]):
        annotate_grades(graded, workers=opts.workers)
    training = _training(file, parsed, opts, job, before, groups, matched, unmatched)
    run = _run_record(file, records, tasks, training)
    status = "imported"
    if previous is not None and previous.status == "complete":  # a changed file: the old run moves out
        supersede(out, root, file.kind)
        status = "replaced"
    store = RunStore(out)
    store.write_run(run)  # "importing" until every sample is in: a killed import reads as incomplete
    store.rewrite(records)
    store.write_run(replace(run, status="complete", finished_at=now_iso()))
    return StepResult(file, status, out, len(records), groups, matched, unmatched, parsed.padding, parsed.format)


#: How many rows' notes a step prints before it counts the rest.
SHOWN_NOTES = 3


def _warn(notes: list[str]) -> None:
    """The first :data:`SHOWN_NOTES` notes of a step, then how many more (each names its line)."""
    for note in notes[:SHOWN_NOTES]:
        print(terminal_text(f"warning: {note}"), file=sys.stderr)
    if len(notes) > SHOWN_NOTES:
        print(f"warning: … and {len(notes) - SHOWN_NOTES} more such row(s) in this step", file=sys.stderr)


# ----- the command -------------------------------------------------------------------------------
def build_index(opts: ImportOptions) -> ProblemIndex:
    index = ProblemIndex()
    for path in opts.data:
        index.add_data_file(path)
    if opts.benchmarks:
        index.add_benchmarks()
    return index


def job_folder(step_file: str | Path) -> Path:
    """The job folder a step file belongs to (``JOB/rollout-log/12.jsonl`` → ``JOB``)."""
    return Path(step_file).resolve().parent.parent


def check_one_job(root: Path, files: list[StepFile]) -> None:
    """Refuse to import a job's dumps into a run root that holds another job's steps: the step
    folders (``train/step-000010``) would collide, and the second job would silently replace the
    first's steps (:func:`supersede` keeps changed dumps of *one* job)."""
    ours = {job_folder(f.path) for f in files}
    for run_json in sorted(root.glob(f"*/step-*/{RUN_JSON}")):
        try:
            training = RunRecord.from_dict(json.loads(run_json.read_text(encoding="utf-8")), str(run_json)).training
        except (OSError, ValueError, RecursionError, Pr1EvalError):
            continue  # not ours to judge here: _previous reads it with a clear error
        source = training.source if training is not None else None
        theirs = job_folder(source.file) if source is not None and source.file is not None else None
        if theirs is not None and theirs not in ours:
            raise Pr1EvalError(f"--out {root} holds the steps of another job (dumps in {theirs}); this one's dumps are "
                               f"in {', '.join(sorted(map(str, ours)))}; import each job into its own --out "
                               f"(e.g. --out {root.parent / (sorted(ours)[0].name + '-runs')})")


def import_verl(dump_dir: str | Path, runs_root: str | Path, opts: ImportOptions | None = None,
                progress: Callable[[StepResult], None] | None = None) -> list[StepResult]:
    """Import every complete, new or changed step of a VERL job's dumps (module docstring)."""
    opts = opts or ImportOptions()
    root = Path(runs_root).expanduser()
    if root.exists() and not root.is_dir():
        raise Pr1EvalError(f"--out {root} is a file; pass a folder for the runs")
    files = sorted(find_step_files(dump_dir, opts.kind), key=lambda f: (f.step, f.kind))
    job = opts.job or default_job(dump_dir)
    check_one_job(root, files)
    newest = max(f.step for f in files)
    index = build_index(opts)
    tokenizer = None if opts.tokenizer is None else load_tokenizer(opts.tokenizer)
    results = []
    for file in files:
        if file.step == newest and not opts.final:
            result = StepResult(file, "waiting")
        else:
            result = import_step(file, root, index, opts, job, tokenizer)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def _progress_printer(total: int) -> tuple[Callable[[StepResult], None], Callable[[], None]]:
    """A bar on a terminal, else one stderr line per step."""
    if sys.stderr.isatty():
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="steps", unit="step", file=sys.stderr)

        def on_bar(result: StepResult) -> None:
            bar.set_postfix_str(f"{result.file.kind} {result.file.step}: {result.status}")
            bar.update(1)

        return on_bar, bar.close
    done = [0]

    def on_line(result: StepResult) -> None:
        done[0] += 1
        print(f"[pr1-eval] {done[0]}/{total} steps: {result.file.kind} step {result.file.step} {result.status} "
              f"({result.rows} rows)", file=sys.stderr, flush=True)

    return on_line, lambda: None


def summary_lines(results: list[StepResult]) -> list[str]:
    """The closing table: one row per kind and status, then what waits and why."""
    lines = [f"{'kind':<11}{'status':<20}{'steps':>6}{'rows':>9}{'groups':>8}{'matched':>8}{'unmatched':>10}"]
    table: dict[tuple[str, str], list[int]] = {}
    for r in results:
        cell = table.setdefault((r.file.kind, r.status), [0, 0, 0, 0, 0])
        for i, value in enumerate((1, r.rows, r.groups, r.matched, r.unmatched)):
            cell[i] += value
    for (kind, status), (steps, rows, groups, matched, unmatched) in sorted(table.items()):
        lines.append(f"{kind:<11}{status:<20}{steps:>6}{rows:>9}{groups:>8}{matched:>8}{unmatched:>10}")
    waiting = [r for r in results if r.status == "waiting"]
    if waiting:
        lines.append(f"step {waiting[0].file.step} waits: it is the newest, and may still be written; it is imported "
                     "once a later step exists, or now with --final once the job has ended")
    formats = sorted({r.format for r in results if r.format})
    if formats and all(f != FORK for f in formats):
        lines.append("note: VERL 0.9.1 dumps lose the Parallel-R1 tags (skip_special_tokens=True): structure "
                     "cannot be measured from them; accuracy, reward and length can")
    return lines


def run_command(dump_dir: str, runs_root: str, opts: ImportOptions) -> list[StepResult]:
    """``import-verl`` as the CLI runs it: progress while it works, the summary at the end."""
    total = len(find_step_files(dump_dir, opts.kind))
    on_result, close = _progress_printer(total)
    try:
        results = import_verl(dump_dir, runs_root, opts, progress=on_result)
    finally:
        close()
    print("\n".join(summary_lines(results)))
    return results
