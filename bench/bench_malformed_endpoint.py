"""The endpoint engine's cases of ``bench/bench_malformed.py``: ``run --engine openai`` against a
misbehaving server on 127.0.0.1 (findings M3-M6 and M12-M14 of the audit of 2026-12-06).

Why a server of its own: the tests' fake (``tests/support/openai_fake.py``) is pytest's support
code, and a bench must run on a checkout without the tests package. This one is the least that
passes the engine's capability probe as a vLLM-like server (token-id prompts, ids back, ``n``,
``stop_token_ids``, answers that follow the seed) and then misbehaves on the run's own requests:
an endless body, a trickle, fields of the wrong type, fewer choices than ``n``, a redirect, an
error that echoes the API key, a failing ``/models``, a ``max_model_len`` below the prompt.

Bounds: the server is an ``http.server`` in a thread on an ephemeral loopback port, started by a
case's build and shut down by :func:`shut_down` after the case (``bench_malformed.classify``
calls it whatever happened); it answers at most :data:`MAX_REQUESTS` requests (then a 400, which
the engine does not retry), an endless body stops after :data:`ENDLESS_BYTES` (past the engine's
64 MiB bound, and far enough that an engine without one goes over the bench's memory bound: the
engine before its fix peaked at 1.8 GB on it; at 80 MiB it stayed under, a clean JSON error) and a
trickle after :data:`TRICKLE_S` seconds.

Verdicts: ``refuse=True`` cases must end in one ``error:`` line (exit 0 is a silent change); an
accepted case is checked by :func:`stored_right`: the run is stored complete with 2 problems × k 2
samples, none empty, the two samples of a problem different (the server's answers follow the
seed, so a copied sample shows). A key echoed on stderr is a silent change too (M14).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Build = Callable[[Path], tuple[list[str], dict[str, str]]]
Raw = Callable[[BaseHTTPRequestHandler], None]

KEY = "sk-bench-secret-7f3a"
"""The API key every case sends; it must never reach stderr or the run folder."""
MAX_REQUESTS = 300
ENDLESS_BYTES = 160 * 2**20
TRICKLE_S = 30.0
PROBE_USER = "pr1-eval-probe"
EOS = 2  # the tiny model's EOS id (checked against its tokenizer by the control case's success)
_SERVERS: list[tuple[ThreadingHTTPServer, threading.Thread]] = []


class Server:
    """What one case's server does: a vLLM-like answer, then the case's misbehaviour on real requests."""

    def __init__(self, *, models_status: int = 200, max_model_len: object = 4096, raw: Raw | None = None,
                 mangle: Callable[[dict[str, Any]], dict[str, Any]] | None = None, most_choices: int | None = None,
                 failures: int = 0) -> None:
        self.models_status, self.max_model_len, self.raw, self.mangle = models_status, max_model_len, raw, mangle
        self.most_choices, self.failures, self.count = most_choices, failures, 0
        self.lock = threading.Lock()

    def models(self) -> tuple[int, dict[str, Any]]:
        if self.models_status != 200:
            return self.models_status, {"error": {"message": f"models unavailable (key Bearer {KEY})"}}
        return 200, {"object": "list", "data": [{"id": "served-tiny", "object": "model",
                                                 "max_model_len": self.max_model_len}]}

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """vLLM's answer: each choice's ids follow (seed, choice, prompt length), cut at a stop id or EOS."""
        prompt, n = body.get("prompt") or [], int(body.get("n") or 1)
        sampled = float(body.get("temperature", 1.0)) > 0
        seed = int(body.get("seed") or 0) if sampled else 0
        stops = set(body.get("stop_token_ids") or [])
        choices: list[dict[str, Any]] = []
        for j in range(n if sampled else 1):
            written = [20 + (seed * 31 + j * 17 + len(prompt) + k * 7) % 90 for k in range(3)] + [EOS]
            kept: list[int] = []
            finish, reason = "length", None
            for token in written[: int(body.get("max_tokens") or 16)]:
                kept.append(token)
                if token in stops or token == EOS:
                    finish, reason = "stop", (token if token in stops and token != EOS else None)
                    break
            choices.append({"index": j, "text": " ".join(map(str, kept)), "token_ids": kept, "finish_reason": finish,
                            "stop_reason": reason, "logprobs": None})
        if self.most_choices is not None and body.get("user") != PROBE_USER:
            choices = choices[: self.most_choices]
        answer = {"id": "cmpl-bench", "object": "text_completion", "model": "served-tiny", "choices": choices,
                  "usage": {"prompt_tokens": len(prompt), "completion_tokens": sum(len(c["token_ids"]) for c in choices)}}
        if self.mangle is not None and body.get("user") != PROBE_USER:
            answer = self.mangle(answer)
        return 200, answer


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def spent(self) -> bool:
            with server.lock:
                server.count += 1
                over = server.count > MAX_REQUESTS
            if over:
                self.send(400, {"error": {"message": f"the bench server answers at most {MAX_REQUESTS} requests"}})
            return over

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if not self.spent():
                self.send(*server.models()) if self.path == "/v1/models" else self.send(404, {"error": {"message": "no route"}})

        def do_POST(self) -> None:  # noqa: N802
            if self.spent():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            probe = body.get("user") == PROBE_USER
            with server.lock:
                fail, server.failures = server.failures > 0 and not probe, max(0, server.failures - (not probe))
            if fail:
                self.send(503, {"error": {"message": "warming up"}})
            elif server.raw is not None and not probe:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the engine gave up on it: right
                    server.raw(self)
            else:
                self.send(*server.complete(body))

    return Handler


def serve(server: Server) -> str:
    """Start ``server`` on 127.0.0.1 (an ephemeral port) in a thread; its ``/v1`` URL. :func:`shut_down` ends it."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    _SERVERS.append((httpd, thread))
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def shut_down() -> None:
    """Shut down every server a case started (called after each case, whatever it did)."""
    while _SERVERS:
        httpd, thread = _SERVERS.pop()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# ----- misbehaviours ---------------------------------------------------------------------------------
