"""Errors before expensive work: every `run` input is checked before a model loads.

Each message is checked for what went wrong, where, and how to fix it; the CLI cases also check
that the error comes in seconds (no model was loaded) as one line without a traceback.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pr1_eval.errors import Pr1EvalError, describe_exception
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.plan import build_plan
from pr1_eval.generate.preflight import check_k, check_model, check_output, check_prompt, check_tasks
from pr1_eval.records.run import RunRecord
from pr1_eval.store.run_store import RunStore
from tests.support.deadlines import scaled


def _model_folder(root: Path, *, config: bool = True, tokenizer: bool = True, weights: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if config:
        (root / "config.json").write_text("{}")
    if tokenizer:
        (root / "tokenizer.json").write_text("{}")
    if weights:
        (root / "model.safetensors").write_bytes(b"x")
    return root


def test_a_complete_model_folder_passes(tmp_path: Path) -> None:
    assert check_model(str(_model_folder(tmp_path / "m"))) == "local"


@pytest.mark.parametrize(("missing", "says"), [
    ("config", "has no config.json"),
    ("tokenizer", "has no tokenizer files (none of tokenizer.json, tokenizer_config.json"),
    ("weights", "has config.json but no weights"),
])
def test_an_incomplete_model_folder_names_the_missing_file(tmp_path: Path, missing: str, says: str) -> None:
    folder = _model_folder(tmp_path / "m", **{missing: False})
    with pytest.raises(Pr1EvalError) as caught:
        check_model(str(folder))
    assert f"model folder {folder} {says}" in str(caught.value)


def test_a_verl_checkpoint_gets_the_merge_command(tmp_path: Path) -> None:
    ckpt = tmp_path / "global_step_40"
    (ckpt / "actor").mkdir(parents=True)
    with pytest.raises(Pr1EvalError, match=r"VERL checkpoint: merge it first \(python -m verl.model_merger merge"):
        check_model(str(ckpt))


@pytest.mark.parametrize("path", ["/no/such/model", "./no-such-model", "runs/a/b"])
def test_a_path_that_does_not_exist_says_so(path: str) -> None:
    with pytest.raises(Pr1EvalError, match="no such folder; pass an existing model folder or a hub id"):
        check_model(path)


def test_a_hub_id_while_offline_says_the_hub_is_unreachable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(Pr1EvalError) as caught:
        check_model("Qwen/Qwen3-0.6B")
    message = str(caught.value)
    assert "hub is unreachable (HF_HUB_OFFLINE=1 is set)" in message
    assert "hf download Qwen/Qwen3-0.6B --local-dir DIR" in message and "pass --model DIR" in message


def test_an_invalid_name_is_neither_folder_nor_hub_id() -> None:
    with pytest.raises(Pr1EvalError, match="neither an existing folder nor a valid hub id"):
        check_model("not a model!")


def test_k_tasks_and_prompt_are_checked() -> None:
    with pytest.raises(Pr1EvalError, match="-k must be at least 1"):
        check_k(0)
    with pytest.raises(Pr1EvalError, match="unknown task 'aime23'; known tasks: aime24"):
        check_tasks(["aime24", "aime23"], None, 2)
    assert len(check_tasks(["aime24"], None, 2)["aime24"].problems) == 2
    with pytest.raises(Pr1EvalError, match="neither a known template"):
        check_prompt("/no/such/prompt.txt", None)


def _config(model: Path, out: Path, **changes: object) -> RunConfig:
    fields: dict[str, object] = {"model": str(model), "tasks": ["aime24"], "k": 2, "limit": 2, "engine": "hf",
                                 "out": str(out), "max_new_tokens": 8}
    fields.update(changes)
    return RunConfig(**fields)  # type: ignore[arg-type]


def test_an_output_folder_with_another_run_is_refused_before_loading(tmp_path: Path) -> None:
    model = _model_folder(tmp_path / "m")
    out = tmp_path / "run"
    first = build_plan(_config(model, out))
    assert not first.resumes and first.model_source == "local"
    RunStore(out).write_run(first.record)  # what the runner writes as it starts
    assert build_plan(_config(model, out)).resumes  # same settings: resumed
    with pytest.raises(Pr1EvalError, match=r"holds a run with different settings \(k\)"):
        build_plan(_config(model, out, k=3))
    with pytest.raises(Pr1EvalError, match=r"holds a run with different settings \(shard\)"):
        build_plan(_config(model, out, shard="0/2"))  # refused before any model loads


def test_output_folder_with_samples_but_no_run_json_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "o" / "samples.parquet").mkdir(parents=True)
    (tmp_path / "o" / "samples.parquet" / "part-00000.parquet").write_bytes(b"PAR1")
    with pytest.raises(Pr1EvalError, match="holds samples but no run.json"):
        check_output(tmp_path / "o")
    (tmp_path / "f").write_text("x")
    with pytest.raises(Pr1EvalError, match="is a file; pass a folder"):
        check_output(tmp_path / "f")


def test_describe_exception_never_cuts_a_url_or_a_word() -> None:
    text = ("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached "
            "files. Check your internet connection or see how to run the library in offline mode at "
            "'https://huggingface.co/docs/transformers/installation#offline-mode'.")
    for limit in range(40, len(text) + 10, 7):
        short = describe_exception(OSError(text), limit)
        body = short.removeprefix("OSError: ").removesuffix(" …")
        assert text.startswith(body), limit
        assert body == text or text[len(body)] == " ", limit  # ends where a word ends
        assert "https://huggingface.co/docs" not in body or "#offline-mode'." in body, limit


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", *args], capture_output=True, text=True, timeout=scaled(120),
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


def test_cli_errors_come_before_any_model_loads(tmp_path: Path) -> None:
    """No model is loaded: each error is one line, without a traceback, within a few seconds."""
    model = _model_folder(tmp_path / "m", tokenizer=False)
    cases = [
        (["--model", str(model)], f"model folder {model} has no tokenizer files"),
        (["--model", "/no/such/ckpt"], "--model /no/such/ckpt: no such folder"),
        (["--model", "Qwen/Qwen3-0.6B"], "hub is unreachable (HF_HUB_OFFLINE=1 is set)"),
        (["--model", str(model), "-k", "0"], "-k must be at least 1"),
        (["--model", str(model), "--prompt", str(tmp_path / "nope.txt")], "neither a known template"),
    ]
    for extra, says in cases:
        started = time.perf_counter()
        done = _cli("run", "--tasks", "aime24", "--engine", "hf", "--out", str(tmp_path / "o"), *extra,
                    env={"HF_HUB_CACHE": str(tmp_path / "cache")})
        assert done.returncode == 2 and says in done.stderr, (extra, done.stderr)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
        assert time.perf_counter() - started < 60


def test_a_model_folder_error_comes_before_torch_is_imported(tmp_path: Path) -> None:
    """With the default --engine auto on a machine without vllm, choosing the engine imported torch
    (seconds of CPU) before the model folder was checked; now nothing imports it."""
    model = _model_folder(tmp_path / "m", tokenizer=False)
    code = ("import sys\nfrom pr1_eval.cli.main import main\n"
            f"rc = main(['run', '--model', {str(model)!r}, '--tasks', 'aime24', '--out', {str(tmp_path / 'o')!r}])\n"
            "print('rc', rc, 'torch' in sys.modules, 'transformers' in sys.modules)")
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here: choosing the engine needs torch's CUDA check")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3]),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=scaled(300), check=False)
    assert "has no tokenizer files" in done.stderr and done.stdout.split()[-3:] == ["2", "False", "False"], done


def test_report_on_a_folder_of_runs_lists_them(tmp_path: Path) -> None:
    for name in ("step100", "step200"):
        RunStore(tmp_path / "runs" / name).write_run(RunRecord(k=1, status="complete"))
    done = _cli("report", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert f"did you mean {tmp_path / 'runs' / 'step100'}, {tmp_path / 'runs' / 'step200'}?" in done.stderr
    done = _cli("report", str(tmp_path / "nothing-here"))
    assert done.returncode == 2 and "no such folder" in done.stderr


def test_checks_run_in_the_declared_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every input broken at once, then fixed one at a time: each error is the next check of
    ``CHECK_ORDER``, so what a user sees first never depends on a later check."""
    from pr1_eval.engines import vllm_engine
    from pr1_eval.generate.preflight import CHECK_ORDER

    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: False)
    model = _model_folder(tmp_path / "m")
    (tmp_path / "file").write_text("x")
    # check name -> (broken value, fixed value, what its error says)
    cases: dict[str, tuple[dict[str, object], dict[str, object], str]] = {
        "k": ({"k": 0}, {"k": 4}, "-k must be at least 1"),
        "limit": ({"limit": 0}, {"limit": 2}, "--limit must be at least 1"),
        "greedy": ({"temperature": 0.0}, {"temperature": 1.0}, "--temperature 0 needs -k 1"),
        "sampling": ({"top_p": 1.5}, {"top_p": 1.0}, "vLLM accepts top_p in (0, 1]"),
        "tasks": ({"tasks": ["aime23"]}, {"tasks": ["aime24"]}, "unknown task 'aime23'"),
        "prompt": ({"prompt": str(tmp_path / "nope.txt")}, {"prompt": "parallel_r1_v3"}, "neither a known template"),
        "engine": ({"engine": "vllm"}, {"engine": "hf"}, "--engine vllm: vllm is not installed"),
        "decoding": ({"paths": 0}, {"paths": 2}, "--paths and --max-blocks must be at least 1"),
        "output": ({"out": str(tmp_path / "file")}, {"out": str(tmp_path / "new")}, "is a file; pass a folder"),
        "model": ({"model": "/no/such/ckpt"}, {"model": str(model)}, "no such folder"),
    }
    assert tuple(cases) == CHECK_ORDER
    fields: dict[str, object] = {"max_new_tokens": 8}
    for broken, _, _ in cases.values():
        fields.update(broken)
    for name, (_, fixed, says) in cases.items():
        with pytest.raises(Pr1EvalError) as caught:
            build_plan(RunConfig(**fields))  # type: ignore[arg-type]
        assert says in str(caught.value), (name, str(caught.value))
        fields.update(fixed)
    assert build_plan(RunConfig(**fields)).model_source == "local"  # type: ignore[arg-type]


def test_greedy_with_k_above_1_is_named_before_the_output_folder(tmp_path: Path) -> None:
    """The friction as a user met it: ``--temperature 0 -k 4`` into a folder holding another run."""
    model = _model_folder(tmp_path / "m")
    out = tmp_path / "run"
    RunStore(out).write_run(build_plan(_config(model, out)).record)
    done = _cli("run", "--model", str(model), "--tasks", "aime24", "--engine", "hf", "--out", str(out),
                "--temperature", "0", "-k", "4")
    assert done.returncode == 2 and "--temperature 0 needs -k 1" in done.stderr, done.stderr
    assert "different settings" not in done.stderr
