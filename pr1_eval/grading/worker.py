"""Both ends of a grading worker process: how the pool starts and stops one, and what it runs
(``python -m pr1_eval.grading._entry FD [--test-hooks] [--no-warm-up]``).

The pool starts workers as fresh interpreters on this module rather than through
``multiprocessing``'s spawn or forkserver, because those re-import the parent's ``__main__``
in every worker: a script without an ``if __name__ == "__main__"`` guard would run again in
each worker, and a trainer's entry script drags its heavy imports into every worker. Here the
worker imports only the grader. ``FD`` is the worker's end of a socket pair, spoken with
``multiprocessing.connection.Connection`` framing.

Protocol: send ``("ready", pid)`` once math-verify is imported and the warm-up (:func:`warm_up`,
unless ``--no-warm-up``) is done; then receive batches, a list of ``(job_id, gold, answer,
timeout_s)``, and send ``(job_id, Verdict)`` after each item, so the
pool knows exactly which item a hang or crash belongs to. ``None`` or EOF ends the loop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from pr1_eval.grading.verify import _parse, inner_timeout, verify_pair

#: One check of each answer form that makes math-verify and sympy load or build something on
#: first use (intervals, unions, sets, tuples, matrices, degrees, percents, text, bases, trig,
#: polynomials): graded once at start-up, so a worker's first real items run at full speed.
WARMUP_PAIRS: tuple[tuple[str, str], ...] = (
    ("\\frac{3}{4}", "0.75"), ("\\dfrac{\\pi}{2}", "\\frac{\\pi}{2}"), ("2\\sqrt{3}", "\\sqrt{12}"),
    ("(1, \\frac{1}{2})", "\\left( 1, 0.5 \\right)"), ("[-2, 7)", "x \\in [-2,7)"),
    ("(-\\infty, 1) \\cup (2, \\infty)", "(-\\infty,1)\\cup(2,\\infty)"), ("\\{1, 2\\}", "\\{2, 1\\}"),
    ("30^\\circ", "30"), ("10\\%", "10"), ("\\text{Monday}", "Monday"), ("x = 5", "5"),
    ("\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", "\\left(\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}\\right)"),
    ("x^2 + 2x + 1", "(x+1)^2"), ("a - b", "{a - b}"), ("\\sin x", "\\cos x"), ("101_{2}", "5"),
    ("3 \\pi", "{3\\pi}"), ("2R^2", "2 R^{2}"), ("1.5", "\\frac{3}{2}"), ("-7", "-7.0"),
)


def start_worker(test_hooks: bool, warm: bool = True) -> tuple[subprocess.Popen[bytes], Connection]:
    """Start a worker on one end of a socket pair; return it and our end of the pair.

    The worker gets this package's root on ``PYTHONPATH`` so it grades with this very code, and
    its own session so a terminal's Ctrl-C goes to the parent alone.
    """
    parent_sock, child_sock = socket.socketpair()
    args = [sys.executable, "-m", "pr1_eval.grading._entry", str(child_sock.fileno())]
    if test_hooks:
        args.append("--test-hooks")
    if not warm:
        args.append("--no-warm-up")
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    try:
        process = subprocess.Popen(
            args, pass_fds=(child_sock.fileno(),), env=env, stdin=subprocess.DEVNULL, start_new_session=True
        )
    finally:
        child_sock.close()
    return process, Connection(parent_sock.detach())


def stop_worker(process: subprocess.Popen[bytes], conn: Connection) -> None:
    """Kill the worker if it still runs, reap it, and close our end of its socket."""
    if process.poll() is None:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5.0)
    with contextlib.suppress(OSError):
        conn.close()


def worker_main(conn: Connection, test_hooks: bool, warm: bool = True) -> None:
    """Serve batches on ``conn`` until told to stop or the parent goes away (``warm``: after :func:`warm_up`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    # math-verify imported before "ready", warm or not: a pool started early (GradingPool.start) pays
    # the import then, not inside its first check (analyze's verdicts waited 0.3-0.8 s on it)
    import math_verify  # noqa: F401
    if warm:
        warm_up()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        _grade_batch(conn, batch, test_hooks)


def warm_up() -> None:
    """Import math-verify and grade :data:`WARMUP_PAIRS` (about a second), then forget those
    parses. Why: each worker otherwise pays those first-use costs inside its first real items,
    once per worker where one process pays them once, which showed as a second of extra
    worker CPU in ``bench/bench_grading.py``; here it is paid before the worker reports ready,
    with every worker starting in parallel."""
    import math_verify  # noqa: F401 - the import itself is most of a cold start

    for gold, answer in WARMUP_PAIRS:
        verify_pair(gold, answer)
    _parse.cache_clear()


def _exit_with_parent(parent_pid: int) -> None:
    """End this worker when its parent is gone, even mid-hang (a worker stuck in an item never
    reads the EOF that the parent's death leaves on the socket)."""
    while os.getppid() == parent_pid:
        time.sleep(2.0)
    os._exit(0)


def _grade_batch(conn: Connection, batch: Sequence[tuple[int, str, str, float]], test_hooks: bool) -> None:
    """Grade one batch, reporting each item as soon as it is done."""
    for job_id, gold, answer, timeout_s in batch:
        verdict = verify_pair(gold, answer, inner_timeout(timeout_s), test_hooks)
        conn.send((job_id, verdict))


def main(argv: Sequence[str]) -> None:
    """Parse ``FD [--test-hooks] [--no-warm-up]`` and serve."""
    fd = int(argv[0])
    worker_main(Connection(fd), test_hooks="--test-hooks" in argv[1:], warm="--no-warm-up" not in argv[1:])
