"""A fake OpenAI-compatible server on 127.0.0.1 (an ephemeral port, a thread) for the openai engine.

It answers ``GET /v1/models`` and ``POST /v1/completions`` the way vLLM's server does
(``choices[].token_ids`` with ``return_token_ids``, ``finish_reason`` ``stop``/``length``,
``stop_reason`` the stop token id or None at EOS, the EOS id kept in ``token_ids``), from a
*responder*: ``responder(body) -> list of token id lists`` (one per choice, the full continuation
the "model" would write, EOS included). The server applies vLLM's stopping to each: cut after the
first id of ``stop_token_ids``, or at ``max_tokens``. ``failures`` holds statuses answered before
real answers (a 503 then success); ``delay_s`` keeps each request in flight so concurrency shows.
Only loopback; every loop in it is bounded by the requests the test sends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], list[list[int]]]


@dataclass
class FakeServer:
    responder: Responder
    eos_id: int
    model_id: str = "served-tiny"
    more_models: tuple[str, ...] = ()
    max_model_len: int | None = 4096
    failures: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    with_token_ids: bool = True
    decode: Callable[[list[int]], str] = lambda ids: " ".join(map(str, ids))
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def models(self) -> dict[str, Any]:
        card: dict[str, Any] = {"id": self.model_id, "object": "model", "root": "/srv/" + self.model_id}
        if self.max_model_len is not None:
            card["max_model_len"] = self.max_model_len
        return {"object": "list", "data": [card, *({"id": m, "object": "model"} for m in self.more_models)]}

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append(body)
            if self.failures:
                status = self.failures.pop(0)
                return status, {"error": {"message": f"scripted {status}", "code": status}}
        stops = set(body.get("stop_token_ids") or [])
        choices = []
        for index, written in enumerate(self.responder(body)):
            kept, finish, reason = [], "length", None
            for token in written[: body["max_tokens"]]:
                kept.append(token)
                if token in stops:
                    finish, reason = "stop", token
                    break
                if token == self.eos_id:
                    finish = "stop"
                    break
            choice: dict[str, Any] = {"index": index, "text": self.decode(kept), "finish_reason": finish,
                                      "stop_reason": reason, "logprobs": None}
            if self.with_token_ids:
                choice["token_ids"] = kept
            choices.append(choice)
        usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": sum(len(c.get("token_ids", [])) for c in choices)}
        return 200, {"id": "cmpl-fake", "object": "text_completion", "model": self.model_id, "choices": choices,
                     "usage": usage}


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            server.headers.append(dict(self.headers))
            if self.path == "/v1/models":
                self._send(200, server.models())
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            server.headers.append(dict(self.headers))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            with server.lock:
                server.in_flight += 1
                server.most_in_flight = max(server.most_in_flight, server.in_flight)
            try:
                time.sleep(server.delay_s)
                self._send(*server.complete(body))
            finally:
                with server.lock:
                    server.in_flight -= 1

    return Handler


@contextmanager
def serving(server: FakeServer) -> Iterator[FakeServer]:
    """Serve ``server`` on 127.0.0.1 at an ephemeral port (``server.url`` is its ``/v1``) until the block ends."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
