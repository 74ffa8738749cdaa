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

Two kinds are offered. ``random`` (:func:`build_tiny_model`) is untrained and emits noise; it is
enough for loading, tokenisation and engine plumbing. ``trained``
(:func:`build_trained_tiny_model`) is fitted for under a minute on synthetic traces
(:mod:`pr1_eval.tiny_traces`) so that samples at temperature 1.0 are mostly well formed, even for
real benchmark problems, which lets tests of decoding, parsing, metrics and dashboards see
realistic structure. Tests share one copy per machine through :func:`cached_tiny_model`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pr1_eval import tags as T
from pr1_eval import tiny_traces

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
CACHE_VERSION = "v2"
KINDS = ("random", "trained")
MAX_TRAIN_THREADS = 4
"""Matrices this small gain nothing from more threads; on a many-core box more only add overhead."""
_FINAL_ANSWER_RE = re.compile(r"^Final Answer:", re.MULTILINE)
TRAINED_DIMS: dict[str, int] = {"hidden_size": 96, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 24}
"""The trained kind is a little wider than the random default (64 wide learns the format too
slowly); 96 learnt as fast per step as 128 did in trials, at two thirds of the compute."""


def build_tokenizer(seed: int = 0, vocab_size: int = 800) -> Any:
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
    tok.train_from_iterator(tiny_traces.tokenizer_corpus(seed), trainer=trainer)
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
) -> Path:
    """Build a randomly initialised tiny Qwen3 model and its tokenizer into ``out_dir``.

    Offline and deterministic given ``seed``. The directory loads with
    ``AutoModelForCausalLM``/``AutoTokenizer.from_pretrained`` like any checkpoint.
    """
    import torch
    from transformers import GenerationConfig, Qwen3ForCausalLM

    start = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(seed)
    config = _model_config(tokenizer, hidden_size, layers, heads, kv_heads, head_dim, intermediate_size)
    with torch.random.fork_rng(devices=[]):  # seed the init without disturbing the caller's RNG
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    with _quiet_transformers():
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    dims = {
        "hidden_size": hidden_size,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": config.intermediate_size,
        "vocab_size": config.vocab_size,
    }
    _write_manifest(
        out, {"kind": "random", "seed": seed, "dims": dims, "build_seconds": round(time.perf_counter() - start, 3)}
    )
    return out


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


def _encode_traces(
    tokenizer: Any, traces: list[tiny_traces.Trace], prompt_cache: dict[str, list[int]]
) -> list[tuple[list[int], list[int]]]:
    """For each trace, the token ids of its chat prompt and of its response followed by eos.

    Prompts are rendered exactly as the harness renders them (chat template, generation prompt),
    so what the model learns to continue is what it will be asked to continue. There are only a
    few hundred distinct prompts, so their ids are cached; responses are encoded in one call.
    """
    missing = sorted({t.user for t in traces} - prompt_cache.keys())
    if missing:
        rendered = [
            tokenizer.apply_chat_template([{"role": "user", "content": m}], tokenize=False, add_generation_prompt=True)
            for m in missing
        ]
        prompt_cache.update(zip(missing, tokenizer(rendered, add_special_tokens=False)["input_ids"], strict=True))
    responses = tokenizer([t.response for t in traces], add_special_tokens=False)["input_ids"]
    return [(prompt_cache[t.user], [*r, tokenizer.eos_token_id]) for t, r in zip(traces, responses, strict=True)]


