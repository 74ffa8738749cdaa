"""The endpoint engine against fakes that behave like the real server classes (vLLM, a server that
ignores ``n``, ``transformers serve``, llama.cpp with and without ``--special``): the probe's
findings, the mode it picks, what it refuses, and never a duplicated sample (M3 of the 2026-12-06
audit: one choice for ``n = 2`` used to be copied into both samples)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.openai_engine import OpenAIEngine, check_round_trip
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.tags import resolve_tag_ids
from tests.support.openai_fake import LLAMA_CPP_LIKE, TRANSFORMERS_SERVE_LIKE, FakeServer, plain_tags_copy, serving

pytestmark = pytest.mark.usefixtures("quick_backoff")


@pytest.fixture(scope="module")
def plain(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model's tokenizer with the six tags marked non-special (same ids): the documented
    way to serve a checkpoint through a server that drops special tokens from its text."""
    return plain_tags_copy(model, tmp_path_factory.mktemp("plain") / "tiny")


def _words(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def _by_seed(tok: Any) -> Any:
    """A sampling "model": each choice's words depend on its seed (choice j of a request: seed + j)."""
    def respond(body: dict[str, Any]) -> list[list[int]]:
        return [[*_words(tok, f" s{body.get('seed', 0) + j}"), tok.eos_token_id] for j in range(body["n"])]
    return respond


def test_a_server_that_ignores_n_gets_one_request_per_sample_never_a_copy(model: Path, tok: Any,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeServer(_by_seed(tok), tok.eos_token_id, honours_n=False)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        [out] = engine.generate([GenerationRequest("p", [5, 6], n=3, seed=100, temperature=1.0)], SamplingConfig())
    assert [c.text for c in out] == [" s100", " s101", " s102"]  # three samples, vLLM's seeds: seed + j
    assert sorted((b["n"], b["seed"]) for b in fake.requests) == [(1, 100), (1, 101), (1, 102)]
    assert "n no" in capsys.readouterr().err and engine.describe()["server"]["n"] is False


def test_fewer_choices_than_asked_get_the_missing_ones_asked_again(model: Path, tok: Any,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The probe saw n honoured, a later answer (a proxy, a replica) holds one choice: the missing two
    are asked for one by one with their own seeds, never copied from the first (M3)."""
    fake = FakeServer(_by_seed(tok), tok.eos_token_id, mangle=lambda a: {**a, "choices": a["choices"][:1]})
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        [out] = engine.generate([GenerationRequest("p", [5, 6], n=3, seed=40, temperature=1.0)], SamplingConfig())
    assert [c.text for c in out] == [" s40", " s41", " s42"]
    assert [(b["n"], b["seed"]) for b in fake.requests] == [(3, 40), (1, 41), (1, 42)]
    assert "returned 1 choice(s) for n=3; asking again" in capsys.readouterr().err


def test_a_vllm_like_server_runs_in_token_mode_and_prints_its_features(model: Path, tok: Any,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    tags = resolve_tag_ids(tok)
    fake = FakeServer(lambda body: [[*_words(tok, "a b c"), tags[T.PATH_CLOSE]]] * body["n"], tok.eos_token_id)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        features = engine.describe()["server"]
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"server {fake.url} (served-tiny): token-id prompts yes, token ids back yes")
    assert line.endswith("-> mode: tokens prompts") and "\n" not in line
    assert (features["mode"], features["stops"], features["n"], features["seeds_repeat"]) == ("tokens", "ids", True, True)
    assert fake.requests == [] and 5 <= len(fake.probes) <= 8  # the probe is a few tiny requests, apart from the run


def _text_fake(tok: Any, respond: Any, hidden: frozenset[int] = frozenset()) -> FakeServer:
    return FakeServer(respond, tok.eos_token_id, **TRANSFORMERS_SERVE_LIKE, hidden_ids=hidden,
                      decode=lambda ids: tok.decode(ids, skip_special_tokens=False),
                      encode=lambda text: list(tok.encode(text, add_special_tokens=False)))


def _path_script(tok: Any) -> Any:
    tags = resolve_tag_ids(tok)

    def respond(body: dict[str, Any]) -> list[list[int]]:
        if body["prompt"][-1] == tags[T.PATH_OPEN]:
            return [[*_words(tok, "two ways"), tags[T.PATH_CLOSE], *_words(tok, "more"), tok.eos_token_id]]
        return [[*_words(tok, "Final Answer: 18"), tok.eos_token_id]]
    return respond


def test_a_text_only_server_with_plain_tags_runs_in_text_mode_with_string_stops(plain: Path, tok: Any,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """transformers serve's class: strings only, 422 on vLLM's fields, n ignored, text only. With the
    tags non-special it shows them: the prompt goes as text, ``</Path>`` as a stop string, and the
    path comes back as the same ids, stop kept, EOS (dropped from its text) read as EOS."""
    tags = resolve_tag_ids(tok)
    fake = _text_fake(tok, _path_script(tok), hidden=frozenset({tok.eos_token_id}))
    prompt = [*_words(tok, "Solve."), tags[T.PATH_OPEN]]
    with serving(fake), OpenAIEngine(str(plain), base_url=fake.url) as engine:
        [paths], [main] = (engine.generate([r], SamplingConfig(temperature=1.0)) for r in (
            GenerationRequest("p", prompt, n=2, seed=9, stop_token_ids=(tags[T.PATH_CLOSE],), temperature=1.0),
            GenerationRequest("m", _words(tok, "Solve."), n=1, seed=3)))
    assert "-> mode: text prompts, one request per sample (n ignored)" in capsys.readouterr().err
    assert [c.token_ids for c in paths] == [[*_words(tok, "two ways"), tags[T.PATH_CLOSE]]] * 2
    assert {c.finish_reason for c in paths} == {"stop"} and paths[0].stop_token_id == tags[T.PATH_CLOSE]
    assert main[0].finish_reason == "eos" and main[0].token_ids == _words(tok, "Final Answer: 18")
    sent = [b for b in fake.requests if b["prompt"].endswith("<Path>")]
    assert sorted((b["prompt"], b["stop"], b["n"], b["seed"]) for b in sent) == [("Solve.<Path>", ["</Path>"], 1, 9),
                                                                         ("Solve.<Path>", ["</Path>"], 1, 10)]
    assert all(set(b) <= {"model", "prompt", "n", "max_tokens", "temperature", "top_p", "stop", "seed"}
               for b in fake.requests)


def test_a_text_only_server_that_drops_special_tags_is_refused_in_one_line(model: Path, tok: Any) -> None:
    specials = frozenset({tok.eos_token_id, *resolve_tag_ids(tok).values()})
    fake = _text_fake(tok, _path_script(tok), hidden=specials)
    with serving(fake), pytest.raises(Pr1EvalError, match=r"six tags are special tokens .*ignores logit_bias.*"
                                      r"\"special\": false .*--tokenizer") as info:
        OpenAIEngine(str(model), base_url=fake.url)
    assert "\n" not in str(info.value) and fake.requests == []


@pytest.mark.parametrize("special_flag", [False, True])
def test_llama_cpp_needs_special_and_cannot_run_fork_join(model: Path, tok: Any, special_flag: bool) -> None:
    """llama-server takes token prompts but ignores stop_token_ids and trims stop strings without
    saying which fired; without --special a forced tag vanishes from its text."""
    tags = resolve_tag_ids(tok)
    hidden = frozenset() if special_flag else frozenset({tok.eos_token_id, *tags.values()})
    fake = FakeServer(_path_script(tok), tok.eos_token_id, **LLAMA_CPP_LIKE, hidden_ids=hidden,
                      decode=lambda ids: tok.decode(ids, skip_special_tokens=False))
    with serving(fake):
        if not special_flag:
            with pytest.raises(Pr1EvalError, match=r"a forced </Path> came back without it\); start llama.cpp's "
                                                   r"llama-server with --special"):
                OpenAIEngine(str(model), base_url=fake.url)
            return
        with OpenAIEngine(str(model), base_url=fake.url) as engine:
            assert engine.describe()["server"]["stops"] == "trimmed"
            [[ok]] = engine.generate([GenerationRequest("m", [9, 10], seed=1)], SamplingConfig())
            with pytest.raises(Pr1EvalError, match=r"fork-join stops each path at </Path>.*stops trimmed.*"
                                                   r"--decoding sequential"):
                engine.generate([GenerationRequest("p", [9, tags[T.PATH_OPEN]], stop_token_ids=(tags[T.PATH_CLOSE],))],
                                SamplingConfig())
    assert ok.token_ids == _words(tok, "Final Answer: 18") and ok.finish_reason == "eos"
    assert len(fake.requests) == 1  # the refused fork-join request was never sent


def test_a_server_that_does_not_sample_refuses_sampled_requests(model: Path, tok: Any) -> None:
    fake = FakeServer(lambda body: [[30, tok.eos_token_id]] * body["n"], tok.eos_token_id, samples=False)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        [[greedy]] = engine.generate([GenerationRequest("g", [5])], SamplingConfig(temperature=0.0))
        with pytest.raises(Pr1EvalError, match=r"one answer to two seeds .*do_sample.*--temperature 0"):
            engine.generate([GenerationRequest("s", [5], n=2)], SamplingConfig(temperature=0.7))
    assert greedy.token_ids == [30] and len(fake.requests) == 1


def test_a_prompt_that_does_not_survive_as_text_is_refused(tok: Any) -> None:
    words = _words(tok, "abc")
    split = [*_words(tok, "a"), *_words(tok, "b"), *_words(tok, "c")]  # the same text, not the tokenizer's own split
    assert check_round_trip(tok, words, "p") == "abc"
    assert len(split) == 3 and len(words) == 1
    with pytest.raises(Pr1EvalError, match=r"p does not survive as text: its 3 token ids read back as 1"):
        check_round_trip(tok, split, "p")


class _RefusesEverything(FakeServer):
    def refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        return 422, {"detail": f"no field like {sorted(body)[0]}"}


def test_a_server_refusing_every_form_is_one_line_naming_what_it_said(model: Path, tok: Any) -> None:
    """Before the probe, the first 4xx said "check the sampling options", the wrong way for a server
    that lacks vLLM's extensions; now every form is tried and the server's words are shown."""
    fake = _RefusesEverything(lambda body: [[30]], tok.eos_token_id)
    with serving(fake), pytest.raises(Pr1EvalError, match=r"refused a completions request in every form .*token ids "
                                      r"with vLLM's fields, text with them, plain text; it said: 422: no field like") as info:
        OpenAIEngine(str(model), base_url=fake.url)
    assert "\n" not in str(info.value) and len(fake.probes) == 3 and fake.requests == []
    assert [isinstance(b["prompt"], str) for b in fake.probes] == [False, True, True]
    assert ["skip_special_tokens" in b for b in fake.probes] == [True, True, False]


def test_a_failing_model_list_is_retried_once_and_a_placeholder_model_is_said(model: Path, tok: Any,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A 5xx on /models at first contact means "not this kind of server" far more often than "busy":
    one retry, not six backoffs; a router's placeholder id ``unknown`` is named in the start line."""
    fake = FakeServer(lambda body: [[30]], tok.eos_token_id, models_failures=[500, 500, 500])
    with serving(fake), pytest.raises(Pr1EvalError, match=r"/models failed 2 tries \(last: 500 .*scripted 500\)"):
        OpenAIEngine(str(model), base_url=fake.url)
    assert fake.models_failures == [500]
    router = FakeServer(lambda body: [[30]] * body["n"], tok.eos_token_id, model_id="unknown", max_model_len=None)
    with serving(router), OpenAIEngine(str(model), base_url=router.url) as engine:
        assert engine.served_model == "unknown" and engine.max_model_len is None
    assert "(unknown (a router's placeholder: which model answers is not checked))" in capsys.readouterr().err


def test_a_model_that_ends_at_once_on_the_probe_prompt_gets_a_second_one(model: Path, tok: Any) -> None:
    tags = resolve_tag_ids(tok)

    def respond(body: dict[str, Any]) -> list[list[int]]:
        ends = body["prompt"][-1] == tags[T.PATH_OPEN]
        return [[tok.eos_token_id] if ends else _words(tok, " 7, 8, 9")] * body["n"]

    fake = FakeServer(respond, tok.eos_token_id)
    with serving(fake), OpenAIEngine(str(model), base_url=fake.url) as engine:
        assert engine.features.stops == "ids"
    stop_probe = next(b for b in fake.probes if b.get("stop_token_ids"))
    assert stop_probe["prompt"] == _words(tok, "1, 2, 3, 4, 5, 6,")
    assert stop_probe["stop_token_ids"] == [_words(tok, " 7, 8, 9")[1]]
