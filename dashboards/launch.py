"""``pr1-eval dashboard``: check the runs and the port, then serve ``dashboards/app.py`` with Streamlit.

Why a subprocess running ``python -m streamlit run`` instead of Streamlit's internal bootstrap:
the command line is Streamlit's public, stable interface, and a child process can be stopped
cleanly on Ctrl-C without Streamlit's signal handlers taking over ``pr1-eval``'s. The app file
is found beside this module, so an installed package works exactly like the checkout.

Server options, and why: bound to 127.0.0.1 unless ``--host`` says otherwise (responses are
model output, and a run may be private); headless (print the URL, open no browser: this is
often a remote machine reached through a tunnel); no usage statistics (nothing leaves the
machine); no file watcher (runs change, the code does not); XSRF protection stays on.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

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


def app_path() -> Path:
    """The Streamlit script, wherever the package is installed."""
    return Path(__file__).resolve().with_name("app.py")


def streamlit_command(runs: Sequence[str], host: str, port: int) -> list[str]:
    """The ``python -m streamlit run`` command line serving ``runs``."""
    options = {**SERVER_OPTIONS, "server.address": host, "server.port": str(port)}
    flags = [f"--{key}={value}" for key, value in options.items()]
    return [sys.executable, "-m", "streamlit", "run", str(app_path()), *flags, "--", *runs]


def check_port(host: str, port: int) -> None:
    """Fail early, with the fix, when the port cannot be bound (Streamlit's own error is buried)."""
    if not 0 < port < 65536:
        raise Pr1EvalError(f"--port {port}: a port is a number from 1 to 65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Pr1EvalError(f"--host {host!r}: not an address of this machine ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise Pr1EvalError(f"cannot serve on {host}:{port} ({exc.strerror}); pass another --port, e.g. "
                               f"--port {port + 1}") from None


def resolve_runs(runs: Sequence[str]) -> list[str]:
    """Absolute paths of the given runs or roots; fails when nothing under them is a run."""
    from analysis.loader import discover_runs

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


def run_dashboard(runs: Sequence[str], host: str, port: int) -> int:
    """Serve the dashboard until Ctrl-C (exit 0) or until Streamlit stops (its exit status)."""
    paths = resolve_runs(runs)
    check_port(host, port)
    process = subprocess.Popen(streamlit_command(paths, host, port))
    print(f"pr1-eval dashboard: {url(host, port)}  (runs from {', '.join(paths)}; Ctrl-C stops it)", flush=True)
    try:
        return process.wait()
    except KeyboardInterrupt:
        stop(process)
        print("dashboard stopped", file=sys.stderr)
        return 0


def stop(process: subprocess.Popen[bytes]) -> None:
    """Ask Streamlit to shut down (SIGINT, as a terminal's Ctrl-C would), then insist."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
