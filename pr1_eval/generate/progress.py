"""Progress of a run, on a terminal and off it.

Why: ``run`` and ``sweep`` used tqdm with ``disable=None``, which switches the bar off when
stderr is not a terminal, so a job-array log showed nothing until the final table, for hours on a
real model; on a terminal the bar moved only when a chunk had been generated, graded *and*
stored, i.e. tens of seconds without movement even on tiny runs.

What is known when (the finest places, from :mod:`pr1_eval.generate.runner` and the decoders):
a sample's text exists when the decoder returns its chunk (the HF and vLLM engines finish a whole
batch in one call, so nothing finer exists below that), and it is safe on disk once the grader
thread has appended it. So :class:`RunProgress` counts both: **generated** (advances the bar the
moment a chunk's samples are decoded, not after grading) and **stored** (shown beside it, and
what a resumed run would keep). Every engine call (a fork-join wave, a batch) is shown too
(``calls`` in the bar), and so is every token step where the engine can tell (HF ``generate``
and the structured decoder report each step's rows): a chunk of minutes shows its tokens and a
token rate, and before the first chunk returns the ETA is bounded by the token budget (``ETA ≤``,
every sample at most ``max_new_tokens``) instead of "unknown". The vLLM engine, whose one call
decodes a whole chunk, tells how many of the call's completions are done
(:meth:`RunProgress.on_call_progress`): the line shows them with the call's own ETA.

Off a terminal there is no bar: a plain line goes to stderr at each chunk's end, but at most
every few seconds, and every :data:`LOG_EVERY_S` seconds while a chunk is in flight (a heartbeat),
with done/total, rate and ETA. ``$PR1_EVAL_PROGRESS_SECONDS`` sets that interval.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from pr1_eval.errors import Pr1EvalError

LOG_EVERY_S = 30.0
"""Seconds between log lines off a terminal (and the longest silence)."""
CHUNK_LINE_MIN_S = 2.0
"""Chunk-end lines closer together than this are folded into the next one (tiny chunks)."""
ENV = "PR1_EVAL_PROGRESS_SECONDS"


def progress_interval() -> float:
    """``$PR1_EVAL_PROGRESS_SECONDS`` (default :data:`LOG_EVERY_S`): a number of seconds above 0,
    at least 0.05 in effect. Anything else (``abc``, ``-1``, ``0``, ``nan``) is refused in one line
    (a run checks it before any model loads, :func:`pr1_eval.generate.plan.plan_inputs`): a value
    set and ignored would leave the user wondering why the interval never changed."""
    text = os.environ.get(ENV)
    if text is None or not text.strip():
        return LOG_EVERY_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise Pr1EvalError(f"{ENV}={text!r}: expected a number of seconds above 0 between progress lines (e.g. 30); "
                           "set it to one, or unset it for the default")
    return max(0.05, value)


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class RunProgress:
    """Samples generated and stored out of ``total`` (see the module docstring).

    ``tty`` decides bar or log lines (default: whether ``stream`` is a terminal); ``clock`` and
    ``every`` are for tests."""

    def __init__(self, total: int, *, desc: str = "samples", stream: IO[str] | None = None, tty: bool | None = None,
                 every: float | None = None, clock: Callable[[], float] = time.monotonic,
                 token_budget: int | None = None, earlier: int = 0) -> None:
        self.total, self.desc = total, desc
        self.earlier = earlier  # samples a resumed run found stored: total, rate and ETA count only what is left
        self.token_budget = token_budget  # samples × max_new_tokens: bounds the ETA before a chunk returns
        self.tokens = self.steps = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.every = progress_interval() if every is None else every
        self.clock = clock
        self.started = clock()
        self.generated = self.stored = self.calls = 0
        self.call_done = self.call_total = 0  # completions of the engine call in flight (vLLM)
        self._call_started = self._last_postfix = self.started
        self._postfix = ""
        self.activity = ""  # what the engine call in flight runs (a fork-join wave), shown until the next
        self._last_line = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.bar: Any = None
        self._thread: threading.Thread | None = None
        if self.tty:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=f"{desc} left" if earlier else desc, unit="sample", file=self.stream, dynamic_ncols=True)
        elif total:
            self.line("resumed" if earlier else "started")
            self._thread = threading.Thread(target=self._heartbeat, name="pr1-progress", daemon=True)
            self._thread.start()

    # ----- what the runner reports ----------------------------------------------------------------
    def on_generated(self, n: int) -> None:
        """``n`` samples were decoded (their chunk came back from the engine)."""
        with self._lock:
            self.generated += n
            self.activity = ""  # the chunk's waves are over: the next chunk's first wave says what runs
        if self.bar is not None:
            self.bar.update(n)
            self._show_postfix()

    def on_stored(self, n: int) -> None:
        """``n`` samples were graded and appended to the run store (a chunk ended)."""
        with self._lock:
            self.stored += n
        if self.bar is not None:
            self._show_postfix()
        elif self.clock() - self._last_line >= min(CHUNK_LINE_MIN_S, self.every) or self.stored >= self.total:
            self.line()

    def on_engine_call(self) -> None:
        """An engine call returned (a batch, a fork-join wave): the work moves inside a chunk."""
        with self._lock:
            self.calls += 1
        if self.bar is not None:
            self._show_postfix()

    def on_decoding_step(self, rows: int) -> None:
        """One token was generated for each of ``rows`` samples (an HF or structured decoding step)."""
        with self._lock:
            self.steps += 1
            self.tokens += rows
        if self.bar is not None and self.steps % 16 == 0:
            self._show_postfix()

    def on_call_progress(self, done: int, total: int) -> None:
        """``done`` of the ``total`` completions of the engine call in flight are finished (vLLM tells
        this as each request finishes; 0 when a call starts)."""
        with self._lock:
            if done == 0 or done < self.call_done:
                self._call_started = self.clock()
            self.call_done, self.call_total = done, total
        if self.bar is not None and (done == total or self.clock() - self._last_postfix >= 0.5):
            self._show_postfix()

    def call_status(self) -> str:
        """``engine call 3: 412/1024 completions done, call ETA 1m10s`` while a call is in flight; ''."""
        if not self.call_total or self.call_done >= self.call_total:
            return ""
        elapsed = self.clock() - self._call_started
        eta = duration((self.call_total - self.call_done) * elapsed / self.call_done) if self.call_done else "unknown"
        return (f"engine call {self.calls + 1}: {self.call_done}/{self.call_total} completions done, "
                f"call ETA {eta}")

    def set_activity(self, text: str) -> None:
        """What the engine call about to start runs (``fork-join wave 5: 2 paths each for …``): shown in
        every line and the bar until the next, so a call of minutes says what it is waiting on."""
        with self._lock:
            self.activity = text
        if self.bar is not None:
            self._show_postfix()

    def set_postfix_str(self, text: str) -> None:
        """Extra status beside the numbers (a Ray pool's live replicas)."""
        self._postfix = text
        if self.bar is not None:
            self._show_postfix()

    # ----- output ---------------------------------------------------------------------------------
    def _show_postfix(self) -> None:
        self._last_postfix = self.clock()
        extra = f", {self._postfix}" if self._postfix else ""
        tokens = f", {self.tokens} tokens" if self.tokens else ""
        call = f", {self.call_status()}" if self.call_status() else ""
        activity = f", {self.activity}" if self.activity else ""
        self.bar.set_postfix_str(f"stored {self.stored}, calls {self.calls}{tokens}{call}{activity}{extra}", refresh=True)

    def status(self) -> str:
        """``120/480 samples (25%) generated, 112 stored, 9 engine calls; 2.10 samples/s, ETA 2m51s, 57s elapsed``."""
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = self.generated / elapsed
        left = self.total - self.generated
        eta = duration(left / rate) if rate > 0 else "unknown"
        token_rate = self.tokens / elapsed
        if rate <= 0 and token_rate > 0 and self.token_budget:  # no chunk back yet: bounded by the budget
            eta = "≤ " + duration(max(self.token_budget - self.tokens, 0) / token_rate)
        share = f"{100 * self.generated / self.total:.0f}%" if self.total else "-"
        extra = f"; {self._postfix}" if self._postfix else ""
        tokens = f", {self.tokens} tokens in {self.steps} decoding steps ({token_rate:.1f} tokens/s)" if self.tokens else ""
        call = f"; {self.call_status()}" if self.call_status() else ""
        call += f"; {self.activity}" if self.activity else ""
        kept = f" this session ({self.earlier} stored before it)" if self.earlier else ""
        return (f"{self.generated}/{self.total} {self.desc} ({share}) generated{kept}, {self.stored} stored, "
                f"{self.calls} engine calls{tokens}{call}; {rate:.2f} {self.desc}/s, ETA {eta}, {duration(elapsed)} "
                f"elapsed{extra}")

    def line(self, note: str = "") -> None:
        """One log line (off a terminal)."""
        with self._lock:
            self._last_line = self.clock()
            text = f"[pr1-eval] {note + ': ' if note else ''}{self.status()}"
        print(text, file=self.stream, flush=True)

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            if self.clock() - self._last_line >= self.every:
                self.line()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar is not None:
            self.bar.close()
        elif self.total and self.stored < self.total:
            self.line("stopped")

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
