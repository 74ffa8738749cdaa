"""``pr1-eval import``: turn generations made elsewhere into a graded run.

The formats it reads are the keys of :data:`FORMATS`, so ``--format``'s choices and the
importer each one runs cannot disagree. The importers load only when the command runs: they
bring the grader and the store, which ``pr1-eval --help`` does not need.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from pr1_eval.cli import report
from pr1_eval.cli.help import add_command
from pr1_eval.cli.options import add_answer_policy_option, add_grade_workers_option
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.parallel_probe import import_rows_of, read_parallel_probe, run_info_of

SUMMARY = "turn generations made elsewhere into a graded run"
DESCRIPTION = ("Turn generations made elsewhere into a graded run: a JSON Lines file with one sample per line "
               "(task, problem_id, sample_idx, response, gold), or lm-eval's --log_samples output. A task named "
               "like a packaged benchmark is checked against it (a subset reports as partial). An --out that "
               "holds a run is refused unless --replace, which moves the old run aside.")
EXAMPLES = ("  pr1-eval import generations.jsonl --out runs/imported\n"
            "  pr1-eval import lm_eval_out/ --format lm-eval --out runs/lm\n"
            "  pr1-eval import MODEL__aime24.json --format parallel-probe --out runs/q8b")
#: The JSON Lines format, in the help (docs/usage/import.md says the same).
SCHEMA = ("A JSON Lines file holds one sample per line: task, problem_id, sample_idx, response, gold (required); "
          "problem (the problem's text), model and step (optional). A full line (wrapped here):\n\n"
          '  {"task": "aime24", "problem_id": "aime24-0", "sample_idx": 0,\n'
          '   "response": "... Final Answer: 204", "gold": "204",\n'
          '   "problem": "Every morning Aya goes for a $9$-kilometer-long walk ...",\n'
          '   "model": "/ckpt/global_step_200", "step": 200}\n\n'
          "A task named like a packaged benchmark is matched with it by problem id, else by problem text, else "
          "(index ids 0, 1, ...) by position where the golds agree: give problem when your ids are not the "
          "packaged ones.")
K = int | dict[str, int] | None  # --k, parsed


def _import_jsonl(args: argparse.Namespace, k: K) -> Path:
    from pr1_eval.ingest.importer import import_jsonl

    return import_jsonl(args.files[0], args.out, workers=args.grade_workers, k=k, tokenizer=args.tokenizer,
                        replace=args.replace, answer_policy=args.answer_policy or "paper")


def _import_lm_eval(args: argparse.Namespace, k: K) -> Path:
    from pr1_eval.ingest.lm_eval_import import import_lm_eval

    return import_lm_eval(args.files[0], args.out, workers=args.grade_workers, k=k, tokenizer=args.tokenizer,
                          replace=args.replace, answer_policy=args.answer_policy)


def _import_parallel_probe(args: argparse.Namespace, k: K) -> Path:
    from pr1_eval.ingest.importer import import_rows

    trajectories = read_parallel_probe(args.files[0])
    return import_rows(import_rows_of(trajectories), args.out, source=str(args.files[0]), workers=args.grade_workers,
                       k=k, replace=args.replace, answer_policy=args.answer_policy or "paper",
                       extra_run_info=run_info_of(trajectories))


#: ``--format`` name -> (what it reads, the importer that reads it); the first is the default.
FORMATS: dict[str, tuple[str, Callable[[argparse.Namespace, K], Path]]] = {
    "jsonl": ("one sample per line", _import_jsonl),
    "lm-eval": ("lm_eval's --log_samples file or folder", _import_lm_eval),
    "parallel-probe": ("Parallel-Probe trajectories (MODEL__TASK.json: branches with probe answers, answers only)",
                       _import_parallel_probe),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "import", summary=SUMMARY, description=f"{DESCRIPTION}\n\n{SCHEMA}", examples=EXAMPLES)
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines file, or lm-eval's --log_samples file/folder")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the imported run (must not hold a run)")
    p.add_argument("--format", choices=list(FORMATS), default=next(iter(FORMATS)),
                   help="; ".join(f"{name}: {what}" for name, (what, _) in FORMATS.items()))
    p.add_argument("--k", default=None, metavar="N|TASK=N,...",
                   help="samples per problem: every task (--k 4) or per task (--k aime24=16,math300_pr1=1); keeps the "
                        "N lowest sample_idx of each problem (default: per task, the most any problem has)")
    p.add_argument("--tokenizer", default=None, metavar="DIR",
                   help="local model folder whose tokenizer counts block positions in tokens, as a generated run "
                        "does (default: characters)")
    add_grade_workers_option(p)
    add_answer_policy_option(p, "paper (an import names no prompt; pass lenient for a base model or a boxed prompt); "
                                "for --format lm-eval, the policy its pr1_* tasks graded under, else paper")
    p.add_argument("--replace", action="store_true",
                   help="when --out already holds a run, move it aside (into the hidden .replaced folder beside "
                        "it, never deleted, counted by no search) instead of refusing")
    p.set_defaults(func=_cmd_import)


def _cmd_import(args: argparse.Namespace) -> int:
    from pr1_eval.ingest.importer import parse_k_option

    k = parse_k_option(args.k)
    if len(args.files) != 1:
        raise Pr1EvalError(f"import takes one file (or, for --format lm-eval, one output folder); got {len(args.files)}")
    _, importer = FORMATS[args.format]
    out = importer(args, k)
    report.print_report(out)
    return 0
