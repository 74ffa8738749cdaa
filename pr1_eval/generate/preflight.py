"""Checks that run before any model loads: a mistake costs a second, not a model load.

Why: loading a 7B model (or starting vLLM on 8 GPUs) takes minutes, and a typo in a task name,
a missing prompt, a wrong ``-k``, an ``--out`` that already holds a different run, a model folder
without tokenizer files or a hub id on a machine without network would otherwise surface only
after it. Each check is a function of the values it checks (and the files they name), and the ones
that read something return what they read, so building a run's plan
(:func:`pr1_eval.generate.plan.build_plan`) both checks and loads every input once. The plan runs
them in :data:`CHECK_ORDER`, the order a user would fix them, and raises the first problem as a
one-line :class:`~pr1_eval.errors.Pr1EvalError` that says what, where and how to fix it.

Nothing here imports torch, transformers or vllm.
"""

from __future__ import annotations

import os
from pathlib import Path

from pr1_eval.decoding.factory import DecodingSpec
from pr1_eval.engines.base import is_greedy
from pr1_eval.engines.factory import resolve_engine_name
from pr1_eval.engines.openai_client import normalise_base_url
from pr1_eval.errors import Pr1EvalError, describe_exception
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.resume import check_resumable
from pr1_eval.inputs.model_files import WEIGHT_PATTERNS, check_tokenizer_files
from pr1_eval.inputs.prompts import PromptTemplate, load_template
from pr1_eval.inputs.tasks import LoadedTask, load_task
from pr1_eval.records.run import RunRecord
from pr1_eval.store.discovery import find_runs
from pr1_eval.store.run_store import RunStore

HUB_TIMEOUT_S = 10.0
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def check_k(k: int) -> None:
    if k < 1:
        raise Pr1EvalError(f"-k must be at least 1 (samples per problem), got {k}")


def check_greedy(temperature: float, k: int) -> None:
    """Greedy decoding gives one response per problem, so it needs ``-k 1``."""
    if is_greedy(temperature) and k > 1:
        raise Pr1EvalError(f"--temperature {temperature:g} needs -k 1: it is greedy decoding, so all {k} samples of a "
                           "problem would be the same response (and vLLM refuses n > 1 when greedy); pass -k 1, or a "
                           "temperature above 0 for k samples")


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise Pr1EvalError(f"--limit must be at least 1 problem per task, got {limit}; drop it to use every problem")


def check_tasks(names: list[str], data_dir: str | None, limit: int | None, source: str = "auto") -> dict[str, LoadedTask]:
    """Every task's data, loaded and validated (names, files, rows, packaged hashes)."""
    if not names:
        raise Pr1EvalError("no task given; pass e.g. --tasks aime24,amc23")
    loaded = {}
    for name in names:
        loaded[name] = load_task(name, data_dir, limit) if source == "auto" else load_task(name, data_dir, limit, source)
        if not loaded[name].problems:
            raise Pr1EvalError(f"task {name!r}: no problems in {loaded[name].source}; check the file")
    return loaded


def check_prompt(prompt: str, data_dir: str | None) -> PromptTemplate:
    """The prompt template (a known name or a file with ``{problem}``)."""
    return load_template(prompt, Path(data_dir).expanduser() if data_dir else None)


def check_engine(engine: str) -> str:
    """``--engine`` resolved (``auto`` → ``vllm`` or ``hf``), and installed when named."""
    chosen = resolve_engine_name(engine)
    if engine == "vllm":
        from pr1_eval.engines.vllm_engine import vllm_available

        if not vllm_available():
            raise Pr1EvalError("--engine vllm: vllm is not installed in this environment; install it in its own "
                               "environment (pip install -e '.[vllm]') or pass --engine hf")
    return chosen


def check_decoding(config: RunConfig, engine_name: str) -> DecodingSpec:
    """The decoding mode and its parameters fit together and the engine; returns them as one value."""
    if config.paths < 1 or config.max_blocks < 1:
        raise Pr1EvalError(f"--paths and --max-blocks must be at least 1, got {config.paths} and {config.max_blocks}")
    if config.decoding == "structured" and engine_name == "vllm":
        raise Pr1EvalError("--decoding structured drives a transformers model itself; pass --engine hf")
    if config.decoding == "structured" and engine_name == "openai":
        raise Pr1EvalError("--decoding structured needs a per-token attention mask (sibling paths hidden) and position "
                           "ids, which no completions API takes; use --decoding forkjoin with --engine openai, or "
                           "--engine hf for structured")
    spec = DecodingSpec.of(config)
    spec.decoder()  # each decoder checks its own parameters
    return spec


