"""``pr1-eval run --engine openai`` end to end against a scripted server on 127.0.0.1.

The "model" behind the fake server writes one fixed response with one block; the expected stored
text is written here by hand from its pieces. Sequential decoding gets it in one request per
problem; fork-join gets it in four requests per sample (main line to ``<Parallel>``, the two paths
as one ``n=2`` request at temperature 1.0, the summary, the main line to EOS), with the join
written by the protocol, and must store the same text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.cli.main import main
from pr1_eval.engines.hf import load_tokenizer
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.tags import resolve_tag_ids
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.openai_fake import FakeServer, free_port, serving

RESPONSE = ("Think.<Parallel><Path>two ways</Path><Path>two ways</Path></Parallel>\n<Summary>both agree</Summary>"
            "\nFinal Answer: 18")
"""What the scripted model writes (before its EOS); gsm8k-test-0's answer is 18, gsm8k-test-1's is not."""


def _script(tok: Any) -> tuple[list[int], Any]:
    tags = resolve_tag_ids(tok)

    def words(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=False))

    path, summary, end = words("two ways"), words("both agree"), words("\nFinal Answer: 18")
    full = [*words("Think."), tags[T.PARALLEL_OPEN], tags[T.PATH_OPEN], *path, tags[T.PATH_CLOSE], tags[T.PATH_OPEN],
            *path, tags[T.PATH_CLOSE], tags[T.PARALLEL_CLOSE], *words("\n"), tags[T.SUMMARY_OPEN], *summary,
            tags[T.SUMMARY_CLOSE], *end, tok.eos_token_id]

    def respond(body: dict[str, Any]) -> list[list[int]]:
        prompt = body["prompt"]
        if prompt[-1] == tags[T.PATH_OPEN]:
            written = [*path, tags[T.PATH_CLOSE]]
        elif prompt[-1] == tags[T.SUMMARY_OPEN]:
            written = [*summary, tags[T.SUMMARY_CLOSE]]
        elif prompt[-1] == tags[T.SUMMARY_CLOSE]:  # the main line resumes after the block
            written = [*end, tok.eos_token_id]
        else:
            written = full
        return [list(written) for _ in range(body["n"])]

    return full, respond


def _run(model: Path, url: str, out: Path, *extra: str) -> int:
    return main(["run", "--model", str(model), "--tasks", "gsm8k", "-k", "2", "--limit", "2", "--max-new-tokens", "200",
                 "--engine", "openai", "--base-url", url, "--out", str(out), "--seed", "5",
                 "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1", *extra])


@pytest.mark.parametrize("decoding", ["sequential", "forkjoin"])
def test_a_run_through_the_endpoint_stores_the_served_responses(model: Path, tmp_path: Path, decoding: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tok = load_tokenizer(str(model))
    full, respond = _script(tok)
    fake = FakeServer(respond, tok.eos_token_id)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    with serving(fake):
        secret_url = fake.url.replace("http://", "http://user:pw@")
        assert _run(model, secret_url, tmp_path / "run", "--decoding", decoding) == 0
    store = RunStore(tmp_path / "run")
    frame = store.read_frame().sort_values(["problem_id", "sample_idx"])
    assert list(frame["response"]) == [RESPONSE] * 4
    assert list(frame["n_response_tokens"]) == [len(full) - 1] * 4 and set(frame["n_blocks"]) == {1}
    assert list(frame["correct"]) == [True, True, False, False]  # 18 is gsm8k-test-0's answer only
    calls = 4 if decoding == "forkjoin" else 1
    assert list(frame["engine_calls"]) == [calls] * 4
    # the first main-line request of a problem carries its k samples (n=k), as sequential decoding's only one does;
    # fork-join then asks per sample for its paths, its summary and the rest of its main line
    assert len(fake.requests) == (2 + 4 * 3 if decoding == "forkjoin" else 2)
    if decoding == "forkjoin":
        paths = [b for b in fake.requests if b["prompt"][-1] == resolve_tag_ids(tok)[T.PATH_OPEN]]
        assert len(paths) == 4 and {(b["n"], b["temperature"]) for b in paths} == {(2, 1.0)}
        one_path = len(tok.encode("two ways", add_special_tokens=False)) + 2  # with <Path> and </Path>
        assert list(frame["critical_path_tokens"]) == [len(full) - 1 - one_path] * 4
    record = store.read_run()
    assert record.engine["backend"] == "openai" and record.engine["served_model"] == "served-tiny"
    assert record.engine["base_url"] == fake.url  # no user, no password
    text = (tmp_path / "run" / "run.json").read_text()
    assert "sk-secret" not in text and "user:pw" not in text
    assert json.loads(text)["config"]["engine_options"]["base_url"] == fake.url


def test_a_rerun_sends_the_same_seeds(model: Path, tmp_path: Path) -> None:
    """Seeds derive from (run seed, problem, sample): a second run asks the server for the same ones."""
    tok = load_tokenizer(str(model))
    _, respond = _script(tok)
    seeds = []
    for name in ("a", "b"):
        fake = FakeServer(respond, tok.eos_token_id)
        with serving(fake):
            assert _run(model, fake.url, tmp_path / name, "--decoding", "forkjoin") == 0
        seeds.append(sorted(b["seed"] for b in fake.requests))
    assert seeds[0] == seeds[1] and len(set(seeds[0])) == len(seeds[0])  # reproducible, and distinct per request


def test_an_absent_server_or_structured_decoding_is_one_line(model: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"

    def errors() -> list[str]:  # the --limit warning (lm-eval's, printed at run time) is not an error line
        lines = capsys.readouterr().err.strip().splitlines()
        assert all(line.startswith(("error:", "warning: --limit")) for line in lines), lines
        return [line for line in lines if line.startswith("error:")]

    assert _run(model, url, tmp_path / "run") == 2
    (err,) = errors()
    assert f"cannot reach an OpenAI-compatible server at {url}" in err
    assert _run(model, url, tmp_path / "run2", "--decoding", "structured") == 2
    (err,) = errors()
    assert "no completions API takes" in err
    assert _run(model, url, tmp_path / "run3", "--ray") == 2
    assert "generates on a server" in capsys.readouterr().err


def _checkpoint(folder: Path, model: Path) -> None:
    folder.mkdir(parents=True)
    for item in model.iterdir():
        (folder / item.name).symlink_to(item)


def test_a_sweep_asks_for_each_checkpoint_by_its_own_name(model: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Two steps served under their names behind one URL (a router, or one server per step): each run
    asks for its own; --served-model, one name for many steps, is refused before anything runs."""
    tok = load_tokenizer(str(model))
    _, respond = _script(tok)
    _checkpoint(tmp_path / "ckpt" / "global_step_10" / "hf", model)
    _checkpoint(tmp_path / "ckpt" / "global_step_20" / "hf", model)
    fake = FakeServer(respond, tok.eos_token_id, model_id="global_step_20", more_models=("global_step_10",))
    options = ["--tasks", "gsm8k", "-k", "1", "--limit", "1", "--max-new-tokens", "100", "--engine", "openai",
               "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1", "--out-root", str(tmp_path / "runs")]
    with serving(fake):
        assert main(["sweep", str(tmp_path / "ckpt"), "--base-url", fake.url, *options]) == 0
        capsys.readouterr()
        assert main(["sweep", str(tmp_path / "ckpt"), "--base-url", fake.url, "--served-model", "global_step_10",
                     *options]) == 2
    assert "--served-model names one model, but the sweep has 2 checkpoints" in capsys.readouterr().err
    assert sorted(b["model"] for b in fake.requests) == ["global_step_10", "global_step_20"]
    served = sorted(RunStore(run.parent).read_run().engine["served_model"] for run in (tmp_path / "runs").rglob("run.json"))
    assert served == ["global_step_10", "global_step_20"]


