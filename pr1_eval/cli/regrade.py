"""``pr1-eval regrade``: grade a run's stored responses again (the work: :mod:`pr1_eval.grading.regrade`)."""

from __future__ import annotations

import argparse

from pr1_eval.cli import report
from pr1_eval.cli.help import add_command
from pr1_eval.cli.options import add_answer_policy_option, add_grade_workers_option

SUMMARY = "re-grade stored responses without generating"
DESCRIPTION = ("Grade the stored responses of a run again (after a grader upgrade, or under another "
               "--answer-policy) without generating; prints how many verdicts changed and the new report.")
EXAMPLES = "  pr1-eval regrade runs/RUN\n  pr1-eval regrade runs/RUN --answer-policy lenient"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "regrade", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("run", metavar="RUN", help="run folder (the one holding run.json)")
    add_grade_workers_option(p)
    add_answer_policy_option(p, "the run's own (run.json; paper when it records none)")
    p.set_defaults(func=_cmd_regrade)


def _cmd_regrade(args: argparse.Namespace) -> int:
    from pr1_eval.grading.regrade import regrade

    summary = regrade(args.run, workers=args.grade_workers, answer_policy=args.answer_policy)
    print(f"regraded {summary['samples']} samples in {summary['seconds']} s under answer policy {summary['policy']}; "
          f"{summary['changed']} verdict(s) changed")
    report.print_report(args.run)
    return 0