def check_scaleout(ray: str | None, replicas: int | None, gpus_per_replica: int | None, engine_given: bool) -> None:
    """Settings that only make sense together: the Ray options need ``--ray``, which loads its own engines."""
    if ray is None and (replicas is not None or gpus_per_replica is not None):
        raise Pr1EvalError("--replicas and --gpus-per-replica need --ray (e.g. --ray auto)")
    if ray is not None and engine_given:
        raise Pr1EvalError("--ray builds an engine inside every replica; it cannot use an engine loaded here")


def check_openai(config: RunConfig) -> None:
    """``--engine openai``: a server URL, no ``--ray`` (the server is the scale-out); the options of
    the other engines are refused later, where every engine's are (``make_engine``)."""
    url = config.engine_options.get("base_url")
    if not url:
        raise Pr1EvalError("--engine openai needs --base-url (the server's OpenAI-compatible API, e.g. "
                           "http://127.0.0.1:8000/v1)")
    normalise_base_url(str(url))
    if config.ray is not None:
        raise Pr1EvalError("--ray starts engines on a Ray cluster, but --engine openai generates on a server; to use "
                           "many GPUs run many servers behind one router and pass its URL (docs/guides/scale-out.md)")


def check_served_model(model: str, tokenizer: str | None, revision: str | None = None) -> str:
    """``--engine openai``: the weights are the server's, so a model folder needs only its tokenizer
    files; with ``--tokenizer`` the ``--model`` is only the run's name for the model."""
    if tokenizer:
        folder = Path(tokenizer).expanduser()
        if folder.is_dir():
            check_tokenizer_files(folder, "--tokenizer folder")
        elif _looks_like_path(tokenizer):
            raise Pr1EvalError(f"--tokenizer {tokenizer}: no such folder; pass the folder of the served model's tokenizer")
        return "served"
    path = Path(model).expanduser()
    if path.is_dir():
        check_tokenizer_files(path)
        return "served"
    if _looks_like_path(model):
        raise Pr1EvalError(f"--model {model}: no such folder; with --engine openai pass the served model's folder (for "
                           "its tokenizer), or --tokenizer DIR")
    check_hub_model(model, revision)
    return "served"


# ----- model ----------------------------------------------------------------------------------
def _looks_like_path(model: str) -> bool:
    """A hub id is ``name`` or ``org/name``; anything else (``./m``, ``/ckpt/x``, ``a/b/c``) is a path."""
    return model.startswith(("/", ".", "~")) or "\\" in model or model.count("/") > 1 or model.endswith("/")


