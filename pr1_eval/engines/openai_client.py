"""HTTP to an OpenAI-compatible server (``vllm serve``, SGLang, a router in front of many): JSON
in, JSON out, with retries, and every failure a one-line :class:`~pr1_eval.errors.Pr1EvalError`.

Why its own module: the engine (:mod:`pr1_eval.engines.openai_engine`) is about tokens and the
protocol; what can go wrong on the wire (a server still loading, a replica restarting behind a
router, a 429 from a saturated one, a key refused) is handled here once.

Retries: a connection error, a timeout, 429 and any 5xx are retried with exponential backoff
(:data:`BACKOFF_S` doubling to :data:`BACKOFF_CAP_S`, or the server's ``Retry-After`` when it sends
one, capped the same), at most ``max_retries`` times; a 4xx other than 429 is the request's fault
and is never retried: it ends the run with the server's own message and a fix. The one exception is
the first contact (``GET /models``): a refused connection there means no server at that address,
so it fails at once instead of waiting out the backoff.

Bounds (so a misbehaving server cannot hang or exhaust the run): the body is read as a stream
and refused past :data:`MAX_BODY_BYTES`; ``timeout_s`` bounds the whole request (checked after every
chunk read; a server silent at the deadline is cut when its silence reaches ``timeout_s``), not
only the gap between two reads, so a server trickling a byte a second cannot hold a request
forever; a redirect (3xx) is an error, never an answer (not followed: the key would go along).

Secrets: the API key goes only into the ``Authorization`` header. :func:`public_url` (what
``run.json`` records), :func:`public_options` and :func:`public_argv` drop it, and a user or
password written into the URL, from everything written to disk; a server message that echoes the
key has it replaced by ``<redacted>`` before it is shown.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pr1_eval.errors import Pr1EvalError

BACKOFF_S = 0.5
"""First wait before a retry; doubles each time (tests set it small)."""
BACKOFF_CAP_S = 30.0
"""Longest wait between two tries."""
MAX_RETRIES = 6
"""Retries of one request (7 tries, about a minute of waiting) before the run stops with an error."""
REQUEST_TIMEOUT_S = 1800.0
"""Seconds one completions request may take: 3,000 tokens × n = 16 on a loaded server is minutes."""
CONNECT_TIMEOUT_S = 10.0
MAX_BODY_BYTES = 64 * 2**20
"""Largest answer read (64 MiB): 16 choices of 32k tokens with ids and text are about 6 MB; a body
past this is a server fault (an endless stream), refused before it takes the machine's memory."""
FIRST_CONTACT_RETRIES = 1
"""``GET /models`` failing with 5xx is retried once: at first contact it means "not this kind of
server" far more often than "busy", and six backoffs cost half a minute for nothing."""
REDACTED = "<redacted>"
SECRET_OPTIONS = frozenset({"api_key"})
SECRET_FLAGS = ("--api-key",)


def normalise_base_url(url: str) -> str:
    """``http://host:port`` or ``…/v1`` (a trailing slash dropped); a bare host gets ``/v1``, the
    prefix every OpenAI-compatible server uses. Refuses what is not an http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Pr1EvalError(f"--base-url {public_url(url)!r} is not an http(s) URL; pass e.g. http://127.0.0.1:8000/v1")
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def public_url(url: str) -> str:
    """``url`` without a user, password, query or fragment: what may be written to ``run.json``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def public_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Engine options as ``run.json`` records them: the key redacted, the URL public."""
    out = {k: (REDACTED if k in SECRET_OPTIONS else v) for k, v in options.items()}
    if isinstance(out.get("base_url"), str):
        out["base_url"] = public_url(out["base_url"])
    return out


def public_argv(argv: Sequence[str]) -> list[str]:
    """The command line with the value of ``--api-key`` redacted, and any URL made public."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif any(arg.startswith(flag + "=") for flag in SECRET_FLAGS):
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        elif arg.startswith(("http://", "https://", "--base-url=")):
            head, _, url = arg.rpartition("=") if arg.startswith("--base-url=") else ("", "", arg)
            out.append((head + "=" if head else "") + public_url(url))
        else:
            out.append(arg)
    return out



class ServerRefused(Pr1EvalError):
    """A 4xx (not 429) answer: the request's fault, never retried. ``status`` and ``message`` (the
    server's own words, key redacted) let the capability probe read a refusal instead of failing."""

    def __init__(self, text: str, status: int, message: str) -> None:
        super().__init__(text)
        self.status = status
        self.message = message


class _TooSlow(Exception):
    """The whole-request deadline passed while the body was still arriving."""


