"""A fake OpenAI-compatible server on 127.0.0.1 (an ephemeral port, a thread) for the openai engine.

It answers ``GET /v1/models`` and ``POST /v1/completions`` the way vLLM's server does
(``choices[].token_ids`` with ``return_token_ids``, ``finish_reason`` ``stop``/``length``,
``stop_reason`` the stop token id or None at EOS, the EOS id kept in ``token_ids``), from a
*responder*: ``responder(body) -> list of token id lists`` (one per choice, the full continuation
the "model" would write, EOS included). The server applies vLLM's stopping to each: cut after the
first id of ``stop_token_ids``, or at ``max_tokens``. ``failures`` holds statuses answered before
real answers (a 503 then success); ``delay_s`` keeps each request in flight so concurrency shows, and
``gather`` holds requests until that many are in flight at once (a concurrency test that does not
depend on the machine's speed).
Only loopback; every loop in it is bounded by the requests the test sends.

Real servers differ from vLLM (``docs/usage/run.md#which-servers-work``), and a fake that behaves
only like vLLM let a silent duplicate through; the switches below give the other classes:
``token_prompts=False`` (strings only, 400 on a list), ``strict_fields=True`` (422 on any field
outside OpenAI's, as ``transformers serve``), ``honours_n=False`` (one choice whatever ``n``),
``with_token_ids=False`` (text only), ``honours_stop_ids=False`` (``stop_token_ids`` ignored, as
llama.cpp), ``stop_strings`` ``kept``/``trimmed``/``ignored``, ``reports_stop=False`` (no
``stop_reason``), ``hidden_ids`` (special tokens left out of the text), ``logit_bias=False``,
``samples=False`` (the answer does not depend on the seed; when True, sampled probes answer by seed);
:data:`TRANSFORMERS_SERVE_LIKE` and :data:`LLAMA_CPP_LIKE` set them as those servers do. Probe
requests (``user: pr1-eval-probe``) are answered the same way but kept in ``probes``, out of
``requests``, and never consume ``failures``; ``mangle`` rewrites the answers to real requests and
``raw`` replaces their handling entirely (a trickle, an endless body).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pr1_eval.engines.openai_probe import PROBE_USER

Responder = Callable[[dict[str, Any]], list[list[int]]]
OPENAI_FIELDS = frozenset({
    "model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n",
    "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix", "temperature", "top_p", "user",
    "generation_config",
})
"""What ``transformers serve`` 5.10 takes (``CompletionCreateParamsBase`` plus its own three); 422 otherwise."""
TRANSFORMERS_SERVE_LIKE: dict[str, Any] = {
    "token_prompts": False, "strict_fields": True, "honours_n": False, "with_token_ids": False,
    "honours_stop_ids": False, "stop_strings": "kept", "reports_stop": False, "logit_bias": False,
}
"""``transformers serve`` 5.10.4 (``cli/serving/completion.py``, ``utils.py``); add ``hidden_ids`` for
the special tokens it drops from its text (``skip_special_tokens=True``)."""
LLAMA_CPP_LIKE: dict[str, Any] = {
    "with_token_ids": False, "honours_stop_ids": False, "stop_strings": "trimmed", "reports_stop": False,
}
"""llama.cpp's ``llama-server`` ``/v1/completions`` (token prompts, ``n``, ``logit_bias``; no ids back,
unknown fields ignored, stop strings trimmed and unreported); ``hidden_ids`` without ``--special``."""


@dataclass
class FakeServer:
    responder: Responder
    eos_id: int
    model_id: str = "served-tiny"
    more_models: tuple[str, ...] = ()
    max_model_len: int | None = 4096
    failures: list[int] = field(default_factory=list)
    models_failures: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    with_token_ids: bool = True
    decode: Callable[[list[int]], str] = lambda ids: " ".join(map(str, ids))
    encode: Callable[[str], list[int]] | None = None
    token_prompts: bool = True
    strict_fields: bool = False
    honours_n: bool = True
    honours_stop_ids: bool = True
    stop_strings: str = "kept"
    reports_stop: bool = True
    hidden_ids: frozenset[int] = frozenset()
    logit_bias: bool = True
    samples: bool = True
    mangle: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    raw: Callable[[BaseHTTPRequestHandler], None] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    #: Hold each completion until this many have been in flight at once (0: never hold), or until
    #: ``gather_timeout_s`` passes. Why: "the client keeps N requests in flight" read from a fixed delay
    #: depends on the machine's speed (a run kept 10 in flight, but under CI's load the first reply of a
    #: 0.3 s delay went out before the tenth request came, and 9 were counted); held until N arrive, a
    #: client that sends N together reaches N on any machine, and one that sends fewer shows its bound.
    gather: int = 0
    gather_timeout_s: float = 30.0
    gathered: threading.Condition = field(default_factory=threading.Condition)

    def wait_for_gather(self) -> None:
        """Block this request until :attr:`gather` requests have been in flight at once (or the timeout)."""
        if not self.gather:
            return
        with self.gathered:
            self.gathered.notify_all()
            self.gathered.wait_for(lambda: self.most_in_flight >= self.gather, timeout=self.gather_timeout_s)

    def models(self) -> dict[str, Any]:
        card: dict[str, Any] = {"id": self.model_id, "object": "model", "root": "/srv/" + self.model_id}
        if self.max_model_len is not None:
            card["max_model_len"] = self.max_model_len
        return {"object": "list", "data": [card, *({"id": m, "object": "model"} for m in self.more_models)]}

    def refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The 4xx a server of this class answers to ``body``, if any."""
        unexpected = set(body) - OPENAI_FIELDS
        if self.strict_fields and unexpected:
            return 422, {"detail": f"Unexpected fields in the request: {unexpected}"}
        if not self.token_prompts and not isinstance(body.get("prompt"), str):
            return 400, {"detail": "prompt must be a string."}
        return None

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        probe = body.get("user") == PROBE_USER
        with self.lock:
            (self.probes if probe else self.requests).append(body)
            if self.failures and not probe:
                status = self.failures.pop(0)
                return status, {"error": {"message": f"scripted {status}", "code": status}}
        refused = self.refusal(body)
        if refused is not None:
            return refused
        if isinstance(body["prompt"], str):
            assert self.encode is not None, "a text prompt needs FakeServer(encode=...)"
            body = {**body, "prompt": self.encode(body["prompt"])}
        written_all = self.responder(body)
        if probe and self.samples and body.get("temperature", 1.0) > 0:  # a sampling server: the seed shows
            seed = int(body.get("seed") or 0)
            written_all = [[20 + (seed + j) % 90, 20 + (seed * 7 + j) % 90] for j in range(body.get("n", 1))]
        if body.get("logit_bias") and self.logit_bias:
            forced = int(max(body["logit_bias"], key=lambda k: body["logit_bias"][k]))
            written_all = [[forced] for _ in range(body.get("n", 1))]
        choices = [self._choice(index, written, body)
                   for index, written in enumerate(written_all if self.honours_n else written_all[:1])]
        usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": sum(c.pop("_count") for c in choices)}
        answer = {"id": "cmpl-fake", "object": "text_completion", "model": self.model_id, "choices": choices,
                  "usage": usage}
        return 200, (self.mangle(answer) if self.mangle is not None and not probe else answer)

    def _choice(self, index: int, written: list[int], body: dict[str, Any]) -> dict[str, Any]:
        stops = set(body.get("stop_token_ids") or []) if self.honours_stop_ids else set()
        strings = [] if self.stop_strings == "ignored" else list(body.get("stop") or [])
        kept: list[int] = []
        finish, reason, cut = "length", None, None
        for token in written[: body["max_tokens"]]:
            kept.append(token)
            if token in stops:
                finish, reason = "stop", token
                break
            if token == self.eos_id:
                finish = "stop"
                break
            shown = self.decode([t for t in kept if t not in self.hidden_ids])
            hit = next((s for s in strings if s in shown), None)
            if hit is not None:
                finish, reason = "stop", hit
                cut = shown.index(hit) + (len(hit) if self.stop_strings == "kept" else 0)
                break
        text = self.decode([t for t in kept if t not in self.hidden_ids])
        text = text if cut is None else text[:cut]
        choice: dict[str, Any] = {"index": index, "text": text, "finish_reason": finish,
                                  "stop_reason": reason if self.reports_stop else None, "logprobs": None,
                                  "_count": len(kept)}
        if self.with_token_ids:
            choice["token_ids"] = kept
        return choice


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
            if self.path == "/v1/models" and server.models_failures:
                status = server.models_failures.pop(0)
                self._send(status, {"error": {"message": f"scripted {status}"}})
            elif self.path == "/v1/models":
                self._send(200, server.models())
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            server.headers.append(dict(self.headers))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if server.raw is not None and body.get("user") != PROBE_USER:
                server.requests.append(body)
                server.raw(self)
                return
            if self.path != "/v1/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if body.get("user") == PROBE_USER:  # the engine's start-up probe: neither held nor counted
                self._send(*server.complete(body))  # (held, each probe waited out the gather timeout: 157 s)
                return
            with server.lock:
                server.in_flight += 1
                server.most_in_flight = max(server.most_in_flight, server.in_flight)
            try:
                server.wait_for_gather()
                time.sleep(server.delay_s)
                answer = server.complete(body)
            finally:
                # Done before the reply goes out: once a client reads its reply it may send its next
                # request, which a count lowered after the send would see beside this finished one (a
                # bound of 3 read as 4 once in a CI run).
                with server.lock:
                    server.in_flight -= 1
            self._send(*answer)

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


def plain_tags_copy(model: Path, dest: Path) -> Path:
    """A copy of ``model`` whose tokenizer marks the six tags non-special (same ids, same text): what
    a server that decodes with ``skip_special_tokens=True`` (transformers serve, llama.cpp without
    ``--special``) then keeps in its text. The way the docs tell users to serve through such a server."""
    import json
    import shutil

    from pr1_eval.protocol.tags import ALL_TAGS

    shutil.copytree(model, dest)
    tokenizer = json.loads((dest / "tokenizer.json").read_text())
    for token in tokenizer["added_tokens"]:
        if token["content"] in ALL_TAGS:
            token["special"] = False
    (dest / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((dest / "tokenizer_config.json").read_text())
    config["extra_special_tokens"] = [t for t in config.get("extra_special_tokens", []) if t not in ALL_TAGS]
    (dest / "tokenizer_config.json").write_text(json.dumps(config))
    return dest