def _batch(encoded: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, Any]:
    """Tensors for one step from ``(prompt ids, response ids)`` pairs: the prompt prefix all rows
    share, and the right-padded rest with labels on response tokens only.

    All rows of a step use one template, so they share the chat header and the instruction (about
    200 tokens for the paper's template). :func:`_step_loss` runs that prefix once instead of once
    per row, which makes training on the long prompt several times cheaper.
    """
    import torch

    prompts = [p for p, _ in encoded]
    shared = min(len(os.path.commonprefix(prompts)), min(len(p) for p in prompts) - 1)
    width = max(len(p) + len(r) for p, r in encoded) - shared
    ids, labels, mask = [], [], []
    for prompt, response in encoded:
        pad = width - (len(prompt) - shared + len(response))
        ids.append(prompt[shared:] + response + [pad_id] * pad)
        labels.append([-100] * (len(prompt) - shared) + response + [-100] * pad)
        mask.append([1] * (width - pad + shared) + [0] * pad)
    return {
        "prefix": torch.tensor([prompts[0][:shared]], dtype=torch.long),
        "input_ids": torch.tensor(ids),
        "labels": torch.tensor(labels),
        "attention_mask": torch.tensor(mask),
    }


def _step_loss(model: Any, batch: dict[str, Any]) -> Any:
    """Causal-LM loss of a :func:`_batch`, response tokens only.

    The shared prefix runs once (batch 1, without the LM head) and its key/value cache, repeated
    per row, is the context of every row. Gradients flow through the cache, so this is the loss of
    running each full row, for a fraction of the compute.
    """
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    if batch["prefix"].shape[1]:
        model.model(input_ids=batch["prefix"], past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(batch["input_ids"].shape[0])
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        labels=batch["labels"],
        past_key_values=cache,
        use_cache=True,
    )
    return out.loss


def _lr_at(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over 10 steps, then cosine decay to 5% of ``peak``: a short run needs both."""
    warm = min(1.0, (step + 1) / 10)
    return peak * warm * max(0.05, 0.5 * (1 + math.cos(math.pi * step / max(1, steps))))


def _batches(tokenizer: Any, rng: random.Random, batch_size: int, long_fraction: float) -> Iterator[dict[str, Any]]:
    """Endless training batches; all rows of a batch share a template and maybe a filler.

    Sharing is what lets :func:`_step_loss` run the prompt prefix once per batch. Mixing the paper's
    long template with a short one teaches the model to answer in format whatever instruction
    precedes the problem; filler (:func:`tiny_traces.filler_text`, in a share
    :data:`tiny_traces.FILLER_FRACTION` of batches) does the same for long, LaTeX-laden benchmark
    problems, and being shared it costs one row, not a batch. Rows are drawn four batches at a time
    and sorted by length, so little compute goes to padding.
    """
    pool_batches = 4
    prompt_cache: dict[str, list[int]] = {}
    while True:
        template = tiny_traces.paper_template() if rng.random() < long_fraction else tiny_traces.SHORT_TEMPLATE
        filler = tiny_traces.filler_text(rng) if rng.random() < tiny_traces.FILLER_FRACTION else None
        pool = [tiny_traces.make_trace(rng, template, filler) for _ in range(batch_size * pool_batches)]
        encoded = sorted(_encode_traces(tokenizer, pool, prompt_cache), key=lambda pair: len(pair[0]) + len(pair[1]))
        chunks = [encoded[i : i + batch_size] for i in range(0, len(encoded), batch_size)]
        rng.shuffle(chunks)
        for chunk in chunks:
            yield _batch(chunk, tokenizer.pad_token_id)


def _fit(model: Any, batches: Iterator[dict[str, Any]], steps: int, lr: float, deadline: float | None) -> list[float]:
    """The optimisation loop: AdamW, clipped gradients, :func:`_lr_at` schedule. Returns the
    per-step losses (fewer than ``steps`` when ``deadline``, a ``perf_counter`` time, passed)."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    model.train()
    losses: list[float] = []
    for step in range(steps):
        if deadline is not None and time.perf_counter() > deadline:
            break
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, steps, lr)
        loss = _step_loss(model, next(batches))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.item()))
    model.eval()
    return losses


