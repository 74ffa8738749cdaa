"""A tiny Qwen3-architecture Parallel-R1 look-alike, built offline in seconds.

Why it exists: every stage of pr1-eval (engines, fork-join and structured decoding, structure
parsing, grading, the run store, analysis) must be testable on a laptop or CI runner without a
GPU, without the hub and without downloading a multi-gigabyte checkpoint. A real Parallel-R1
checkpoint differs from any other causal LM in three ways this model reproduces:

* the six tags are single *special* tokens (so fork-join decoding can stop on ``</Path>`` and
  ``skip_special_tokens=False`` decoding keeps them), and look-alikes such as ``<Parallelogram>``
  or ``<path>`` are plain text;
* prompts go through a Qwen ChatML chat template with no system message;
* responses contain well-formed blocks and end with ``Final Answer: …``.

Three kinds (:data:`KINDS`). ``random`` (:func:`build_tiny_model`) is untrained and emits noise;
it is enough for loading, tokenisation and engine plumbing. ``trained``
(:func:`build_trained_tiny_model`) is fitted with a causal mask on synthetic traces
(:mod:`pr1_eval.testing.tiny_traces`) so that samples at temperature 1.0 are mostly well formed, even for
real benchmark problems. ``trained-structured`` is fitted the Unseen way (sibling paths hidden,
:mod:`pr1_eval.testing.tiny_training`), the model ``--decoding structured`` is for.

A seed gives the same bytes on every run of a machine, whatever the thread count or load
(training is step-counted and single-threaded; the manifest records the weights' sha256). The
tests, ``pr1-eval demo`` and ``pr1-eval tiny-model`` share one copy per machine through
:func:`cached_tiny_model`, keyed by kind, seed, the training template's sha256 and
:data:`CACHE_VERSION`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pr1_eval.engines.library_bars import transformers_bars_off
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.paper_settings import PAPER_PROMPT
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.testing import tiny_traces
from pr1_eval.testing.tiny_training import ProgressFn, Recipe, StepReporter, train_tiny_model

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, IM_START, IM_END, *T.ALL_TAGS)
"""Special tokens, in id order: they take ids 0..8 in every tiny tokenizer."""

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Qwen's ChatML, minus Qwen's default system message (Parallel-R1 prompts carry none)."""

MANIFEST = "tiny_model.json"
CACHE_ENV = "PR1_TINY_CACHE"
CACHE_VERSION = "v6"
"""Part of every cache folder name: bump it whenever tokenizer, traces, dimensions or recipe change,
so a model built by older code is never reused."""
KINDS = ("random", "trained", "trained-structured")
DEFAULT_PROMPT = PAPER_PROMPT
_FINAL_ANSWER_RE = re.compile(r"^Final Answer:", re.MULTILINE)
TRAINED_DIMS: dict[str, int] = {"hidden_size": 96, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 24}
"""The trained kinds are a little wider than the random default (64 wide learns the format too
slowly); 96 learnt as fast per step as 128 did in trials, at two thirds of the compute."""
CAUSAL_RECIPE = Recipe(steps=220, mask="causal")
STRUCTURED_RECIPE = Recipe(steps=300, mask="structured", causal_fraction=0.3)
"""The Unseen kind needs more steps: its blocks are longer and every path must learn alone
(measurements in :mod:`pr1_eval.testing.tiny_training`). A third of its batches are ordinary
two- or three-path traces under the causal mask: the Unseen RL rollout is fork-join, which writes
exactly two paths end to end and then the summary, a layout the structured mask's six-path blocks
never show. Without them the start model wrote ``</Path>`` inside the summary on some seeds: well-formed
fork-join rollouts 0.48 / 0.70 / 0.80 / 0.31 for seeds 0 / 1000 / 1001 / 1002 (64 rollouts each, the
Unseen stage's sampling), and the seed-1002 draw's Unseen reward fell to −1 on every rollout; with them
0.92 / 0.94 / – / 0.94 (docs/performance.md, issue 52)."""


def build_tokenizer(long_template: str, seed: int = 0, vocab_size: int = 800) -> Any:
    """Train a byte-level BPE on the built-in corpus and wrap it as a ``PreTrainedTokenizerFast``.

    Byte-level so any benchmark text (LaTeX, unicode) round-trips; trained in code so nothing is
    downloaded. The special tokens are given to the trainer first (ids 0..8) and registered as
    special added tokens, which makes each tag one id wherever it appears, even glued to text.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tiny_traces.tokenizer_corpus(long_template, seed), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        extra_special_tokens=[IM_START, *T.ALL_TAGS],
        model_max_length=4096,
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _model_config(
    tokenizer: Any, hidden_size: int, layers: int, heads: int, kv_heads: int, head_dim: int, intermediate: int | None
) -> Any:
    """A Qwen3 config with tiny dimensions; tied embeddings keep the parameter count small."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate or hidden_size * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _dims_of(config: Any) -> dict[str, int]:
    return {"hidden_size": config.hidden_size, "layers": config.num_hidden_layers, "heads": config.num_attention_heads,
            "kv_heads": config.num_key_value_heads, "head_dim": config.head_dim,
            "intermediate_size": config.intermediate_size, "vocab_size": config.vocab_size}