def _retry_after(response: httpx.Response) -> float | None:
    """The server's ``Retry-After`` in seconds, when it is a finite number ≥ 0 (else ignored)."""
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _server_message(status: int, reason: str, data: bytes) -> str:
    """The server's own reason: OpenAI's ``{"error": {"message"}}``, vLLM's ``{"message"}``, FastAPI's
    ``{"detail"}``, or the text; at most 300 characters, on one line."""
    text = data.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        message = text.strip()[:300] or reason
    else:
        message = str(body)[:300]
        if isinstance(body, dict):
            error = body.get("error")
            found = error.get("message") if isinstance(error, dict) else error or body.get("message") or body.get("detail")
            if found:
                message = str(found)[:300]
    return " ".join(message.split()) or f"{status}"


def _fix_for(status: int) -> str:
    if status in (401, 403):
        return "set OPENAI_API_KEY (or --api-key) to a key the server accepts"
    if status == 404:
        return "check --base-url (it should end in /v1) and --served-model (GET /v1/models lists what it serves)"
    return ("the server said why above; check the sampling options (--temperature, --top-p, --top-k, --max-new-tokens) "
            "and --served-model")


class OpenAIClient:
    """A pooled HTTP client for one server (thread-safe: the engine's threads share it)."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = REQUEST_TIMEOUT_S,
                 max_retries: int = MAX_RETRIES, max_connections: int = 64) -> None:
        self.base_url = normalise_base_url(base_url)
        self.public_base_url = public_url(self.base_url)
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.max_body_bytes = MAX_BODY_BYTES
        self._secret = api_key or None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``<redacted>`` (a server may echo it in an error)."""
        return text.replace(self._secret, REDACTED) if self._secret else text

    def get(self, path: str) -> Any:
        """``GET base_url + path`` (the first contact: a refused connection fails at once, a 5xx is
        retried :data:`FIRST_CONTACT_RETRIES` time)."""
        return self._call("GET", path, None, first_contact=True)

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        """``POST base_url + path`` with a JSON body, retried as the module docstring says."""
        return self._call("POST", path, body, first_contact=False)

    def _read(self, method: str, path: str, body: Mapping[str, Any] | None) -> tuple[int, str, bytes, float | None]:
        """One try: status, reason, the body (read under the size bound and the whole-request deadline)
        and the server's ``Retry-After``."""
        deadline = time.monotonic() + self.timeout_s
        with self._http.stream(method, self.base_url + path, json=body) as response:
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise Pr1EvalError(
                        f"{self.public_base_url}{path} sent an answer over {self.max_body_bytes // 2**20} MiB "
                        f"(status {response.status_code}); a completions answer is far smaller: the server is "
                        "misbehaving (an endless body?); restart it, or check what --base-url points at")
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _TooSlow()
            return response.status_code, response.reason_phrase, b"".join(chunks), _retry_after(response)

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None, *, first_contact: bool) -> Any:
        where = f"{self.public_base_url}{path}"
        last = ""
        tries = min(self.max_retries, FIRST_CONTACT_RETRIES) if first_contact else self.max_retries
        for attempt in range(tries + 1):
            wait: float | None = None
            try:
                status, reason, data, retry_after = self._read(method, path, body)
            except httpx.ConnectError as exc:
                if first_contact:
                    raise Pr1EvalError(
                        f"cannot reach an OpenAI-compatible server at {self.public_base_url} ({type(exc).__name__}: "
                        f"{self.redact(str(exc))}); start one (e.g. vllm serve MODEL --port 8000) or fix --base-url"
                    ) from None
                last = f"{type(exc).__name__}: {self.redact(str(exc))}"
            except _TooSlow:
                last = f"no complete answer within --request-timeout {self.timeout_s:g} s"
            except httpx.TransportError as exc:  # timeouts, a connection dropped mid-answer
                last = f"{type(exc).__name__}: {self.redact(str(exc)) or 'no detail'}"
            else:
                if 300 <= status < 400:
                    raise Pr1EvalError(f"{where} answered {status} {reason} (a redirect, not followed: the key would "
                                       "go along); point --base-url at the address the server answers on")
                if status < 300:
                    return self._json(where, status, data)
                message = self.redact(_server_message(status, reason, data))
                last = f"{status} {reason}: {message}"
                if status != 429 and status < 500:
                    raise ServerRefused(f"the server at {where} refused the request ({last}); {_fix_for(status)}",
                                        status, message)
                wait = retry_after
            if attempt < tries:
                time.sleep(min(BACKOFF_CAP_S, wait if wait is not None else BACKOFF_S * 2**attempt))
        raise Pr1EvalError(f"the server at {where} failed {tries + 1} tries (last: {last}); check that it "
                           "is up and healthy (curl its /models), or lower --max-concurrency; rerun the same command to "
                           "resume")

    def _json(self, where: str, status: int, data: bytes) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            shown = self.redact(data[:120].decode("utf-8", "replace"))
            raise Pr1EvalError(f"{where} answered {status} with no JSON ({shown!r}); is --base-url an "
                               "OpenAI-compatible API?") from None