def raw_answer(status: int, body: bytes, headers: dict[str, str] | None = None, trickle_s: float = 0.0) -> Raw:
    """A fixed status and body, sent at once or one byte every ``trickle_s`` (for at most :data:`TRICKLE_S`)."""
    def handle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            handler.send_header(key, value)
        if not trickle_s:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if not trickle_s:
            handler.wfile.write(body)
            return
        started = time.monotonic()
        for i in range(len(body)):
            if time.monotonic() - started > TRICKLE_S:
                return
            handler.wfile.write(body[i:i + 1])
            handler.wfile.flush()
            time.sleep(trickle_s)
    return handle


def endless(handler: BaseHTTPRequestHandler) -> None:
    """A 200 whose body never ends (no length; stops after :data:`ENDLESS_BYTES`, past the engine's bound)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    handler.wfile.write(b'{"choices": [{"index": 0, "text": "')
    for _ in range(ENDLESS_BYTES // 65536):
        handler.wfile.write(b"x" * 65536)


def _choices(*choices: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda answer: {**answer, "choices": list(choices)}


ONE_CHOICE = b'{"choices": [{"index": 0, "text": "x", "token_ids": [30], "finish_reason": "length"}]}'
CASES: dict[str, tuple[Callable[[], Server], bool, list[str]]] = {
    # name: (the server, refused?, extra run options)
    "a well-behaved server (control)": (Server, False, []),
    "a 503 then answers (retried)": (lambda: Server(failures=1), False, []),
    "an endless body": (lambda: Server(raw=endless), True, []),
    "one byte a second (--request-timeout 1)": (lambda: Server(raw=raw_answer(200, ONE_CHOICE * 4, trickle_s=1.0)), True,
                                                ["--request-timeout", "1"]),
    "token ids as strings": (lambda: Server(mangle=_choices(*[{"index": j, "token_ids": ["30"], "text": "30",
                                                                "finish_reason": "length"} for j in range(2)])), True, []),
    "token ids as floats (3.7, true)": (lambda: Server(mangle=_choices(*[{"index": j, "token_ids": [3.7, True], "text": "x",
                                                                          "finish_reason": "length"} for j in range(2)])), True, []),
    "token id past the vocabulary": (lambda: Server(mangle=_choices(*[{"index": j, "token_ids": [10**12], "text": "x",
                                                                       "finish_reason": "length"} for j in range(2)])), True, []),
    "choices not a list": (lambda: Server(mangle=lambda a: {**a, "choices": {"0": a["choices"][0]}}), True, []),
    "choices of strings": (lambda: Server(mangle=_choices("x", "y")), True, []),
    "text a number": (lambda: Server(mangle=_choices(*[{"index": j, "text": 5, "finish_reason": "length"}
                                                       for j in range(2)])), True, []),
    "one choice for n=2 (asked again, never copied)": (lambda: Server(most_choices=1), False, []),
    "no choices for n=2": (lambda: Server(most_choices=0), True, []),
    "a 302 whose body is an answer": (lambda: Server(raw=raw_answer(302, ONE_CHOICE, {"Location": "http://elsewhere/v1"})),
                                      True, []),
    "a 301 to another port": (lambda: Server(raw=raw_answer(301, b"", {"Location": "http://127.0.0.1:9/v1/completions"})),
                              True, []),
    "a 400 echoing the key": (lambda: Server(raw=raw_answer(400, json.dumps({"error": {"message": f"bad key Bearer {KEY}"}})
                                                             .encode())), True, []),
    "a 401 echoing the key": (lambda: Server(raw=raw_answer(401, json.dumps({"detail": f"key {KEY} unknown"}).encode())),
                              True, []),
    "a 500 echoing the key, every try": (lambda: Server(raw=raw_answer(500, json.dumps({"message": f"{KEY} broke"}).encode(),
                                                                        {"Retry-After": "-1"})), True, []),
    "/models answers 500": (lambda: Server(models_status=500), True, []),
    "/models answers 404": (lambda: Server(models_status=404), True, []),
    "max_model_len 5 (below the prompt)": (lambda: Server(max_model_len=5), True, []),
    "max_model_len 'abc'": (lambda: Server(max_model_len="abc"), True, []),
}
#: The fast ones ``--small`` (CI) runs: a control, a wrong type and the failing ``/models``.
SMALL = ("a well-behaved server (control)", "token ids as floats (3.7, true)", "/models answers 500")


def _run(make: Callable[[], Server], extra: list[str]) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        from pr1_eval.inputs.paths import packaged_benchmarks_dir
        from pr1_eval.testing.tiny_model import cached_tiny_model

        url = serve(make())
        return (["run", "--model", str(cached_tiny_model("random")), "--tasks", "gsm8k", "-k", "2", "--limit", "2",
                 "--max-new-tokens", "16", "--temperature", "0.7", "--engine", "openai", "--base-url", url,
                 "--api-key", KEY, "--out", str(folder / "run"), "--seed", "5",
                 "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "0", *extra], {})
    return build


def stored_right(folder: Path) -> str | None:
    """None when the run is stored complete with 2 problems × 2 samples, none empty, none copied; else what is wrong."""
    import pandas as pd

    from pr1_eval.store.run_store import RunStore

    store = RunStore(folder / "run")
    if not store.exists():
        return "exit 0 and no run stored"
    frame: pd.DataFrame = store.read_frame()
    record = json.loads(store.run_json_path.read_text(encoding="utf-8"))
    if KEY in store.run_json_path.read_text(encoding="utf-8"):
        return "the API key is in run.json"
    if len(frame) != 4 or frame["problem_id"].nunique() != 2:
        return f"{len(frame)} samples of {frame['problem_id'].nunique()} problems stored; 2 x 2 meant"
    if (frame["response"].str.len() == 0).any():
        return "an empty sample stored"
    if any(group["response"].nunique() < 2 for _, group in frame.groupby("problem_id")):
        return "a sample copied into both samples of a problem"
    if not record.get("complete", True) or record.get("status") not in (None, "complete"):
        return f"stored as {record.get('status')!r}"
    return None


def endpoint_cases(case: Callable[..., object], small: bool = False) -> list[object]:
    """Every case of this module (``small``: :data:`SMALL` only), built with
    ``case(name, source, build, refuse=..., check=...)``."""
    return [case(f"run --engine openai: {name}", "endpoint engine", _run(make, extra), refuse=refuse,
                 check=None if refuse else stored_right)
            for name, (make, refuse, extra) in CASES.items() if not small or name in SMALL]