def _init_model(template: str, seed: int, dims: dict[str, Any]) -> tuple[Any, Any]:
    """``(tokenizer, model)``: the BPE tokenizer fitted on traces with ``template``, and a Qwen3
    model with random weights from ``seed`` (the caller's torch RNG is left alone)."""
    import torch
    from transformers import GenerationConfig, Qwen3ForCausalLM

    tokenizer = build_tokenizer(template, seed)
    config = _model_config(tokenizer, dims["hidden_size"], dims["layers"], dims["heads"], dims["kv_heads"],
                           dims["head_dim"], dims.get("intermediate_size"))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return tokenizer, model


def _save(out: Path, model: Any, tokenizer: Any, manifest: dict[str, Any]) -> Path:
    """Write the model, its tokenizer and ``tiny_model.json`` (with the weights' sha256) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with _quiet_transformers():
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    _write_manifest(out, {**manifest, "dims": _dims_of(model.config), "cache_version": CACHE_VERSION,
                          "weights_sha256": file_sha256(out / "model.safetensors")})
    return out


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    head_dim: int = 16,
    intermediate_size: int | None = None,
    prompt: str | None = None,
) -> Path:
    """Build a randomly initialised tiny Qwen3 model and its tokenizer into ``out_dir``.

    Offline and deterministic given ``seed``. The tokenizer is fitted on traces that use the
    template ``prompt`` (a name or a file; default the paper's), so its words are cheap tokens.
    The directory loads with ``AutoModelForCausalLM``/``AutoTokenizer.from_pretrained`` like any
    checkpoint.
    """
    start = time.perf_counter()
    template = tiny_traces.load_template_text(prompt or DEFAULT_PROMPT)
    dims = {"hidden_size": hidden_size, "layers": layers, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
            "intermediate_size": intermediate_size}
    tokenizer, model = _init_model(template, seed, dims)
    manifest = {"kind": "random", "seed": seed, "template": _template_record(prompt, template),
                "build_seconds": round(time.perf_counter() - start, 3)}
    return _save(Path(out_dir), model, tokenizer, manifest)


def build_trained_tiny_model(
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    *,
    structured: bool = False,
    prompt: str | None = None,
    recipe: Recipe | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Build (with :data:`TRAINED_DIMS`) and train a tiny model into ``out_dir``.

    ``structured`` trains under the Unseen mask on Unseen traces (kind ``trained-structured``),
    otherwise under the causal mask (kind ``trained``). The long template mixed into training is
    ``prompt`` (default the paper's, read through :mod:`pr1_eval.inputs.prompts`). Deterministic given
    the arguments: a fixed number of steps on one thread, whatever the machine's load.
    """
    start, cpu_start = time.perf_counter(), time.process_time()
    template = tiny_traces.load_template_text(prompt or DEFAULT_PROMPT)
    recipe = recipe or (STRUCTURED_RECIPE if structured else CAUSAL_RECIPE)
    tokenizer, model = _init_model(template, seed, TRAINED_DIMS)
    stats = train_tiny_model(model, tokenizer, template, recipe, seed, progress)
    manifest = {"kind": "trained-structured" if structured else "trained", "seed": seed,
                "template": _template_record(prompt, template), **stats,
                "build_seconds": round(time.perf_counter() - start, 3),
                "build_cpu_seconds": round(time.process_time() - cpu_start, 3)}
    return _save(Path(out_dir), model, tokenizer, manifest)


def _template_record(prompt: str | None, text: str) -> dict[str, str]:
    return {"prompt": prompt or DEFAULT_PROMPT, "sha256": _sha256_text(text)}


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes (the manifest records the weights' so two builds compare at a glance)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _write_manifest(out: Path, fields: dict[str, Any]) -> None:
    """Merge ``fields`` into ``tiny_model.json`` (what was built, how, and how long it took)."""
    path = out / MANIFEST
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(fields)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_manifest(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a tiny model directory ({} when absent)."""
    path = Path(model_dir) / MANIFEST
    return dict(json.loads(path.read_text())) if path.is_file() else {}




_quiet_transformers = transformers_bars_off  # the one switch (pr1_eval.engines.library_bars)


def sample_responses(
    model_dir: str | os.PathLike[str],
    problem: str = "What is 3 + 4?",
    *,
    n: int = 16,
    seed: int = 0,
    template: str | None = None,
    max_new_tokens: int = 120,
    temperature: float = 1.0,
) -> list[str]:
    """``n`` sampled responses to ``problem``, rendered the way the harness renders prompts.

    Pure temperature sampling (no top-k/top-p), decoded with ``skip_special_tokens=False`` so the
    tags survive; the eos and anything after it (padding) are cut off, as the harness does.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    message = (template or tiny_traces.paper_template()).replace("{problem}", problem)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
    )
    encoded = tokenizer([prompt] * n, return_tensors="pt", add_special_tokens=False)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        output = model.generate(
            **encoded, do_sample=True, temperature=temperature, top_k=0, top_p=1.0, max_new_tokens=max_new_tokens
        )
    texts = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=False)
    return [text.split(tokenizer.eos_token)[0].replace(tokenizer.pad_token, "") for text in texts]


def format_rates(texts: list[str]) -> dict[str, float]:
    """Share of ``texts`` that are well formed *and* contain a block, and that have a
    ``Final Answer:`` line: the two things the trained tiny model is for."""
    if not texts:
        return {"well_formed_with_block": 0.0, "final_answer": 0.0}
    parsed = [parse_structure(text) for text in texts]
    well_formed = sum(s.format_ok and s.has_parallel for s in parsed)
    final = sum(bool(_FINAL_ANSWER_RE.search(text)) for text in texts)
    return {"well_formed_with_block": well_formed / len(texts), "final_answer": final / len(texts)}


def cache_root() -> Path:
    """Folder holding the shared tiny models: ``$PR1_TINY_CACHE`` or ``~/.cache/pr1-eval``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pr1-eval"


def cache_path(kind: str = "trained", *, seed: int = 0, prompt: str | None = None) -> Path:
    """Where :func:`cached_tiny_model` keeps the model of ``kind``/``seed`` trained with ``prompt``.

    The name holds everything the bytes depend on: kind, :data:`CACHE_VERSION`, seed and the
    first 12 hex digits of the template's sha256 (an edited template is a different model).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown tiny model kind {kind!r}; expected one of {KINDS}")
    template = tiny_traces.load_template_text(prompt or DEFAULT_PROMPT)
    return cache_root() / f"tiny-{kind}-{CACHE_VERSION}-seed{seed}-{_sha256_text(template)[:12]}"


def is_complete(model_dir: str | os.PathLike[str], kind: str) -> bool:
    """A folder that a finished build of ``kind`` by this code version wrote."""
    manifest = read_manifest(model_dir)
    return manifest.get("kind") == kind and manifest.get("cache_version") == CACHE_VERSION


def cached_tiny_model(
    kind: str = "trained", *, seed: int = 0, prompt: str | None = None, progress: ProgressFn | None = None
) -> Path:
    """A tiny model of ``kind`` (:data:`KINDS`), built once per machine and reused.

    Tests, ``demo`` and ``tiny-model`` share it across processes: the first caller builds into a
    temporary sibling folder under an exclusive file lock and renames it into place, so a
    concurrent caller either waits for the lock or finds the finished folder, and an interrupted
    build leaves no half model at the final path. Trained kinds report progress on stderr while
    they build (``progress`` overrides how).
    """
    target = cache_path(kind, seed=seed, prompt=prompt)
    if is_complete(target, kind):
        return target
    from filelock import FileLock

    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{target.name}.lock")):
        if is_complete(target, kind):
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
        try:
            if kind == "random":
                build_tiny_model(staging, seed=seed, prompt=prompt)
            else:
                reporter = progress or StepReporter(f"training the {kind} tiny model")
                build_trained_tiny_model(staging, seed, structured=kind == "trained-structured", prompt=prompt,
                                         progress=reporter)
            for path in (staging, *staging.iterdir()):  # mkdtemp and safetensors write private files
                path.chmod(0o755 if path.is_dir() else 0o644)
            if target.exists():  # a folder without a finished manifest: left by something else; replace it
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def copy_tiny_model(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Copy a model folder's files into ``dest`` (created; same-named files replaced)."""
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    for path in Path(source).iterdir():
        if path.is_file():
            shutil.copyfile(path, out / path.name)
    return out


def tiny_model_into(
    dest: str | os.PathLike[str], kind: str = "trained", *, seed: int = 0, prompt: str | None = None
) -> tuple[Path, bool]:
    """Put the cached model of ``kind`` into ``dest`` (building it first if the cache lacks it);
    returns ``(dest, reused)``, ``reused`` being whether the cache already held it.

    What ``pr1-eval tiny-model DIR`` and ``pr1-eval demo`` do, so that they, the tests and every
    other caller on a machine train each model once.
    """
    reused = is_complete(cache_path(kind, seed=seed, prompt=prompt), kind)
    source = cached_tiny_model(kind, seed=seed, prompt=prompt)
    out = Path(dest)
    if out.resolve() != source.resolve() and read_manifest(out) != read_manifest(source):
        copy_tiny_model(source, out)
    return out, reused