def _hf_responder(engine: Any) -> Any:
    """A server backed by the HF engine on the trained tiny model: each request is one ``generate``
    call with the request's own n, budget, stops, seed and temperature, one at a time (the HF
    engine seeds torch's global generator)."""
    from threading import Lock

    from pr1_eval.engines.base import GenerationRequest, SamplingConfig

    lock = Lock()

    def respond(body: dict[str, Any]) -> list[list[int]]:
        request = GenerationRequest("served", body["prompt"], n=body["n"], max_new_tokens=body["max_tokens"],
                                    stop_token_ids=tuple(body.get("stop_token_ids") or ()), seed=body.get("seed"),
                                    temperature=body["temperature"])
        # top_k -1 is "off" on a server (vLLM, SGLang, llama.cpp); the HF engine says off with 0
        sampling = SamplingConfig(body["temperature"], body.get("top_p", 1.0), max(0, body.get("top_k", 0)),
                                  body["max_tokens"])
        with lock:
            [completions] = engine.generate([request], sampling)
        eos = engine.tokenizer.eos_token_id
        return [[*c.token_ids, *([eos] if c.finish_reason == "eos" else [])] for c in completions]

    return respond


@pytest.mark.slow  # two runs of the trained tiny model (3-12 s on 2 busy cores)
@pytest.mark.parametrize("decoding", ["sequential", "forkjoin"])
def test_the_endpoint_writes_what_the_hf_engine_writes(tmp_path: Path, decoding: str) -> None:
    """The same run twice on the trained tiny model: in this process (--engine hf, one row per call)
    and through a server holding the same model (--engine openai). Every stored response, token count
    and finish reason agrees: prompts, seeds, budgets, stops and the protocol reach the server intact."""
    from pr1_eval.engines.hf import HFEngine

    trained = cached_tiny_model("trained")
    options = ["--tasks", "gsm8k", "-k", "2", "--limit", "1", "--max-new-tokens", "96", "--seed", "4",
               "--decoding", decoding, "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1"]
    assert main(["run", "--model", str(trained), "--engine", "hf", "--batch-size", "1", "--out", str(tmp_path / "hf"),
                 *options]) == 0
    served = HFEngine(str(trained), max_batch_size=1)
    fake = FakeServer(_hf_responder(served), served.tokenizer.eos_token_id)
    with serving(fake):
        assert main(["run", "--model", str(trained), "--engine", "openai", "--base-url", fake.url,
                     "--out", str(tmp_path / "openai"), *options]) == 0
    columns = ["problem_id", "sample_idx", "response", "n_response_tokens", "finish_reason", "n_blocks", "engine_calls"]
    hf, openai = (RunStore(tmp_path / name).read_frame()[columns].sort_values(columns[:2]).reset_index(drop=True)
                  for name in ("hf", "openai"))
    assert hf.equals(openai)
    if decoding == "forkjoin":
        assert (hf["n_blocks"] > 0).any()  # the model branches, so paths went through the server


