"""``--engine openai`` against a real server nobody here wrote: ``transformers serve`` (ships with
transformers; needs the ``dev`` extra's fastapi, uvicorn and openai) on 127.0.0.1, CPU, the trained
tiny model. It takes string prompts only, refuses vLLM's fields (422), ignores ``n``, returns text
without ids and drops special tokens from it, and samples only when the model's generation config
says so; the engine must find all of that by its probe, run in text mode, and store, greedy, the
very responses ``--engine hf`` stores, sequential and fork-join (stops by the ``</Path>`` string).

The server is served the documented way: a copy of the checkpoint whose tokenizer marks the six tags
non-special (same ids), in a hub-cache layout (its ``/v1/models`` lists only the hub cache), passed
to the run as ``--tokenizer``. One server for the module; always stopped (its process group)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pr1_eval.cli.main import main
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.openai_engine import OpenAIEngine
from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.openai_fake import free_port, plain_tags_copy

pytestmark = pytest.mark.slow  # a server process (~10-30 s to start on 2 busy cores) and four small runs
SERVED = "local/tiny-plain"
START_S = 150.0


def _hub_layout(model: Path, hub: Path, repo: str) -> None:
    """``model``'s files as the hub cache holds a downloaded repo (``models--ORG--NAME``)."""
    root = hub / f"models--{repo.replace('/', '--')}"
    revision = "0" * 40
    snapshot, blobs = root / "snapshots" / revision, root / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(revision)
    for item in model.iterdir():
        shutil.copy(item, blobs / item.name)
        (snapshot / item.name).symlink_to(os.path.relpath(blobs / item.name, snapshot))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``transformers serve`` on a free loopback port; (its /v1 URL, the tokenizer copy it serves)."""
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        pytest.skip("transformers serve needs fastapi, uvicorn and openai: pip install -e '.[dev]'")
    work = tmp_path_factory.mktemp("tserve")
    plain = plain_tags_copy(cached_tiny_model("trained"), work / "tiny-plain")
    _hub_layout(plain, work / "hub", SERVED)
    port = free_port()
    env = {**os.environ, "HF_HUB_CACHE": str(work / "hub"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1"}
    log = (work / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "transformers.cli.transformers", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--device", "cpu"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited {process.returncode}: {(work / 'server.log').read_text()[-800:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not answer in {START_S:g} s: {(work / 'server.log').read_text()[-800:]}")
            time.sleep(0.3)
        yield url, plain
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
        log.close()


COLUMNS = ["problem_id", "sample_idx", "response", "n_response_tokens", "finish_reason", "n_blocks"]


@pytest.mark.parametrize("decoding", ["sequential", "forkjoin"])
def test_a_greedy_run_through_transformers_serve_equals_the_hf_engine(server: tuple[str, Path], tmp_path: Path,
                                                                      decoding: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, plain = server
    options = ["--tasks", "gsm8k", "-k", "1", "--limit", "2", "--max-new-tokens", "48", "--seed", "3",
               "--temperature", "0", "--decoding", decoding, "--data-dir", str(packaged_benchmarks_dir()),
               "--grade-workers", "1"]
    if decoding == "forkjoin":
        options += ["--path-temperature", "run", "--max-blocks", "2"]
    assert main(["run", "--model", SERVED, "--tokenizer", str(plain), "--engine", "openai", "--base-url", url,
                 "--out", str(tmp_path / "served"), *options]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("server "))
    assert ("token-id prompts no, token ids back no, vLLM fields no, stops kept, tags in text not needed, n no, "
            "samples no") in line and line.endswith("-> mode: text prompts, one request per sample (n ignored)")
    assert main(["run", "--model", str(cached_tiny_model("trained")), "--engine", "hf", "--out", str(tmp_path / "hf"),
                 *options]) == 0
    served, local = (RunStore(tmp_path / name).read_frame()[COLUMNS].sort_values(COLUMNS[:2]).reset_index(drop=True)
                     for name in ("served", "hf"))
    assert served.equals(local)  # token for token: every response, its token count, finish and blocks
    if decoding == "forkjoin":
        assert (served["n_blocks"] > 0).all()  # the model branched: paths went through the server's stop strings
    engine = RunStore(tmp_path / "served").read_run().engine
    assert engine["api"] == "completions, prompt as text" and engine["server"]["mode"] == "text"


def test_the_probe_finds_what_transformers_serve_cannot_do(server: tuple[str, Path]) -> None:
    """Sampling is refused (the tiny model's generation config has no do_sample); with the original
    tokenizer (the six tags special) the server's text would lose them: refused before any request."""
    url, plain = server
    with OpenAIEngine(SERVED, base_url=url, tokenizer=str(plain)) as engine, \
            pytest.raises(Pr1EvalError, match=r"gave one answer to two seeds .*do_sample"):
        engine.generate([GenerationRequest("s", [5, 6], n=2, seed=1)], SamplingConfig(temperature=1.0))
    with pytest.raises(Pr1EvalError, match=r"six tags are special tokens .*ignores logit_bias"):
        OpenAIEngine(SERVED, base_url=url, tokenizer=str(cached_tiny_model("trained")))
