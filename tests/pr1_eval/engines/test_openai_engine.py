"""The openai engine against a fake OpenAI-compatible server on 127.0.0.1: the requests it sends,
how it reads the answers (stops, EOS, greedy, the model length, a server without token ids), the
concurrency bound, retries and the one-line errors. End to end through ``pr1-eval run``:
``test_openai_cli.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pr1_eval.engines import openai_client
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.factory import make_engine
from pr1_eval.engines.openai_client import public_argv, public_options, public_url
from pr1_eval.engines.openai_engine import OpenAIEngine, pick_served_model
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.tags import resolve_tag_ids
from tests.support.openai_fake import FakeServer, free_port, serving

pytestmark = pytest.mark.usefixtures("quick_backoff")


def _words(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def test_a_request_keeps_tags_asks_for_ids_and_reads_stops_and_eos(model: Path, tok: Any) -> None:
    tags = resolve_tag_ids(tok)
    body_words = _words(tok, "two ways")
    written = [*body_words, tags[T.PATH_CLOSE], *_words(tok, "more"), tok.eos_token_id]
    fake = FakeServer(lambda body: [list(written) for _ in range(body["n"])], tok.eos_token_id)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        stop_req = GenerationRequest("p0", [5, 6, 7], n=2, max_new_tokens=50, stop_token_ids=(tags[T.PATH_CLOSE],),
                                     seed=11, temperature=1.0)
        eos_req = GenerationRequest("p1", [5, 6], n=1, max_new_tokens=50, seed=12)
        cut_req = GenerationRequest("p2", [5], n=1, max_new_tokens=2, seed=13)
        stopped, ended, cut = engine.generate([stop_req, eos_req, cut_req], SamplingConfig(temperature=0.6, top_p=0.9))
    assert [c.token_ids for c in stopped] == [[*body_words, tags[T.PATH_CLOSE]]] * 2  # the stop id kept
    assert {c.finish_reason for c in stopped} == {"stop"} and stopped[0].stop_token_id == tags[T.PATH_CLOSE]
    assert stopped[0].text == "two ways</Path>"  # tags survive, decoded by the run's tokenizer
    assert ended[0].finish_reason == "eos" and ended[0].token_ids == written[:-1]  # EOS removed, as every engine does
    assert cut[0].finish_reason == "length" and cut[0].token_ids == written[:2]
    sent = {b["prompt"][-1]: b for b in fake.requests}
    first = sent[7]
    assert first["model"] == "served-tiny" and first["prompt"] == [5, 6, 7] and first["n"] == 2
    assert (first["temperature"], first["top_p"], first["seed"], first["max_tokens"]) == (1.0, 0.9, 11, 50)
    assert first["stop_token_ids"] == [tags[T.PATH_CLOSE]]
    assert first["skip_special_tokens"] is False and first["return_token_ids"] is True
    assert (first["top_k"], first["min_p"]) == (-1, 0.0)  # a server's own sampler defaults switched off
    assert sent[6]["temperature"] == 0.6 and sent[6]["stop_token_ids"] == []


def test_text_is_tokenised_when_the_server_returns_no_ids(model: Path, tok: Any) -> None:
    tags = resolve_tag_ids(tok)
    written = [*_words(tok, "path text"), tags[T.PATH_CLOSE]]
    fake = FakeServer(lambda body: [list(written)], tok.eos_token_id, with_token_ids=False,
                      decode=lambda ids: tok.decode(ids, skip_special_tokens=False))
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        [[completion]] = engine.generate([GenerationRequest("r", [5], stop_token_ids=(tags[T.PATH_CLOSE],))],
                                         SamplingConfig())
    assert completion.token_ids == written and completion.finish_reason == "stop"


def test_greedy_sends_one_and_repeats_it_and_budgets_respect_the_model_length(model: Path, tok: Any) -> None:
    fake = FakeServer(lambda body: [list(range(20, 60))], tok.eos_token_id, max_model_len=10)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        [greedy] = engine.generate([GenerationRequest("g", [1, 2, 3, 4], n=3, max_new_tokens=100)],
                                   SamplingConfig(temperature=0.0))
        # M4: a prompt that fills the model length is an error, never empty samples stored as a complete run
        with pytest.raises(Pr1EvalError, match=r"request f: its prompt has 10 tokens, .*max_model_len 10: no room"):
            engine.generate([GenerationRequest("f", list(range(10)), n=2)], SamplingConfig(temperature=0.0))
    assert len(fake.requests) == 1  # the full prompt (10 of 10) is not sent: vLLM would answer 400
    assert fake.requests[0]["n"] == 1 and fake.requests[0]["max_tokens"] == 6  # 10 - 4 prompt tokens
    assert [c.token_ids for c in greedy] == [list(range(20, 26))] * 3


def test_requests_in_flight_stay_under_the_bound(model: Path, tok: Any) -> None:
    fake = FakeServer(lambda body: [[30, tok.eos_token_id]] * body["n"], tok.eos_token_id, delay_s=0.15)
    told: list[tuple[int, int]] = []
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url, max_concurrency=3) as engine:
        engine.on_call_progress = lambda done, total: told.append((done, total))
        out = engine.generate([GenerationRequest(f"r{i}", [5, i], n=2) for i in range(9)], SamplingConfig())
    assert len(out) == 9 and all(c[0].token_ids == [30] for c in out)
    assert fake.most_in_flight == 3  # in flight together, never more than the bound
    assert told == [(2 * i, 18) for i in range(10)]  # the progress line hears each request's n as it returns


def test_a_5xx_or_429_is_retried_then_answers(model: Path, tok: Any) -> None:
    fake = FakeServer(lambda body: [[30, tok.eos_token_id]], tok.eos_token_id, failures=[503, 429])
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        [[completion]] = engine.generate([GenerationRequest("r", [5])], SamplingConfig())
    assert completion.token_ids == [30] and len(fake.requests) == 3


def test_a_server_failing_every_try_ends_in_one_line(model: Path, tok: Any) -> None:
    fake = FakeServer(lambda body: [[30]], tok.eos_token_id, failures=[500] * 10)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        engine.client.max_retries = 2
        with pytest.raises(Pr1EvalError, match=r"failed 3 tries \(last: 500 .*scripted 500\)") as info:
            engine.generate([GenerationRequest("r", [5])], SamplingConfig())
    assert "\n" not in str(info.value) and len(fake.requests) == 3


@pytest.mark.parametrize(("status", "fix"), [(400, "sampling options .*--served-model"), (401, "OPENAI_API_KEY"), (404, "--base-url")])
def test_a_4xx_is_not_retried_and_says_how_to_fix_it(model: Path, tok: Any, status: int, fix: str) -> None:
    fake = FakeServer(lambda body: [[30]], tok.eos_token_id, failures=[status])
    with (serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine,
          pytest.raises(Pr1EvalError, match=f"refused the request \\({status} .*scripted {status}\\); .*{fix}")):
        engine.generate([GenerationRequest("r", [5])], SamplingConfig())
    assert len(fake.requests) == 1


def test_a_server_that_is_not_there_fails_at_once(model: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(Pr1EvalError, match=f"cannot reach an OpenAI-compatible server at {url} .*--base-url"):
        make_engine("openai", str(model), base_url=url)


def test_the_key_comes_from_the_environment_or_the_option(model: Path, tok: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeServer(lambda body: [[30]], tok.eos_token_id)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with serving(fake):
        OpenAIEngine(str(model), base_url=fake.url).close()
        OpenAIEngine(str(model), base_url=fake.url, api_key="given").close()
    assert list(dict.fromkeys(h.get("Authorization") for h in fake.headers)) == ["Bearer from-env", "Bearer given"]


def test_options_meant_for_another_engine_are_refused(model: Path) -> None:
    with pytest.raises(Pr1EvalError, match="needs --base-url"):
        make_engine("openai", str(model))
    with pytest.raises(Pr1EvalError, match="--base-url is for --engine openai"):
        make_engine("hf", str(model), base_url="http://127.0.0.1:1/v1")
    with pytest.raises(Pr1EvalError, match="do not apply to --engine openai"):
        make_engine("openai", str(model), base_url="http://127.0.0.1:1/v1", tensor_parallel_size=2)


def test_the_served_model_is_the_named_one_never_a_guess() -> None:
    where = "http://h/v1/models"
    assert pick_served_model(["only"], None, "/ckpt/step_100", where) == "only"
    assert pick_served_model(["step_100", "step_200"], None, "/ckpt/step_200", where) == "step_200"
    assert pick_served_model(["a", "b"], "b", "/ckpt/x", where) == "b"
    assert pick_served_model(["global_step_100", "global_step_200"], None, "/ckpt/global_step_100/hf", where,
                             exact=True) == "global_step_100"
    with pytest.raises(Pr1EvalError, match="serves no model named like /ckpt/global_step_300/hf"):
        pick_served_model(["only"], None, "/ckpt/global_step_300/hf", where, exact=True)  # a sweep never guesses
    with pytest.raises(Pr1EvalError, match="serves 2 models .*pass --served-model"):
        pick_served_model(["a", "b"], None, "/ckpt/x", where)
    with pytest.raises(Pr1EvalError, match="--served-model 'c' is not served .*a, b"):
        pick_served_model(["a", "b"], "c", "/ckpt/x", where)


def test_secrets_never_reach_what_is_written() -> None:
    assert public_url("https://user:pw@host:8000/v1?key=s#f") == "https://host:8000/v1"
    assert public_options({"api_key": "sk-1", "base_url": "http://u:p@h/v1", "max_concurrency": 8}) == {
        "api_key": "<redacted>", "base_url": "http://h/v1", "max_concurrency": 8}
    argv = ["pr1-eval", "run", "--api-key", "sk-1", "--api-key=sk-2", "--base-url", "http://u:p@h:1/v1",
            "--base-url=http://u:p@h:1/v1", "--model", "m"]
    assert public_argv(argv) == ["pr1-eval", "run", "--api-key", "<redacted>", "--api-key=<redacted>", "--base-url",
                                 "http://h:1/v1", "--base-url=http://h:1/v1", "--model", "m"]
    with pytest.raises(Pr1EvalError, match="not an http"):
        openai_client.normalise_base_url("127.0.0.1:8000")
    assert openai_client.normalise_base_url("http://h:8000") == "http://h:8000/v1"