def test_a_run_keeps_a_chunk_of_problems_in_flight(model: Path, tmp_path: Path) -> None:
    """The server's scheduler needs many sequences at once: a run's chunk (64 problems on a server, as
    on vLLM) is sent together, so 10 problems are 10 requests in flight, not the HF engine's 8."""
    tok = load_tokenizer(str(model))
    _, respond = _script(tok)
    fake = FakeServer(respond, tok.eos_token_id, gather=10)  # held until 10 are in flight (or 30 s)
    with serving(fake):
        assert main(["run", "--model", str(model), "--tasks", "aime24", "-k", "1", "--limit", "10",
                     "--max-new-tokens", "100", "--engine", "openai", "--base-url", fake.url, "--out",
                     str(tmp_path / "run"), "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1"]) == 0
    assert len(fake.requests) == 10 and fake.most_in_flight == 10


def test_a_folder_with_only_the_tokenizer_is_enough(model: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The weights are the server's: --model may hold the tokenizer alone, or be a bare name with
    --tokenizer; a folder without tokenizer files is refused before any request."""
    tok = load_tokenizer(str(model))
    _, respond = _script(tok)
    folder = tmp_path / "tokenizer-only"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        (folder / name).symlink_to(model / name)
    (tmp_path / "empty").mkdir()
    fake = FakeServer(respond, tok.eos_token_id)
    with serving(fake):
        assert _run(folder, fake.url, tmp_path / "a", "-k", "1", "--limit", "1") == 0
        assert main(["run", "--model", "served-tiny", "--tokenizer", str(folder), "--tasks", "gsm8k", "-k", "1",
                     "--limit", "1", "--engine", "openai", "--base-url", fake.url, "--out", str(tmp_path / "b"),
                     "--data-dir", str(packaged_benchmarks_dir()), "--grade-workers", "1"]) == 0
        capsys.readouterr()
        assert _run(tmp_path / "empty", fake.url, tmp_path / "c") == 2
    assert "has no tokenizer files" in capsys.readouterr().err
    responses = [RunStore(tmp_path / name).read_frame()["response"].tolist() for name in ("a", "b")]
    assert responses == [[RESPONSE], [RESPONSE]]
    assert RunStore(tmp_path / "b").read_run().engine["tokenizer"] == str(folder)