def train_tiny_model(
    model_dir: str | os.PathLike[str],
    *,
    steps: int = 300,
    seed: int = 0,
    max_seconds: float | None = 90.0,
    lr: float = 5e-3,
    batch_size: int = 24,
    long_fraction: float = 0.5,
) -> dict[str, Any]:
    """Fit the model in ``model_dir`` on synthetic traces and save the weights in place.

    Plain causal-LM training (AdamW, loss on the response and its eos only) on batches from
    :func:`_batches`. It runs ``steps`` steps, or stops once ``max_seconds`` of wall time have
    passed (``None``: never), so that a busy machine yields a weaker model rather than a stalled
    caller; the manifest records which (``stopped_early``). The defaults take 45-50 s on two
    cores shared with other work, and give ~80% well-formed samples with a block at temperature 1.0
    on "What is 3 + 4?" and ~50-65% on competition problems. Returns the manifest fields written.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start, cpu_start = time.perf_counter(), time.process_time()
    out = Path(model_dir)
    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(out)
        model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(min(threads, MAX_TRAIN_THREADS))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            batches = _batches(tokenizer, random.Random(seed), batch_size, long_fraction)
            losses = _fit(model, batches, steps, lr, None if max_seconds is None else start + max_seconds)
    finally:
        torch.set_num_threads(threads)
    with _quiet_transformers():
        model.save_pretrained(out)
    tail = losses[-20:] or [float("nan")]
    stats = {
        "kind": "trained",
        "seed": seed,
        "steps": len(losses),
        "steps_planned": steps,
        "stopped_early": len(losses) < steps,
        "train": {"lr": lr, "batch_size": batch_size, "long_fraction": long_fraction},
        "loss_first": round(losses[0], 4) if losses else None,
        "loss_final": round(sum(tail) / len(tail), 4),
        "loss_curve": [round(sum(w) / len(w), 3) for w in (losses[i : i + 25] for i in range(0, len(losses), 25))],
        "train_seconds": round(time.perf_counter() - start, 3),
        "train_cpu_seconds": round(time.process_time() - cpu_start, 3),
    }
    _write_manifest(out, stats)
    return stats


def build_trained_tiny_model(
    out_dir: str | os.PathLike[str], seed: int = 0, *, steps: int = 300, max_seconds: float | None = None
) -> Path:
    """Build (with :data:`TRAINED_DIMS`) and train a tiny model in ``out_dir``.

    No time cap by default, unlike :func:`train_tiny_model`: a given seed then always yields the
    same model, on a busy machine as on an idle one (45-50 s on two cores).
    """
    start = time.perf_counter()
    out = build_tiny_model(out_dir, seed=seed, **TRAINED_DIMS)
    train_tiny_model(out, steps=steps, seed=seed, max_seconds=max_seconds)
    _write_manifest(out, {"total_seconds": round(time.perf_counter() - start, 3)})
    return out


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load/save progress bars (noise in test logs), then restore them."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


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
    from pr1_eval.structure import parse_structure

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


def cached_tiny_model(kind: str = "trained") -> Path:
    """A tiny model of ``kind`` (``random`` or ``trained``), built once per machine and reused.

    Tests across processes share it: the first caller builds into a temporary sibling folder
    under an exclusive file lock and renames it into place, so a concurrent caller either waits
    for the lock or finds the finished folder, and an interrupted build leaves no half model at
    the final path. The cached trained model is trained to completion (no time cap) so that it
    is the same model on a busy machine as on an idle one. Bump :data:`CACHE_VERSION` whenever
    the recipe changes.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown tiny model kind {kind!r}; expected one of {KINDS}")
    root = cache_root()
    target = root / f"tiny-{kind}-{CACHE_VERSION}"
    if read_manifest(target).get("kind") == kind:
        return target
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".tiny-{kind}-{CACHE_VERSION}.lock")):
        if read_manifest(target).get("kind") == kind:
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".tiny-{kind}-", dir=root))
        try:
            if kind == "trained":
                build_trained_tiny_model(staging, seed=0, max_seconds=None)
            else:
                build_tiny_model(staging, seed=0)
            for path in (staging, *staging.iterdir()):  # mkdtemp and safetensors write private files
                path.chmod(0o755 if path.is_dir() else 0o644)
            if target.exists():  # a folder without a manifest: left by something else; replace it
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
