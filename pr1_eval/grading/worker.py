"""Both ends of a grading worker process: how the pool starts and stops one, and what it runs
(``python -m pr1_eval.grading._entry FD [--test-hooks]``).

The pool starts workers as fresh interpreters on this module rather than through
``multiprocessing``'s spawn or forkserver, because those re-import the parent's ``__main__``
in every worker: a script without an ``if __name__ == "__main__"`` guard would run again in
each worker, and a trainer's entry script drags its heavy imports into every worker. Here the
worker imports only the grader. ``FD`` is the worker's end of a socket pair, spoken with
``multiprocessing.connection.Connection`` framing.

Protocol: send ``("ready", pid)`` once imports are done; then receive batches, a list of
``(job_id, gold, answer, timeout_s)``, and send ``(job_id, Verdict)`` after each item, so the
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

from pr1_eval.grading.verify import inner_timeout, verify_pair


def start_worker(test_hooks: bool) -> tuple[subprocess.Popen[bytes], Connection]:
    """Start a worker on one end of a socket pair; return it and our end of the pair.

    The worker gets this package's root on ``PYTHONPATH`` so it grades with this very code, and
    its own session so a terminal's Ctrl-C goes to the parent alone.
    """
    parent_sock, child_sock = socket.socketpair()
    args = [sys.executable, "-m", "pr1_eval.grading._entry", str(child_sock.fileno())]
    if test_hooks:
        args.append("--test-hooks")
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


def worker_main(conn: Connection, test_hooks: bool) -> None:
    """Serve batches on ``conn`` until told to stop or the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    import math_verify  # noqa: F401 - pay the import before reporting ready

    conn.send(("ready", os.getpid()))
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        _grade_batch(conn, batch, test_hooks)


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
    """Parse ``FD [--test-hooks]`` and serve."""
    fd = int(argv[0])
    worker_main(Connection(fd), test_hooks="--test-hooks" in argv[1:])
