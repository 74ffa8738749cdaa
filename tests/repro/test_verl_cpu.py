"""The CPU platform for VERL and the CPU rollout server, without starting a trainer.

The trainers themselves run in ``pr1-repro nano --plan ci`` (a step of ``.ci/run``); these tests pin
the contracts that job rests on: the plugin hook selects the platform only when asked, VERL's
device and backend helpers answer what the trainers need on CPU, and the rollout server returns
what ``vLLMHttpServer.generate`` returns — its log-probs equal to a plain forward of the model, the
EOS that ended a request as its last id, and new weights taking effect at a sync (or not, frozen).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from repro.testing import tiny_model_dir
from repro.testing.verl_cpu import cpu_environment, gloo_backend
from tests.support.deadlines import scaled

PROBE = (
    "import json, verl\n"
    "from verl.plugin.platform import PlatformRegistry\n"
    "from verl.utils.device import get_device_id, get_device_name, get_nccl_backend\n"
    "names = list(PlatformRegistry.registered_names())\n"
    "out = {'names': names}\n"
    "if 'cpu' in names:\n"
    "    out.update(device_id=get_device_id(), device=get_device_name(), backend=get_nccl_backend())\n"
    "    from verl.workers.rollout.base import get_rollout_class\n"
    "    from verl.workers.rollout.replica import get_rollout_replica_class\n"
    "    out.update(adapter=get_rollout_class('pr1_cpu').__name__, replica=get_rollout_replica_class('pr1_cpu').__name__)\n"
    "print('PROBE' + json.dumps(out))\n"
)


def _probe(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE"))
    return dict(json.loads(line[len("PROBE"):]))


def test_the_plugin_hook_selects_the_cpu_platform_only_when_asked() -> None:
    plain = {k: v for k, v in os.environ.items() if not k.startswith("VERL_")}
    assert "cpu" not in _probe(plain)["names"], "importing verl alone must not register the CPU platform"
    found = _probe({**plain, **cpu_environment(("repro.testing.cpu_rollout",))})
    assert found["device_id"] == "cpu", "an int here means 'accelerator N' to tensor.to()"
    assert (found["device"], found["backend"]) == ("cpu", "gloo")
    assert (found["adapter"], found["replica"]) == ("CpuServerAdapter", "CpuHFReplica")


def test_gloo_backend_fixes_only_verls_doubled_cpu_string() -> None:
    assert gloo_backend("cpu:gloo,cpu:gloo") == "gloo"
    assert gloo_backend("cpu:gloo") == "gloo"
    for other in ("cpu:gloo,cuda:nccl", "nccl", None):
        assert gloo_backend(other) == other


def _server(monkeypatch: pytest.MonkeyPatch, frozen: bool = False):  # type: ignore[no-untyped-def]
    from repro.testing.cpu_rollout import FROZEN_ENV, CpuHFServer

    monkeypatch.setenv(FROZEN_ENV, "1" if frozen else "0")
    config = SimpleNamespace(prompt_length=64, response_length=12, max_model_len=None)
    return CpuHFServer(config, SimpleNamespace(path=str(tiny_model_dir("random")), local_path=None), 0)


def _forward_logprobs(model, prompt: list[int], response: list[int]) -> list[float]:  # type: ignore[no-untyped-def]
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float().log_softmax(-1)
    return [float(logits[len(prompt) - 1 + i, tok]) for i, tok in enumerate(response)]


def test_generate_returns_vllms_contract_with_logprobs_of_a_plain_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    server = _server(monkeypatch)
    prompt = [1, 12, 40, 41, 42, 2]
    out = asyncio.run(server.generate(prompt, {"temperature": 1.0, "top_p": 1.0, "logprobs": True, "seed": 3},
                                      "r1"))
    assert 1 <= len(out.token_ids) <= 12, "max_tokens falls back to response_length"
    assert out.log_probs is not None and len(out.log_probs) == len(out.token_ids)
    expected = _forward_logprobs(server.engine.model, prompt, list(out.token_ids))
    assert max(abs(a - b) for a, b in zip(out.log_probs, expected, strict=True)) < 1e-4
    assert out.extra_fields == {"global_steps": None}
    eos = server.engine.eos_token_ids
    assert not any(t in eos for t in out.token_ids[:-1]), "an EOS can only be the last id (vLLM keeps it)"
    short = asyncio.run(server.generate(prompt, {"temperature": 1.0, "max_tokens": 3, "seed": 3}, "r2"))
    assert len(short.token_ids) <= 3 and short.log_probs is None, "no log-probs unless asked"


def test_a_sync_changes_the_sampling_model_unless_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    for frozen in (False, True):
        server = _server(monkeypatch, frozen=frozen)
        model = server.engine.model
        before = {k: v.clone() for k, v in model.state_dict().items()}
        new = {k: v + 0.5 for k, v in before.items() if k != "lm_head.weight" or not model.config.tie_word_embeddings}
        report = server.load_weights(new, global_steps=4)
        changed = not torch.equal(model.state_dict()["model.embed_tokens.weight"], before["model.embed_tokens.weight"])
        assert changed is (not frozen) and report["frozen"] is frozen
    server = _server(monkeypatch)
    with pytest.raises(RuntimeError, match="lack"):
        server.load_weights({"model.embed_tokens.weight": before["model.embed_tokens.weight"]}, global_steps=1)
