"""Checks that run before any model loads: a mistake costs a second, not a model load.

Why: loading a 7B model (or starting vLLM on 8 GPUs) takes minutes, and a typo in a task name,
a missing prompt, a wrong ``-k``, an ``--out`` that already holds a different run, a model folder
without tokenizer files or a hub id on a machine without network used to surface only after it.
Each check is its own function so that ``run`` and a sweep over many checkpoints can call the
ones they need; :func:`preflight_run` runs them all for one :class:`~pr1_eval.generate.runner.RunConfig`,
in the order a user would fix them, and raises the first problem as a one-line
:class:`~pr1_eval.errors.Pr1EvalError` that says what, where and how to fix it.

Nothing here imports torch, transformers or vllm.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pr1_eval.errors import Pr1EvalError, describe_exception
from pr1_eval.generate.sampling_limits import check_sampling_limits
from pr1_eval.records.run import RunRecord

if TYPE_CHECKING:
    from pr1_eval.generate.runner import RunConfig
    from pr1_eval.inputs.prompts import PromptTemplate
    from pr1_eval.inputs.tasks import LoadedTask

#: Files any of which makes a folder's tokenizer loadable (as in ``pr1_eval.engines.hf``).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
#: Weight files of a Hugging Face model folder.
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin", "*.safetensors.index.json")
HUB_TIMEOUT_S = 10.0
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@dataclass(frozen=True)
class Preflight:
    """What the checks found (the run still loads everything itself)."""

    tasks: dict[str, LoadedTask]
    template: PromptTemplate
    out: Path
    resumes: bool  # the output folder holds this run already: it will be resumed
    model: str  # "local", "hub-cache" (hub id found in the local cache), "hub" or "not checked"


def check_k(k: int) -> None:
    if k < 1:
        raise Pr1EvalError(f"-k must be at least 1 (samples per problem), got {k}")


def check_greedy(temperature: float, k: int) -> None:
    """Greedy decoding gives one response per problem, so it needs ``-k 1``."""
    from pr1_eval.engines.base import is_greedy

    if is_greedy(temperature) and k > 1:
        raise Pr1EvalError(f"--temperature {temperature:g} needs -k 1: it is greedy decoding, so all {k} samples of a "
                           "problem would be the same response (and vLLM refuses n > 1 when greedy); pass -k 1, or a "
                           "temperature above 0 for k samples")


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise Pr1EvalError(f"--limit must be at least 1 problem per task, got {limit}; drop it to use every problem")


def check_tasks(names: list[str], data_dir: str | None, limit: int | None, source: str = "auto") -> dict[str, LoadedTask]:
    """Every task's data, loaded and validated (names, files, rows, packaged hashes)."""
    from pr1_eval.inputs.tasks import load_task

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
    from pr1_eval.inputs.prompts import load_template

    return load_template(prompt, Path(data_dir).expanduser() if data_dir else None)


def check_engine(engine: str) -> str:
    """``--engine`` resolved (``auto`` → ``vllm`` or ``hf``), and installed when named."""
    from pr1_eval.engines.factory import resolve_engine_name

    chosen = resolve_engine_name(engine)
    if engine == "vllm":
        from pr1_eval.engines.vllm_engine import vllm_available

        if not vllm_available():
            raise Pr1EvalError("--engine vllm: vllm is not installed in this environment; install it in its own "
                               "environment (pip install -e '.[vllm]') or pass --engine hf")
    return chosen


