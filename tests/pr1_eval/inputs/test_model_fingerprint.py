"""A model folder's fingerprint, and the resume rule built on it: a run whose model folder now
holds other weights or another tokenizer is refused with both fingerprints named; a run recorded
before fingerprints existed resumes with a warning."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.plan import build_plan
from pr1_eval.inputs.model_fingerprint import EDGE_BYTES, model_fingerprint
from pr1_eval.store.run_store import RunStore

MIB = EDGE_BYTES


def _folder(root: Path, weights: bytes) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text("{}")
    (root / "tokenizer.json").write_text('{"v": 1}')
    (root / "model.safetensors").write_bytes(weights)
    (root / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    return root


def _weights(seed: int, size: int = 3 * MIB) -> bytes:
    return random.Random(seed).randbytes(size)


def test_the_fingerprint_is_size_and_the_edges_of_each_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m", _weights(0))
    print_ = model_fingerprint(folder)
    assert print_ is not None and sorted(print_["files"]) == ["config.json", "model.safetensors", "tokenizer.json"]
    data = _weights(0)  # computed independently: sha256 of the size, the first MiB and the last MiB
    expected = hashlib.sha256(str(len(data)).encode() + data[:MIB] + data[-MIB:]).hexdigest()
    assert print_["files"]["model.safetensors"] == f"{len(data)}:{expected}"
    # the last tensor changed (a retrained checkpoint): another fingerprint; the middle alone: the same
    changed = bytearray(data)
    changed[-10] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(changed))
    assert model_fingerprint(folder)["sha256"] != print_["sha256"]  # type: ignore[index]
    middle = bytearray(data)
    middle[len(data) // 2] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(middle))
    assert model_fingerprint(folder) == print_
    assert model_fingerprint("Qwen/Qwen3-1.7B") is None and model_fingerprint(tmp_path / "nothing") is None


def _config(model: Path, out: Path) -> RunConfig:
    return RunConfig(model=str(model), tasks=["aime24"], k=2, limit=2, engine="hf", out=str(out), max_new_tokens=8)


def test_a_resume_with_other_weights_is_refused_naming_both_fingerprints(tmp_path: Path) -> None:
    model, out = _folder(tmp_path / "hf", _weights(0)), tmp_path / "run"
    first = build_plan(_config(model, out))
    before = first.record.model.fingerprint
    assert before is not None
    RunStore(out).write_run(first.record)
    assert json.loads((out / "run.json").read_text())["model"]["fingerprint"] == before  # recorded
    assert build_plan(_config(model, out)).resumes  # same files: resumes
    (model / "model.safetensors").write_bytes(_weights(1))  # a re-merged checkpoint into the same folder
    after = model_fingerprint(model)
    assert after is not None
    with pytest.raises(Pr1EvalError) as error:
        build_plan(_config(model, out))
    message = str(error.value)
    assert before["sha256"][:16] in message and after["sha256"][:16] in message
    assert "model.safetensors" in message and "pass a new --out" in message and "\n" not in message
    (model / "model.safetensors").write_bytes(_weights(0))
    (model / "tokenizer.json").write_text('{"v": 2}')  # another tokenizer alone is refused too
    with pytest.raises(Pr1EvalError, match="files that differ: tokenizer.json"):
        build_plan(_config(model, out))


def test_a_run_recorded_without_a_fingerprint_resumes_with_a_warning(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    model, out = _folder(tmp_path / "hf", _weights(0)), tmp_path / "run"
    first = build_plan(_config(model, out))
    first.record.model.fingerprint = None  # what an older pr1-eval wrote
    RunStore(out).write_run(first.record)
    assert "fingerprint" not in json.loads((out / "run.json").read_text())["model"]
    again = build_plan(_config(model, out))
    assert again.resumes and again.record.model.fingerprint == model_fingerprint(model)  # recorded from now on
    assert "recorded no model fingerprint" in capsys.readouterr().err
