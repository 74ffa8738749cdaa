"""The report as the terminal shows it: one line per task, then what is incomplete, and the
fork-join costs when a run records them. Reads :class:`pr1_eval.report.schema.RunReport` fields;
the column names are the metric names (:func:`pr1_eval.stats.names.metric_name`) at the run's k,
or at ``k`` when tasks differ in k (then k has its own column). Every text from the run (task
names, the lines naming problems) goes through :func:`pr1_eval.terminal.terminal_text`."""

from __future__ import annotations

from pr1_eval.records.answer_policy import POLICY_SUMMARIES
from pr1_eval.report.completeness import LIMIT_WARNING
from pr1_eval.report.schema import RunReport, TaskMetrics, TaskReport
from pr1_eval.stats.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MAJ_TIE_RULE
from pr1_eval.terminal import terminal_text

#: The metric columns: (field, whether its interval is shown beside it).
_METRIC_COLUMNS = (("mean", True), ("pass_at_k", True), ("best_at_k", False), ("maj_at_k", False),
                   ("mean_paper", False), ("best_at_k_paper", False))
_TAIL = ("parallel", "format_ok", "tokens", "unscored")


def _heads(k: int | str) -> list[str]:
    metrics = [TaskMetrics.metric_key(name, k) + (" [95% CI]" if ci else "") for name, ci in _METRIC_COLUMNS]
    return ["task", "k", "problems", "samples", *metrics, *_TAIL]


def _with_ci(m: TaskMetrics, name: str) -> str:
    interval = m.interval(name)
    return f"{getattr(m, name):.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def _row(task: str, t: TaskReport, width: int, limited: bool = False) -> list[str]:
    """One table row; an incomplete task shows its partial numbers, marked with ``*``; a task cut
    short by ``--limit`` says so in its problems cell (``4 --limit``)."""
    values = t.metrics_or_partial
    expected = t.part_of.total if t.part_of else t.n_problems_expected  # a shard's slice or a subset: of the whole
    problems = f"{t.n_problems}" if t.complete or expected is None else f"{t.n_problems}/{expected}"
    problems += " --limit" if limited else ""
    name = terminal_text(task)
    cells = [name if t.complete else f"{name}*", str(t.k), problems, str(t.n_samples)]
    if values is None:
        return cells + ["-"] * (width - len(cells))
    tokens = values.mean_response_tokens
    return cells + [
        _with_ci(values, name) if ci else f"{getattr(values, name):.3f}" for name, ci in _METRIC_COLUMNS
    ] + [_ratio(values.parallel_ratio), _ratio(values.format_ok_ratio),
         "-" if tokens is None else str(round(tokens)), str(values.n_unscored)]


def limit_warning_line(limit: int | None) -> str:
    """The warning above the tasks a ``--limit`` run cut short (lm-eval's words)."""
    return f"LIMITED (--limit {limit}, only the first {limit} problem(s) of each task): {LIMIT_WARNING}"


def policy_line(policy: str) -> str:
    """The line above a table that says which answer policy its verdicts were made under."""
    return f"answer policy: {policy} ({POLICY_SUMMARIES.get(policy, 'unknown policy')})"


def _ratio(value: float | None) -> str:
    """A structure ratio; 'n/a' when not measurable (the footer says why)."""
    return "n/a" if value is None else f"{value:.3f}"


