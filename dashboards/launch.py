"""Serving the dashboard: check the runs and the port, then run ``dashboards/app.py`` under Streamlit.

Why a subprocess running ``python -m streamlit run`` instead of Streamlit's internal bootstrap:
the command line is Streamlit's public, stable interface, and a child process can be stopped
cleanly on Ctrl-C without Streamlit's signal handlers taking over ``pr1-eval``'s. The app file
is found beside this module, so an installed package works exactly like the checkout.

The child never outlives ``pr1-eval dashboard``: it runs in its own process group, so a
terminal's Ctrl-C reaches only the parent, and the parent forwards SIGINT, SIGTERM and SIGHUP
(as SIGTERM, which Streamlit handles as a clean shutdown) to that group, waits for it, and
insists (SIGTERM, then SIGKILL) when it does not stop. A second signal while stopping kills the
group at once. On Linux the child also asks the kernel to SIGKILL it when its parent dies
(``PR_SET_PDEATHSIG``), which covers a parent killed with SIGKILL; elsewhere that case needs
``kill -- -PID`` of the group. SIGKILL rather than SIGTERM there: nobody is left to wait for a
clean shutdown, Streamlit keeps no state worth flushing, and a Streamlit whose output pipe went
with its parent was seen to survive SIGTERM (its handler fails writing "Stopping...").

Server options, and why: bound to 127.0.0.1 unless ``--host`` says otherwise (responses are
model output, and a run may be private); headless (print the URL, open no browser: this is
often a remote machine reached through a tunnel); no usage statistics (nothing leaves the
machine); no file watcher (runs change, the code does not); XSRF protection stays on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from pr1_eval.errors import Pr1EvalError

#: Streamlit options passed on every start (see the module docstring).
SERVER_OPTIONS: dict[str, str] = {
    "server.headless": "true",
    "browser.gatherUsageStats": "false",
    "server.fileWatcherType": "none",
    "server.runOnSave": "false",
    "server.enableXsrfProtection": "true",
    "client.toolbarMode": "minimal",
    "global.developmentMode": "false",
}
STOP_GRACE_S = 10.0
#: Signals that stop the dashboard, and the signal the Streamlit child gets for each.
FORWARDED: dict[signal.Signals, signal.Signals] = {signal.SIGINT: signal.SIGINT, signal.SIGTERM: signal.SIGTERM,
                                                   signal.SIGHUP: signal.SIGTERM}
_PR_SET_PDEATHSIG = 1


class _StopRequested(Exception):
    """Raised in the main thread by a forwarded signal's handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def app_path() -> Path:
    """The Streamlit script, wherever the package is installed."""
    return Path(__file__).resolve().with_name("app.py")


def streamlit_command(runs: Sequence[str], host: str, port: int, follow: float | None = None) -> list[str]:
    """The ``python -m streamlit run`` command line serving ``runs`` (rescanned every ``follow``
    seconds when given: the app's ``--follow SECONDS``)."""
    options = {**SERVER_OPTIONS, "server.address": host, "server.port": str(port)}
    flags = [f"--{key}={value}" for key, value in options.items()]
    following = [] if follow is None else ["--follow", f"{follow:g}"]
    return [sys.executable, "-m", "streamlit", "run", str(app_path()), *flags, "--", *following, *runs]


