"""Results where the team already looks: ``--log-to wandb`` / ``--log-to mlflow`` on ``run``,
``sweep`` and ``leaderboard``.

Why: a team training with VERL watches its curves in Weights & Biases (or MLflow); an evaluation
sweep printed to a terminal sits apart from them. Logged here, each checkpoint's scores land on the
same x axis as the training curves: the **checkpoint step** (``checkpoint_step``; W&B is told to
plot every ``eval/…`` metric against it with ``define_metric``, so steps may arrive in any order and
a tracker run resumed into the training run's id (``WANDB_RUN_ID=… WANDB_RESUME=allow``) puts them
on its own charts; MLflow takes the step as each metric's ``step``).

What is logged per run (one point per checkpoint step; a run without a step is step 0):
``eval/TASK/mean_at_K`` with ``…_ci_low`` / ``…_ci_high`` (the report's 95 % bootstrap interval),
``pass_at_K``, ``maj_at_K``, ``mean_at_K_paper``, ``parallel_ratio``, the token latency
(``response_length``, ``critical_path``, ``speedup``), ``tokens_per_sample``; and the samples as
one table (W&B table ``eval/samples``, MLflow ``samples.json``) with the step, the task, the
problem, the verdict, the answer, the block count, the length and the response cut to
:data:`TEXT_CHARS` characters. Only complete tasks are logged (an incomplete task has no numbers
in the report either), and the reason is printed for the others.

Both libraries are optional extras (``pip install 'pr1-eval[wandb]'`` / ``[mlflow]``), never a
requirement: asking for one that is not installed is refused in one line before any work starts.
Their own settings apply as usual (``WANDB_MODE=offline``, ``WANDB_DIR``, ``WANDB_ENTITY``,
``MLFLOW_TRACKING_URI``).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError

BACKENDS = ("wandb", "mlflow")
#: The settings a failing start most likely comes from, named in its error line.
_SETTINGS = {"wandb": "WANDB_MODE, WANDB_API_KEY, WANDB_DIR", "mlflow": "MLFLOW_TRACKING_URI"}
#: The x axis every metric is plotted against.
STEP_KEY = "checkpoint_step"
#: Characters of each response kept in the samples table (a table of full 3,000-token responses
#: over a sweep is hundreds of megabytes; the run folder keeps the whole text).
TEXT_CHARS = 2000
SAMPLE_COLUMNS = ("task", "problem_id", "sample_idx", "correct", "extracted_answer", "gold", "n_blocks",
                  "n_response_tokens", "response")


def add_tracking_options(p: argparse.ArgumentParser) -> None:
    """``--log-to``, ``--log-project`` and ``--log-name`` (run, sweep, leaderboard)."""
    p.add_argument("--log-to", action="append", choices=BACKENDS, default=None, metavar="BACKEND",
                   help="also log the scores per checkpoint step, and the samples, to wandb or mlflow (repeatable; "
                        "an optional extra: pip install 'pr1-eval[wandb]')")
    p.add_argument("--log-project", default="pr1-eval", metavar="NAME",
                   help="the W&B project / MLflow experiment to log to (default pr1-eval)")
    p.add_argument("--log-name", default=None, metavar="NAME",
                   help="the tracker run's name (default: the run folder's, the sweep's family, or 'leaderboard')")


def vars_for_log(args: argparse.Namespace) -> dict[str, Any]:
    """The command's options as the tracker run's config (what was asked, beside what it scored)."""
    return {k: v if isinstance(v, int | float | str | bool) or v is None else str(v)
            for k, v in vars(args).items() if k != "func" and not k.startswith("log_")}


def check_installed(backends: Sequence[str] | None) -> None:
    """Refuse, in one line and before any work, a backend whose package is not installed."""
    for backend in backends or ():
        if backend not in BACKENDS:
            raise Pr1EvalError(f"--log-to {backend!r}: choose one of {', '.join(BACKENDS)}")
        if importlib.util.find_spec(backend) is None:
            raise Pr1EvalError(f"--log-to {backend}: the {backend} package is not installed; install it with "
                               f"pip install 'pr1-eval[{backend}]' (or pip install {backend}), or leave out --log-to")


def _key(name: str) -> str:
    """A metric name both libraries accept (MLflow refuses ``@``): ``mean@16`` -> ``mean_at_16``."""
    return name.replace("@", "_at_")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def step_metrics(report: Any) -> tuple[dict[str, float], list[str]]:
    """The metrics of one run's report (a :class:`pr1_eval.report.schema.RunReport`), keyed
    ``eval/TASK/NAME``, and one line per task left out (incomplete)."""
    metrics: dict[str, float] = {}
    skipped = []
    for task, entry in sorted(report.tasks.items()):
        m = entry.metrics
        if m is None:
            skipped.append(f"{task}: not logged, incomplete ({entry.incomplete_reason or 'samples missing'})")
            continue
        k = m.k
        scores = {"mean": f"mean@{k}", "pass_at_k": f"pass@{k}", "maj_at_k": f"maj@{k}", "mean_paper": f"mean@{k}_paper"}
        values: dict[str, Any] = {name: getattr(m, field) for field, name in scores.items()}
        for field, interval in (m.ci95 or {}).items():  # keyed by the field's name
            if interval is not None and field in scores:
                values[f"{scores[field]}_ci_low"], values[f"{scores[field]}_ci_high"] = interval
        values.update({"parallel_ratio": m.parallel_ratio, "response_length": m.response_length_per_sample,
                       "critical_path": m.critical_path_per_sample, "speedup": m.speedup,
                       "tokens_per_sample": m.tokens_per_sample})
        for name, value in values.items():
            if (number := _number(value)) is not None:
                metrics[f"eval/{task}/{_key(name)}"] = number
    return metrics, skipped


def samples_frame(run_dir: str | Path, step: int) -> Any:
    """The run's samples as a table to log: :data:`SAMPLE_COLUMNS`, the step first, each
    response cut to :data:`TEXT_CHARS` characters."""
    from pr1_eval.store.run_store import RunStore

    frame = RunStore(Path(run_dir)).read_table(columns=list(SAMPLE_COLUMNS)).to_pandas()
    frame["response"] = frame["response"].astype(str).str.slice(0, TEXT_CHARS)
    frame.insert(0, "step", step)
    return frame


class _Wandb:
    def __init__(self, project: str, name: str, config: dict[str, Any]) -> None:
        import wandb

        self.wandb = wandb
        self.run = wandb.init(project=project, name=name, config=config, job_type="eval")
        self.run.define_metric(STEP_KEY)
        self.run.define_metric("eval/*", step_metric=STEP_KEY)

    def log_step(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log({STEP_KEY: step, **metrics})

    def log_samples(self, frame: Any) -> None:
        self.run.log({"eval/samples": self.wandb.Table(dataframe=frame)})

    def where(self) -> str:
        return str(getattr(self.run, "dir", "") or self.run.url or "wandb")

    def close(self) -> None:
        self.run.finish()


class _Mlflow:
    def __init__(self, project: str, name: str, config: dict[str, Any]) -> None:
        import mlflow

        self.mlflow = mlflow
        mlflow.set_experiment(project)
        self.run = mlflow.start_run(run_name=name)
        mlflow.log_params({k: str(v)[:500] for k, v in config.items()})

    def log_step(self, step: int, metrics: dict[str, float]) -> None:
        self.mlflow.log_metrics(metrics, step=step)

    def log_samples(self, frame: Any) -> None:
        self.mlflow.log_table(frame, artifact_file="samples.json")

    def where(self) -> str:
        return f"{self.mlflow.get_tracking_uri()} (run {self.run.info.run_id})"

    def close(self) -> None:
        self.mlflow.end_run()


class Tracker:
    """The chosen backends, opened once per command; :meth:`log_run` per finished run."""

    def __init__(self, backends: Sequence[str] | None, project: str, name: str, config: dict[str, Any]) -> None:
        check_installed(backends)
        self.sinks: list[Any] = []
        self._samples: list[Any] = []
        for backend in dict.fromkeys(backends or ()):
            try:
                self.sinks.append((_Wandb if backend == "wandb" else _Mlflow)(project, name, config))
            except Exception as exc:  # noqa: BLE001 - the library's own settings are wrong: say which, in one line
                detail = " ".join(str(exc).split())[:300]
                raise Pr1EvalError(f"--log-to {backend}: could not start a tracker run ({type(exc).__name__}: "
                                   f"{detail}); fix its settings ({_SETTINGS[backend]}) or leave out --log-to; "
                                   "the runs themselves are stored") from None

    @classmethod
    def from_args(cls, args: argparse.Namespace, name: str, config: dict[str, Any]) -> Tracker:
        return cls(getattr(args, "log_to", None), getattr(args, "log_project", "pr1-eval"),
                   getattr(args, "log_name", None) or name, config)

    def log_run(self, run_dir: str | Path, report: Any = None) -> None:
        """Log a finished run's metrics at its checkpoint step (0 when it has none)."""
        if not self.sinks:
            return
        if report is None:
            from pr1_eval.report.load import load_report

            report = load_report(run_dir)
        step = (report.model or {}).get("step") or 0
        metrics, skipped = step_metrics(report)
        for line in skipped:
            print(f"[pr1-eval] log: {Path(run_dir).name} {line}", file=sys.stderr)
        for sink in self.sinks:
            try:
                sink.log_step(int(step), metrics)
            except Exception as exc:  # noqa: BLE001 - the run is stored; a tracker's failure must not end the command
                print(f"warning: could not log {Path(run_dir).name} to {type(sink).__name__.strip('_').lower()}: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
        self._samples.append(samples_frame(run_dir, int(step)))

    def close(self) -> None:
        """Log the samples of every run as one table, finish each tracker run and say where it is."""
        if not self.sinks:
            return
        import pandas as pd

        frame = pd.concat(self._samples, ignore_index=True) if self._samples else None
        for sink in self.sinks:
            if frame is not None:
                sink.log_samples(frame)
            where = sink.where()
            sink.close()
            print(f"[pr1-eval] logged {len(self._samples)} run(s) to {where}", file=sys.stderr)


def log_runs(args: argparse.Namespace, run_dirs: Iterable[str | Path], name: str, config: dict[str, Any]) -> None:
    """Open the trackers ``args`` asks for, log ``run_dirs`` (in order of step), close them."""
    if not getattr(args, "log_to", None):
        return
    tracker = Tracker.from_args(args, name, config)
    try:
        for run_dir in run_dirs:
            tracker.log_run(run_dir)
    finally:
        tracker.close()
