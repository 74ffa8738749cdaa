"""How ``--help`` reads: user-facing descriptions with an example, defaults shown, 80 columns at most.

Why: the help texts were the modules' first docstring lines (``"``pr1-eval``: run, report …"``,
``"Registers ``pr1-eval analyze`` without importing the analysis stack."``) and argparse wrapped
them to the terminal's width, so a wide terminal got lines of any length. Every parser of
``pr1-eval`` and ``pr1-repro`` (plugins included: they are built through the same subparsers
action, so they get the same parser class) uses :class:`HelpFormatter`:

- at most :data:`MAX_WIDTH` columns, whatever the terminal (narrower terminals get narrower text);
- descriptions and epilogs keep their paragraphs; an indented line (an example command) is kept
  as written, other paragraphs are re-wrapped;
- an option with a default says ``(default: X)`` unless its help already names its default.

The descriptions of ``pr1-eval``'s own commands live in :data:`DESCRIPTIONS`, one place to read
them all; plugins write theirs beside their parser.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import Any

MAX_WIDTH = 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, capped at 80 columns, keeping examples, showing defaults (see module doc)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 28,
                 width: int | None = None) -> None:
        columns = width if width is not None else shutil.get_terminal_size((MAX_WIDTH, 24)).columns
        super().__init__(prog, indent_increment, max_help_position, min(columns, MAX_WIDTH) - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = textwrap.dedent(text).strip("\n").split("\n\n")
        out = []
        for paragraph in paragraphs:
            lines = paragraph.splitlines()
            if any(line.startswith((" ", "\t")) for line in lines):  # examples (and their heading): as written
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(paragraph.split()), width, initial_indent=indent,
                                         subsequent_indent=indent))
        return "\n\n".join(out)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or isinstance(default, bool) or default == argparse.SUPPRESS
                or not action.option_strings or action.required):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help uses :class:`HelpFormatter` (subparsers inherit the class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


TOP = """\
Evaluate models that think in parallel (Parallel-R1): generate k samples per
problem, grade them with math-verify and the paper's checker, and report
Mean@k and Pass@k; analyse, rank and browse the runs.

Start here:
  pr1-eval demo              # the whole pipeline on a tiny model, on CPU
  pr1-eval run --model MODEL --tasks aime24,amc23 -k 16
  pr1-eval report runs/RUN

Run `pr1-eval COMMAND --help` for the options of one command."""

DESCRIPTIONS: dict[str, tuple[str, str]] = {  # command -> (what it does, examples)
    "run": ("Generate k samples per problem of each task, grade them and store them as a run folder "
            "(samples.parquet + run.json), then print the report. Work is saved chunk by chunk: rerun the "
            "same command to resume a stopped run. A folder holding a run with other settings is refused.",
            "  pr1-eval run --model Qwen/Qwen3-1.7B --tasks aime24,amc23 -k 16\n"
            "  pr1-eval run --model ckpt/hf --tasks all --decoding forkjoin --out runs/fj"),
    "sweep": ("Score every checkpoint of a training job (global_step_N folders), one run per step, with "
              "run's options; finished steps are skipped, and a table of mean@k per step is printed at the end.",
              "  pr1-eval sweep checkpoints/ --tasks aime24,amc23 -k 16 --every 100"),
    "merge": ("Join the runs of a --shard job array into one run. Refused, with every reason named, unless the "
              "shards share their settings and together hold every problem once. A lone shard reports as "
              "incomplete until merged.",
              "  pr1-eval merge runs/m-shard0of2 runs/m-shard1of2 --out runs/m"),
    "report": ("Print the metrics of a run: per task mean@k, pass@k with 95% intervals, best@k, maj@k, the "
               "paper-compatible figures, parallel ratio and format rate. An incomplete run (stopped, a lone "
               "shard, part of a benchmark) is marked and its numbers starred.",
               "  pr1-eval report runs/RUN\n"
               "  pr1-eval report runs/RUN --json --strict   # exit 2 when incomplete"),
    "regrade": ("Grade the stored responses of a run again (after a grader upgrade) without generating; "
                "prints how many verdicts changed and the new report.",
                "  pr1-eval regrade runs/RUN"),
    "import": ("Turn generations made elsewhere into a graded run: a JSON Lines file with one sample per line "
               "(task, problem_id, sample_idx, response, gold), or lm-eval's --log_samples output. A task named "
               "like a packaged benchmark is checked against it (a subset reports as partial). An --out that "
               "holds a run is refused unless --replace, which moves the old run aside.",
               "  pr1-eval import generations.jsonl --out runs/imported\n"
               "  pr1-eval import lm_eval_out/ --format lm-eval --out runs/lm"),
    "tiny-model": ("Build a tiny offline Qwen3 model with the six parallel-thinking tags (random weights, or "
                   "--trained on parallel-format traces), for trying the pipeline without a GPU.",
                   "  pr1-eval tiny-model /tmp/tiny --trained"),
    "demo": ("The whole pipeline on CPU in about a minute: a tiny trained model, a small slice of every packaged "
             "task, graded and reported. It proves the pipeline works, not accuracy: expect scores near zero.",
             "  pr1-eval demo\n  pr1-eval report pr1-demo/run"),
    "lm-eval-path": ("Print the folder of pr1-eval's lm-evaluation-harness tasks, for lm_eval --include_path.",
                     "  lm_eval --include_path $(pr1-eval lm-eval-path) --tasks pr1_aime24 ..."),
}


def describe(parser: argparse.ArgumentParser, command: str) -> None:
    """Give ``parser`` its description and examples from :data:`DESCRIPTIONS`."""
    what, examples = DESCRIPTIONS[command]
    parser.description = what
    parser.epilog = f"examples:\n{examples}"
    parser.formatter_class = HelpFormatter