def check_port(host: str, port: int) -> None:
    """Fail early, with the fix, when the port cannot be bound (Streamlit's own error is buried)."""
    if not 0 < port < 65536:
        raise Pr1EvalError(f"--port {port}: a port is a number from 1 to 65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Pr1EvalError(f"--host {host!r}: not an address of this machine ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    problem = _bind_problem(family, address)
    if problem is not None:
        free = next((p for p in range(port + 1, min(port + 100, 65536))
                     if _bind_problem(family, (address[0], p, *address[2:])) is None), None)
        suggestion = f", e.g. --port {free} (free now)" if free is not None else ""
        raise Pr1EvalError(f"cannot serve on {host}:{port} ({problem}); pass another --port{suggestion}")


def _bind_problem(family: int, address: tuple) -> str | None:
    """Why ``address`` cannot be bound now, or None; a suggested port is probed the same way (the
    next number was suggested unprobed, and was often in use too: a second dashboard, a notebook)."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return str(exc.strerror)
    return None


def resolve_runs(runs: Sequence[str], follow_dirs: Sequence[str] = ()) -> list[str]:
    """Absolute paths of the given runs or roots; fails when nothing under them is a run, unless
    a followed folder exists (a job that has not written its first step yet)."""
    from analysis.runs.index import discover_runs

    for folder in follow_dirs:
        if not Path(folder).expanduser().is_dir():
            raise Pr1EvalError(f"--follow {folder}: not a folder; create it, or pass the folder the job (or "
                               "`pr1-eval import-verl --follow --out`) writes its runs into")
    if follow_dirs:
        return [str(Path(r).expanduser().resolve()) for r in runs if Path(r).expanduser().exists()]
    found, failures = discover_runs(runs)
    for path, reason in failures:
        print(f"warning: {path}: {reason}", file=sys.stderr)
    if not found:
        raise Pr1EvalError(f"no run found in {', '.join(runs)}; pass run directories or folders holding them, "
                           "e.g. `pr1-eval dashboard pr1-demo` after `pr1-eval demo`")
    return [str(Path(r).expanduser().resolve()) for r in runs if Path(r).expanduser().exists()]


def url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def child_setup() -> Callable[[], None]:
    """The ``preexec_fn`` of the Streamlit child: its own process group, and (Linux) SIGKILL when
    the parent dies. libc is looked up here, before the fork; the child only calls it."""
    parent = os.getpid()
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def setup() -> None:
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return setup


def run_dashboard(runs: Sequence[str], host: str, port: int, follow: float | None = None,
                  follow_dirs: Sequence[str] = ()) -> int:
    """Serve the dashboard until Ctrl-C, SIGTERM or SIGHUP (exit 0) or until Streamlit stops (its
    exit status); with ``follow``, the app rescans its folders every ``follow`` seconds."""
    if follow is not None and not 0 < follow <= 3600:
        raise Pr1EvalError(f"--poll {follow:g}: give the seconds between scans, more than 0 and at most 3600 (e.g. 30)")
    paths = resolve_runs(runs, follow_dirs)
    check_port(host, port)
    command = streamlit_command(paths, host, port, follow)
    process = subprocess.Popen(command, preexec_fn=child_setup())  # noqa: PLW1509
    previous = {signum: signal.signal(signum, _request_stop) for signum in FORWARDED}
    try:
        watching = "" if follow is None else f"; following {', '.join(follow_dirs)} every {follow:g} s"
        print(f"pr1-eval dashboard: {url(host, port)}  (runs from {', '.join(paths)}{watching}; Ctrl-C stops it)",
              flush=True)
        return process.wait()
    except (_StopRequested, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, _StopRequested) else signal.SIGINT
        for forwarded in FORWARDED:
            signal.signal(forwarded, lambda *_: _signal_group(process, signal.SIGKILL))
        stop(process, FORWARDED[signal.Signals(signum)])
        print(f"dashboard stopped ({signal.Signals(signum).name})", file=sys.stderr)
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _request_stop(signum: int, _frame: FrameType | None) -> None:
    raise _StopRequested(signum)


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """``signum`` to the child's process group (Streamlit and anything it started)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)


def stop(process: subprocess.Popen[bytes], signum: int = signal.SIGINT) -> None:
    """Ask Streamlit to shut down (``signum``: SIGINT as a terminal's Ctrl-C, or SIGTERM), wait,
    then insist with SIGTERM and SIGKILL."""
    for attempt in (signum, signal.SIGTERM, signal.SIGKILL):
        _signal_group(process, attempt)
        try:
            process.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()