def check_decoding(decoding: str, engine_name: str, paths: int, max_blocks: int,
                   after_last_block: str = "end", path: dict[str, Any] | None = None) -> dict[str, Any]:
    """The decoding mode and its parameters fit together and the engine; returns its description."""
    from pr1_eval.decoding.factory import make_decoder

    if paths < 1 or max_blocks < 1:
        raise Pr1EvalError(f"--paths and --max-blocks must be at least 1, got {paths} and {max_blocks}")
    if decoding == "structured" and engine_name == "vllm":
        raise Pr1EvalError("--decoding structured drives a transformers model itself; pass --engine hf")
    return make_decoder(decoding, paths=paths, max_blocks=max_blocks, after_last_block=after_last_block,
                        path=path).describe()


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
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise Pr1EvalError(f"model folder {path} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); "
                           "copy them from the base model into that folder")
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
def check_output(out: Path, planned: RunRecord | None = None) -> bool:
    """The run folder can be written and holds no conflicting run; True when it will be resumed.

    ``planned`` (model, k, sampling, decoding, prompt, tasks) is compared with the stored run
    exactly as the runner compares them when it resumes.
    """
    from pr1_eval.store.run_store import RunStore

    if out.exists() and not out.is_dir():
        raise Pr1EvalError(f"--out {out} is a file; pass a folder for the run")
    store = RunStore(out)
    if not store.exists():
        if store.part_paths():
            raise Pr1EvalError(f"--out {out} holds samples but no run.json, so it cannot be resumed safely; "
                               "pass a new --out (or restore its run.json)")
        _check_writable(out)
        return False
    store.read_run()  # a clear error when it is not valid JSON or not a run record
    if planned is not None:
        from pr1_eval.generate.resume import check_resumable  # the runner's own rule, not a copy of it

        check_resumable(store, planned, compare_shard=False)
    return True


def _check_writable(out: Path) -> None:
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise Pr1EvalError(f"--out {out}: cannot write in {existing}; pass a folder you can write to")


def planned_run_record(config: RunConfig, template: PromptTemplate, decoding: dict[str, Any],
                       tasks: dict[str, LoadedTask]) -> RunRecord:
    """The part of the run's record that decides whether a stored run may be resumed."""
    from pr1_eval.records.provenance import model_identity, now_iso
    from pr1_eval.records.run import PromptInfo, TaskEntry

    return RunRecord(
        name=None, status="running", model=model_identity(config.model, config.revision, config.step), k=config.k,
        sampling=config.sampling().to_dict(), decoding=decoding, prompt=PromptInfo(sha256=template.sha256),
        tasks={name: TaskEntry(data_hash=t.data_hash, n_problems=len(t.problems)) for name, t in tasks.items()},
        started_at=now_iso())


#: The order of :func:`preflight_run`'s checks, the order a user fixes a command line in: the
#: numbers and options alone first (an option that cannot work is reported as itself, never as
#: a side effect of a later check: ``--temperature 0 -k 4`` into an old run's folder is the greedy
#: rule, not "holds a run with different settings"), then the inputs to read, the output folder,
#: and last the model (which may need the network). ``tests/pr1_eval/generate/test_preflight.py`` checks it.
CHECK_ORDER = ("k", "limit", "greedy", "sampling", "tasks", "prompt", "engine", "decoding", "output", "model")


def preflight_run(config: RunConfig, engine: Any = None) -> Preflight:
    """Every check ``pr1-eval run`` needs, in :data:`CHECK_ORDER`; raises the first problem found.

    With ``engine`` (a caller that brings its own loaded engine: tests, a sweep holding one model)
    the model path and ``--engine`` are not checked, and decoding is checked against that engine.
    """
    check_k(config.k)
    check_limit(config.limit)
    check_greedy(config.temperature, config.k)
    check_sampling_limits(config)  # every value vLLM would refuse, before anything loads
    source = getattr(config, "data_source", "auto")
    tasks = check_tasks(list(config.tasks), config.data_dir, config.limit, source)
    template = check_prompt(config.prompt, config.data_dir)
    if engine is not None:
        engine_name = str(engine.name)
    elif getattr(config, "ray", None):  # engines load in the Ray replicas: vllm need not be installed here
        engine_name = config.engine
    else:
        engine_name = check_engine(config.engine)
    from pr1_eval.decoding.factory import path_options

    decoding = check_decoding(config.decoding, engine_name, config.paths, config.max_blocks, config.after_last_block,
                              path_options(config))
    out = Path(config.out) if config.out else config.default_out()
    resumes = check_output(out, planned_run_record(config, template, decoding, tasks))
    model = check_model(config.model, config.revision) if engine is None else "not checked"
    return Preflight(tasks, template, out, resumes, model)
