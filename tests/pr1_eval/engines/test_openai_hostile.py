"""The endpoint engine against a misbehaving server on 127.0.0.1 (findings M5, M6, M12, M13 and M14
of the 2026-12-06 reliability audit): an endless body, a trickle, malformed fields, a redirect, a
key echoed in an error. Each ends in one line naming the server's fault, within a bound, with no
sample made up and no key printed."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.openai_engine import OpenAIEngine
from pr1_eval.errors import Pr1EvalError
from tests.support.openai_fake import FakeServer, serving

pytestmark = pytest.mark.usefixtures("quick_backoff")


def _ask(engine: OpenAIEngine, n: int = 2) -> list[list[Any]]:
    return engine.generate([GenerationRequest("r", [5, 6], n=n, seed=1)], SamplingConfig(temperature=0.7))


def _choices(*choices: Any) -> Any:
    return lambda answer: {**answer, "choices": list(choices)}


@pytest.mark.parametrize(("choices", "says"), [
    ((["x"]), r"choices\[0\] is 'x', not an object"),
    (({"index": "a", "text": "t"},), r"choices\[0\]\.index is 'a', not an integer"),
    (({"index": float("nan"), "text": "t"},), r"choices\[0\]\.index is 'nan', not an integer"),
    (({"index": 0, "token_ids": ["abc"]},), r"choices\[0\]\.token_ids\[0\] is 'abc', not a token id"),
    (({"index": 0, "token_ids": [-5]},), r"choices\[0\]\.token_ids\[0\] is '-5', not a token id \(an integer from 0 to 799\)"),
    (({"index": 0, "token_ids": [10**12]},), r"choices\[0\]\.token_ids\[0\] is '1000000000000', not a token id"),
    (({"index": 0, "token_ids": [3.7, True]},), r"choices\[0\]\.token_ids\[0\] is '3.7', not a token id"),  # M13: never cut to 3
    (({"index": 0, "token_ids": [30, True]},), r"choices\[0\]\.token_ids\[1\] is 'True', not a token id"),
    (({"index": 0, "text": 5},), r"choices\[0\]\.text is '5', not a string"),
])
def test_malformed_fields_are_one_line_never_a_traceback_or_a_coercion(model: Path, tok: Any, choices: Any,
                                                                        says: str) -> None:
    """M12/M13: each of these was an AttributeError, ValueError or OverflowError, or (3.7, true) ids
    silently cut to [3, 1]."""
    fake = FakeServer(lambda body: [[30, tok.eos_token_id]] * body["n"], tok.eos_token_id, mangle=_choices(*choices))
    with (serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine,
          pytest.raises(Pr1EvalError, match=f"answered a malformed completion: {says}") as info):
        _ask(engine)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("value", "says"), [("abc", "'abc'"), (-3, "'-3'"), (True, "'True'")])
def test_a_malformed_model_length_is_one_line(model: Path, tok: Any, value: Any, says: str) -> None:
    fake = FakeServer(lambda body: [[30]], tok.eos_token_id, max_model_len=value)
    with serving(fake), pytest.raises(Pr1EvalError, match=f"gives max_model_len {says}, not a positive number"):
        OpenAIEngine(str(model), base_url=fake.url)


def _raw(status: int, body: bytes, headers: dict[str, str] | None = None, trickle_s: float = 0.0) -> Any:
    def handle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            handler.send_header(key, value)
        if not trickle_s:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            for i in range(len(body)):
                handler.wfile.write(body[i:i + 1])
                handler.wfile.flush()
                time.sleep(trickle_s)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return handle


def test_a_redirect_is_an_error_not_an_answer(model: Path, tok: Any) -> None:
    """M13: a 302 whose body is JSON choices was stored as the answer (every status below 400 was success)."""
    body = b'{"choices": [{"index": 0, "text": "x", "token_ids": [30], "finish_reason": "length"}]}'
    fake = FakeServer(lambda b: [[30]], tok.eos_token_id, raw=_raw(302, body, {"Location": "http://elsewhere/v1"}))
    with (serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine,
          pytest.raises(Pr1EvalError, match=r"answered 302 Found \(a redirect, not followed")):
        _ask(engine)


def test_a_negative_retry_after_is_ignored(model: Path, tok: Any) -> None:
    """M12: ``Retry-After: -1`` was ``ValueError: sleep length must be non-negative``."""
    fake = FakeServer(lambda b: [[30]], tok.eos_token_id, raw=_raw(503, b'{"message": "busy"}', {"Retry-After": "-1"}))
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        engine.client.max_retries = 1
        with pytest.raises(Pr1EvalError, match=r"failed 2 tries \(last: 503 Service Unavailable: busy\)"):
            _ask(engine)


def test_an_endless_body_is_cut_at_the_bound(model: Path, tok: Any) -> None:
    """M5: an endless body took 6 GB then a MemoryError; 50 MB answers aborted the process."""
    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        try:
            handler.wfile.write(b'{"choices": [{"text": "')
            for _ in range(10_000):  # bounded here: 640 MB, far past the engine's bound
                handler.wfile.write(b"x" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass

    fake = FakeServer(lambda b: [[30]], tok.eos_token_id, raw=endless)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        engine.client.max_body_bytes = 2 * 2**20
        started = time.monotonic()
        with pytest.raises(Pr1EvalError, match=r"sent an answer over 2 MiB .*misbehaving"):
            _ask(engine)
    assert time.monotonic() - started < 20


def test_the_request_timeout_bounds_the_whole_request_not_the_gap_between_reads(model: Path, tok: Any) -> None:
    """M6: a server sending one byte a second never timed out (httpx's timeout is per read)."""
    body = b'{"choices": [{"index": 0, "text": "x", "finish_reason": "length"}]}'
    fake = FakeServer(lambda b: [[30]], tok.eos_token_id, raw=_raw(200, body, trickle_s=0.1))
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url, request_timeout=0.8) as engine:
        engine.client.max_retries = 1
        started = time.monotonic()
        with pytest.raises(Pr1EvalError, match=r"failed 2 tries \(last: no complete answer within --request-timeout "
                                               r"0.8 s\)"):
            _ask(engine)
    assert time.monotonic() - started < 5  # two tries of 0.8 s (+ a read), not 7 s of trickle each


def test_a_server_message_that_echoes_the_key_never_prints_it(model: Path, tok: Any) -> None:
    """M14: a 400 echoing the Authorization header printed the key on stderr."""
    fake = FakeServer(lambda b: [[30]], tok.eos_token_id,
                      raw=_raw(400, b'{"error": {"message": "bad key Bearer sk-top-secret-1"}}'))
    with (serving(fake), OpenAIEngine(str(model), base_url=fake.url, api_key="sk-top-secret-1") as engine,
          pytest.raises(Pr1EvalError) as info):
        _ask(engine)
    assert "sk-top-secret-1" not in str(info.value) and "bad key Bearer <redacted>" in str(info.value)
