"""``pr1-eval dashboard``: registration, the Streamlit command line it runs (loopback by default,
the app found inside the installed package), its early errors, and a clean stop on Ctrl-C."""

from __future__ import annotations

import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dashboards.app import PAGES
from dashboards.launch import app_path, check_port, resolve_runs, streamlit_command
from pr1_eval.cli.main import build_parser
from pr1_eval.errors import Pr1EvalError
from tests.support.analysis_fixtures import block, make_record, response, write_run
from tests.support.deadlines import scaled


def test_command_defaults_to_loopback_and_runs_folder() -> None:
    args = build_parser().parse_args(["dashboard"])
    assert (args.runs, args.host, args.port) == ([], "127.0.0.1", 8501)
    args = build_parser().parse_args(["dashboard", "a", "b", "--port", "9000", "--host", "0.0.0.0"])
    assert (args.runs, args.host, args.port) == (["a", "b"], "0.0.0.0", 9000)


def test_streamlit_command_binds_the_given_host_and_passes_runs_after_dashes() -> None:
    command = streamlit_command(["/r/one", "/r/two"], "127.0.0.1", 8765)
    assert command[:4] == [sys.executable, "-m", "streamlit", "run"] and command[4] == str(app_path())
    assert "--server.address=127.0.0.1" in command and "--server.port=8765" in command
    assert "--browser.gatherUsageStats=false" in command
    assert command[command.index("--") + 1:] == ["/r/one", "/r/two"]


def test_app_and_pages_ship_inside_the_package() -> None:
    package = importlib.resources.files("dashboards")
    assert Path(str(package / "app.py")) == app_path()
    assert all((package / path).is_file() for path, _, _ in PAGES)
    assert (package / "views" / "__init__.py").is_file()  # a package, so setuptools installs the pages


def test_a_busy_port_is_refused_with_the_fix() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(Pr1EvalError, match="--port"):
            check_port("127.0.0.1", port)


def test_the_suggested_port_is_free() -> None:
    """The port after a busy one is often busy too (a second dashboard): the suggestion is probed."""
    for _ in range(20):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            first.listen()
            second.listen()
            with pytest.raises(Pr1EvalError) as error:
                check_port("127.0.0.1", port)
            suggested = int(str(error.value).split("--port ")[-1].split()[0])
            assert suggested > port + 1 and "(free now)" in str(error.value)
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", suggested))  # really free
            return
    pytest.skip("no two neighbouring free ports on this machine")


def test_no_run_is_refused_before_starting(tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match="no run found"):
        resolve_runs([str(tmp_path)])


@pytest.mark.slow
def test_dashboard_serves_on_loopback_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", "one", [make_record("t", "p0", 0, response("x", block(["a", "b"])), correct=True)])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PR1_LOADER_CACHE": str(tmp_path / "cache")}
    process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", str(tmp_path / "runs"), "--port",
                                str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + scaled(60)
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as answer:
                    assert answer.read() == b"ok"
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "dashboard did not start"
                time.sleep(0.5)
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False)
        if listening.returncode == 0:  # the local address of every listening socket on the port is loopback
            assert {line.split()[3] for line in listening.stdout.splitlines()} == {f"127.0.0.1:{port}"}
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=scaled(30))
    assert process.returncode == 0, output
    assert f"http://127.0.0.1:{port}/" in output and "dashboard stopped" in output


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _start_dashboard(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """``pr1-eval dashboard`` on a free loopback port, once it answers its health check."""
    write_run(tmp_path / "runs", "one", [make_record("t", "p0", 0, response("x", block(["a", "b"])), correct=True)])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PR1_LOADER_CACHE": str(tmp_path / "cache")}
    process = subprocess.Popen([sys.executable, "-m", "pr1_eval.cli.main", "dashboard", str(tmp_path / "runs"), "--port",
                                str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + scaled(90)
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as answer:
                assert answer.read() == b"ok"
                return process, port
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "dashboard did not start"
            time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_killing_the_dashboard_frees_its_port(tmp_path: Path, signum: signal.Signals) -> None:
    """`kill` of the pr1-eval process (or a hang-up, or SIGKILL) stops the Streamlit child too:
    nothing keeps serving on the port."""
    process, port = _start_dashboard(tmp_path)
    try:
        process.send_signal(signum)
        output, _ = process.communicate(timeout=scaled(30))
        deadline = time.monotonic() + 8
        while _port_open(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _port_open(port), f"still serving on {port} after {signum.name} of the parent:\n{output}"
    finally:
        if process.poll() is None:
            process.kill()
    if signum != signal.SIGKILL:
        assert process.returncode == 0 and f"dashboard stopped ({signum.name})" in output, output


def test_follow_passes_its_period_to_the_app_and_serves_an_empty_folder(tmp_path: Path) -> None:
    args = build_parser().parse_args(["dashboard", "--follow", str(tmp_path), "--poll", "5"])
    assert (args.runs, args.follow, args.poll) == ([], [str(tmp_path)], 5.0)
    command = streamlit_command([str(tmp_path)], "127.0.0.1", 8765, follow=5.0)
    assert command[command.index("--") + 1:] == ["--follow", "5", str(tmp_path)]
    assert resolve_runs([str(tmp_path)], follow_dirs=[str(tmp_path)]) == [str(tmp_path.resolve())]  # no run yet: fine
    with pytest.raises(Pr1EvalError, match="--follow .*not a folder"):
        resolve_runs([str(tmp_path / "nowhere")], follow_dirs=[str(tmp_path / "nowhere")])
    from dashboards.data import app_options

    assert app_options(["--follow", "5", "/r/a"]) == (("/r/a",), 5.0)
    assert app_options(["/r/a"]) == (("/r/a",), None)