def interval_note(n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> str:
    """How the intervals are computed, in the words a table footer prints."""
    return (f"expanded percentile bootstrap over problems (sorted by id), {n_resamples:,} resamples, seed {seed}; "
            "estimand: problems like these (the variance table gives mean@K's interval for these problems)")


def format_report_table(report: RunReport) -> str:
    """A fixed-width summary table (one line per task), then one line per incompleteness.

    Headers name K when every task has the same (``mean@16``), else read ``mean@k`` with k in
    its own column."""
    head = _heads(report.k or "k")
    cut = {line.split(": ", 1)[0] for line in report.limited}
    rows = [head] + [_row(task, t, len(head), task in cut) for task, t in report.tasks.items()]
    lines = [] if report.answer_policy is None else [policy_line(report.answer_policy)]
    lines += fit_columns(rows)
    lines += ["", f"95% CI: {interval_note()}.", f"{report.maj_tie_rule or MAJ_TIE_RULE}."]
    if report.structure_note:
        lines.append(f"parallel, format_ok {report.structure_note}")
    if report.adaptive_note:
        lines.append(report.adaptive_note)
    if report.incomplete:
        lines.append("")
        starred = any(not t.complete for t in report.tasks.values())
        lines.append("INCOMPLETE" + (" — numbers marked * cover only the problems that hold all k samples:" if starred else ":"))
        lines += [f"  {terminal_text(line)}" for line in report.incomplete]
        lines.append(f"  to finish: {terminal_text(report.advice)}")
    if report.limited:
        lines.append("")
        lines.append(limit_warning_line(report.limit))
        lines += [f"  {terminal_text(line)}" for line in report.limited]
    if report.warnings:
        lines.append("")
        lines.append("WARNINGS (named, not counted as incomplete):")
        lines += [f"  {terminal_text(line)}" for line in report.warnings]
    return "\n".join(lines)


def format_forkjoin_table(report: RunReport) -> str | None:
    """Engine calls and critical path per sample of complete tasks, when a run records more than
    one call per sample (fork-join); None otherwise."""
    rows = [(task, t.metrics) for task, t in report.tasks.items()
            if t.metrics is not None and t.metrics.engine_calls_per_sample]
    if not rows or all(m.engine_calls_per_sample == 1 for _, m in rows):
        return None
    lines = [f"{'task':>12}  {'calls/sample':>12}  {'tokens/sample':>13}  {'critical path':>13}"]
    for task, m in rows:
        critical = m.critical_path_tokens_per_sample
        tokens = m.tokens_per_sample
        lines.append(f"{terminal_text(task):>12}  {m.engine_calls_per_sample:>12.2f}  {'-' if tokens is None else round(tokens):>13}  "
                     f"{'-' if critical is None else round(critical):>13}")
    return "\n".join(lines)


#: The terminal width every text table is laid out for (see :func:`fit_columns`).
TERMINAL_WIDTH = 120


def fit_columns(rows: list[list[str]], keys: int = 1, width: int = TERMINAL_WIDTH) -> list[str]:
    """Fixed-width lines of ``rows`` (the first is the header), the first column left-aligned, the
    rest right-aligned; a table wider than ``width`` is cut into tables one under another (a blank
    line between), each repeating the first ``keys`` columns (what names the row).

    Why split and not wrap: a wrapped row scatters its numbers over lines a reader must pair up;
    a split keeps every row on one line under its own header. Why a fixed width rather than the
    terminal's: the same command prints the same lines in a terminal, a pipe, a log and CI, and
    120 columns is what a split editor or a laptop terminal shows; the whole table is in
    ``--json`` / the CSV files. A single column wider than ``width`` stays whole."""
    if not rows:
        return []
    n = len(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(n)]
    keys = min(keys, n)
    base = sum(widths[:keys]) + 2 * keys
    chunks: list[list[int]] = [[]]
    used = base
    for i in range(keys, n):
        if chunks[-1] and used + widths[i] > width:
            chunks.append([])
            used = base
        chunks[-1].append(i)
        used += widths[i] + 2
    lines: list[str] = []
    for chunk in chunks:
        if lines:
            lines.append("")
        shown = [*range(keys), *chunk]
        lines += ["  ".join(row[i].ljust(widths[i]) if i == 0 else row[i].rjust(widths[i]) for i in shown).rstrip()
                  for row in rows]
    return lines


def _columns(rows: list[list[str]]) -> list[str]:
    """Fixed-width lines, the first column left-aligned, fit to :data:`TERMINAL_WIDTH`."""
    return fit_columns(rows)


def format_variance_table(report: RunReport) -> str | None:
    """Var(mean@K) per task split into between-problem and within-problem parts, its standard error, the
    interval for these problems and the required k (:mod:`pr1_eval.stats.variance`); None when no task
    has the split.

    The unbiased between-problem estimate can come out negative (problems that differ less than their
    sampling noise), which would print a negative variance and a within share above 1: shown clipped
    (0 and 1.00) and marked †, with the estimate and the reason under the table, never silently."""
    rows = [["task", "k", "problems", "mean", "se", "95% CI, these problems", "var between", "var within",
             "within share", "required k"]]
    share, notes = None, []
    for task, t in report.tasks.items():
        values = t.metrics_or_partial
        v = None if values is None else values.variance
        if values is None or v is None:
            continue
        share = v.required_k_share
        name = terminal_text(task) + ("" if t.complete else "*")
        clipped = v.between < 0
        if clipped:
            notes.append(f"† {name}: between-problem variance estimated at {v.between:.6f} (< 0): not estimable with "
                         f"{t.n_problems} problems, whose solve rates differ no more than their sampling noise; "
                         "shown as 0, and the within share as 1")
        if v.required_k_reason and (v.required_k == 1 or v.required_k is None):
            notes.append(f"{name}: required k {v.required_k_reason}")
        ci = v.ci95_these_problems
        within_share = "-" if v.within_share is None else ("1.00 †" if clipped else f"{v.within_share:.2f}")
        rows.append([name, str(t.k), str(t.n_problems), f"{values.mean:.3f}", f"{v.se:.4f}",
                     "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
                     "0 †" if clipped else f"{v.between:.6f}", f"{v.within:.6f}", within_share,
                     "-" if v.required_k is None else str(v.required_k)])
    if share is None:
        return None
    return "\n".join(["Variance of mean@K (between: which problems; within: sampling, ∝ 1/k):", *_columns(rows), "",
                      "95% CI, these problems: mean ± 1.96·√(var within), the interval for this benchmark's own "
                      "problems (only the samples random); the table above's CI is for problems like these.",
                      f"required k: smallest k whose within part is at most {share:.0%} of the variance "
                      "(more samples then narrow the interval by at most ~5%); '-': no between-problem spread "
                      "detected.", *notes])


def at_not_given(report: RunReport, ks: tuple[int, ...]) -> dict[str, dict[str, object]]:
    """task → the asked Ks above its samples per problem, and why (``report --at … --json``'s
    ``at_not_given``); tasks that have every asked K are absent."""
    out: dict[str, dict[str, object]] = {}
    for task, t in report.tasks.items():
        above = sorted({k for k in ks if k > t.k})
        if above:
            out[task] = {"K": above, "samples_per_problem": t.k,
                         "reason": f"pass@K, best@K and maj@K need at least K samples per problem; this task holds {t.k}"}
    return out


def format_at_table(report: RunReport, ks: tuple[int, ...]) -> str:
    """pass@K, best@K and maj@K at each asked K (``report --at``), one row per task and K; the Ks a
    task has too few samples for are named below, never dropped silently."""
    rows = [["task", "K", "pass@K [95% CI]", "best@K", "maj@K [95% CI]", "se of mean@K"]]
    skipped = []
    for task, t in report.tasks.items():
        values = t.metrics_or_partial
        name = terminal_text(task) + ("" if t.complete else "*")
        if values is None:
            continue
        for entry in values.at:
            interval = {m: entry.ci95.get(m) for m in ("pass_at_k", "maj_at_k")}
            rows.append([name, str(entry.k), _cell(entry.pass_at_k, interval["pass_at_k"]), f"{entry.best_at_k:.3f}",
                         _cell(entry.maj_at_k, interval["maj_at_k"]),
                         "-" if entry.mean_se is None else f"{entry.mean_se:.4f}"])
        above = sorted({k for k in ks if k > t.k})
        if above:
            skipped.append(f"{name}: K = {', '.join(map(str, above))} above its {t.k} samples per problem")
    lines = ["At K (from the same samples; maj@K: the mean over every K-subset of a problem's samples):",
             *_columns(rows)]
    if skipped:
        lines += ["", "not given (too few samples):", *(f"  {line}" for line in skipped)]
    return "\n".join(lines)


def _cell(value: float, interval: tuple[float, float] | None) -> str:
    return f"{value:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")