def check_local_model(path: Path) -> None:
    """A Hugging Face model folder: config.json, tokenizer files and weights."""
    if not path.is_dir():
        raise Pr1EvalError(f"--model {path} is a file; pass the model's folder (the one holding config.json)")
    if not (path / "config.json").is_file():
        hint = "pass the folder that holds the model's config.json"
        if (path / "actor").is_dir() or any(path.glob("model_world_size_*")):
            hint = (f"it looks like a VERL checkpoint: merge it first (python -m verl.model_merger merge --backend fsdp "
                    f"--local_dir {path / 'actor' if (path / 'actor').is_dir() else path} --target_dir {path / 'hf'}) "
                    "and pass the merged folder")
        raise Pr1EvalError(f"model folder {path} has no config.json; {hint}")
    check_tokenizer_files(path)
    if not any(next(path.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        raise Pr1EvalError(f"model folder {path} has config.json but no weights (*.safetensors or pytorch_model*.bin); "
                           "was the checkpoint saved or copied completely?")


def hub_offline_reason() -> str | None:
    """Why the hub must not be contacted (an offline variable is set), or None."""
    for name in _OFFLINE_ENV:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{name}=1 is set"
    return None


def _in_hub_cache(repo_id: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json", revision=revision), str)
    except Exception:  # a malformed cache entry: let the loader decide
        return False


def check_hub_model(repo_id: str, revision: str | None = None) -> str:
    """A hub id: in the local cache ("hub-cache"), or found on a reachable hub ("hub")."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise Pr1EvalError(f"--model {repo_id!r} is neither an existing folder nor a valid hub id (org/name)") from None
    if _in_hub_cache(repo_id, revision):
        return "hub-cache"
    fix = (f"download it where the hub is reachable (hf download {repo_id} --local-dir DIR), copy DIR here and "
           "pass --model DIR")
    if "/" not in repo_id:
        fix += f" (if {repo_id!r} was meant as a folder: there is no such folder here)"
    offline = hub_offline_reason()
    if offline:
        raise Pr1EvalError(f"--model {repo_id!r} is a hub id, but the Hugging Face hub is unreachable ({offline}) and "
                           f"the model is not in the local cache; {fix}")
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        model_info(repo_id, revision=revision, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        raise Pr1EvalError(f"--model {repo_id!r} is gated on the hub: accept its licence on its hub page and log in "
                           "(hf auth login), or pass a local folder") from None
    except RevisionNotFoundError:
        raise Pr1EvalError(f"--model {repo_id!r} has no revision {revision!r} on the hub; check --revision") from None
    except RepositoryNotFoundError:
        raise Pr1EvalError(f"--model {repo_id!r}: no such model on the hub (or it is private: log in with "
                           "hf auth login); check the id, or pass a local folder") from None
    except Exception as exc:
        raise Pr1EvalError(f"--model {repo_id!r} is a hub id, but the Hugging Face hub is unreachable "
                           f"({describe_exception(exc, 160)}) and the model is not in the local cache; {fix}") from None
    return "hub"


def check_model(model: str, revision: str | None = None) -> str:
    """A model folder that exists and is complete, or a hub id the loader will find."""
    path = Path(model).expanduser()
    if path.exists():
        check_local_model(path)
        return "local"
    if _looks_like_path(model):
        raise Pr1EvalError(f"--model {model}: no such folder; pass an existing model folder or a hub id (org/name)")
    return check_hub_model(model, revision)


# ----- output folder --------------------------------------------------------------------------
def check_output(out: Path, planned: RunRecord | None = None) -> RunRecord | None:
    """The run folder can be written and holds no conflicting run.

    Returns None for a new run; for a folder that holds this run already, the record to write as
    it resumes: ``planned`` (model, k, sampling, decoding, prompt, shard) checked against the stored
    run by the resume rule (:func:`~pr1_eval.generate.resume.check_resumable`), keeping its tasks and
    start time (without ``planned``: the stored record).
    """
    if out.exists() and not out.is_dir():
        raise Pr1EvalError(f"--out {out} is a file; pass a folder for the run")
    store = RunStore(out)
    if not store.exists():
        if store.part_paths():
            raise Pr1EvalError(f"--out {out} holds samples but no run.json, so it cannot be resumed safely; "
                               "pass a new --out (or restore its run.json)")
        if out.is_dir() and (below := find_runs(out)):
            raise Pr1EvalError(f"--out {out} holds {len(below)} run(s) below it ({', '.join(map(str, below[:3]))}"
                               f"{' …' if len(below) > 3 else ''}); a run written there would hide them from every "
                               f"search. Pass a new folder for the run (e.g. --out {out / 'new-run'})")
        _check_writable(out)
        return None
    stored = store.read_run()  # a clear error when it is not valid JSON or not a run record
    return stored if planned is None else check_resumable(store, planned)


def _check_writable(out: Path) -> None:
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise Pr1EvalError(f"--out {out}: cannot write in {existing}; pass a folder you can write to")


#: The order of the plan's checks, the order a user fixes a command line in: the numbers and
#: options alone first (an option that cannot work is reported as itself, never as a side effect
#: of a later check: ``--temperature 0 -k 4`` into an old run's folder is the greedy rule, not
#: "holds a run with different settings"), then the inputs to read, the output folder, and last
#: the model (which may need the network). The scale-out options (:func:`check_scaleout`) are
#: checked with the decoding, before the output folder. ``tests/pr1_eval/generate/test_preflight.py``
#: checks the order.
CHECK_ORDER = ("k", "limit", "greedy", "sampling", "tasks", "prompt", "engine", "decoding", "output", "model")
