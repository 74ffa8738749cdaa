"""The OpenAI-compatible endpoint engine: ``--engine openai --base-url http://HOST:PORT/v1``.

For models already served by ``vllm serve`` or SGLang, one server or many behind a router (the
multi-node path when in-process data parallelism is not wanted: ``docs/guides/scale-out.md``).
Held against vLLM 0.34's server (``vllm/entrypoints/openai/completion/protocol.py`` and
``serving.py``):

* **prompts are token ids**, rendered here by the run's tokenizer and chat template (the model
  folder's, or ``--tokenizer``), so the server gets exactly what the HF and vLLM engines are given;
  ``POST /completions`` takes ``prompt`` as a list of ids;
* **tags kept**: ``skip_special_tokens: false`` (the six tags are special tokens),
  ``spaces_between_special_tokens: false``, ``include_stop_str_in_output: true``;
* **token ids back**: ``return_token_ids: true`` (vLLM answers ``choices[].token_ids``); a server
  that returns none gets its ``text`` tokenised by the same tokenizer (the only place a count can
  differ from the sampled ids, for a non-canonical tokenisation). The text written to the record
  is always the tokenizer's decoding of the kept ids, byte-identical to the other engines';
* **stops** by ``stop_token_ids`` (fork-join's ``</Path>``, ``</Summary>``, ``<Parallel>``): a choice
  whose ``stop_reason`` is a requested id, or whose last id is one, is ``stop`` with the id kept;
  ``stop`` otherwise is an EOS (removed, as every engine removes it); ``length``, ``abort`` and
  ``error`` stay themselves; anything else is ``error``;
* **n and seeds**: one HTTP request per :class:`GenerationRequest` with ``n`` and its ``seed`` (the
  decoders derive it from the run seed, the problem and the sample: vLLM seeds choice ``j`` with
  ``seed + j``), so a rerun against the same server reproduces where the server honours ``seed``;
  greedy requests go as ``n = 1`` and are repeated (vLLM refuses ``n > 1`` when greedy);
* **the model length**: ``GET /models`` gives the served name and, from vLLM, ``max_model_len``;
  budgets are clamped to what the prompt leaves and a full prompt is not sent (the vLLM engine's
  rule), so one long prompt never fails a run with a 400;
* **concurrency**: every request of a ``generate`` call is in flight at once up to
  ``max_concurrency`` (a thread pool over one pooled HTTP client: the work is waiting, not
  computing); the server batches them, as vLLM batches one ``LLM.generate`` call.

Structured decoding is refused for this engine (``pr1_eval.generate.preflight``): it needs a 4-D
attention mask and position ids per token, which no completions API takes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig, is_greedy, request_sampling
from pr1_eval.engines.hf import load_tokenizer
from pr1_eval.engines.openai_client import REQUEST_TIMEOUT_S, OpenAIClient
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol.eos import model_eos_token_ids

MAX_CONCURRENCY = 64
"""Requests in flight by default: enough to keep a vLLM server's batch full (each carries ``n``
sequences), few enough not to queue minutes of work behind a single replica."""
API_KEY_ENV = "OPENAI_API_KEY"


GENERIC_FOLDERS = frozenset({"hf", "huggingface", "actor", "model"})
"""Folder names that say nothing of which checkpoint it is (VERL's merge writes ``global_step_N/hf``)."""


def model_names(model: str) -> set[str]:
    """The names a server may serve ``--model`` under: as given, its folder name, and the nearest
    folder above it that names the checkpoint (``global_step_100`` for ``…/global_step_100/hf``)."""
    path = Path(model.rstrip("/"))
    names = {model, str(path), path.name}
    named = next((part for part in reversed(path.parts) if part not in GENERIC_FOLDERS and part != "/"), None)
    return names | ({named} if named else set())


def pick_served_model(listed: Sequence[str], wanted: str | None, model: str, where: str, exact: bool = False) -> str:
    """The served model to ask for: ``wanted`` (``--served-model``) when listed; else the one whose
    name is ``--model`` or its folder name; else (unless ``exact``: a sweep, where every checkpoint
    must be served under its own name) the only one served. Why not the first of many: a run must
    never score another model than the one it names."""
    if wanted:
        if wanted in listed:
            return wanted
        raise Pr1EvalError(f"--served-model {wanted!r} is not served at {where} (it serves: {', '.join(listed) or 'nothing'}); "
                           "pass one of those")
    names = model_names(model)
    matching = [m for m in listed if m in names or Path(m.rstrip("/")).name in names]
    if len(matching) == 1:
        return matching[0]
    if len(listed) == 1 and not matching and not exact:
        return listed[0]
    if exact:
        raise Pr1EvalError(f"{where} serves no model named like {model} (it serves: {', '.join(listed) or 'nothing'}); "
                           "serve each checkpoint under its folder's name (--served-model-name)")
    raise Pr1EvalError(f"{where} serves {len(listed)} models ({', '.join(listed) or 'none'}); pass --served-model NAME "
                       "to say which one this run scores")


class OpenAIEngine:
    """Generation through an OpenAI-compatible completions endpoint (see the module docstring)."""

    name = "openai"
    #: Told (completions done, completions requested) as the requests of a ``generate`` call come
    #: back (set by the run's progress display, as on the vLLM engine; None: nobody listens).
    on_call_progress: Callable[[int, int], None] | None = None

    def __init__(self, model_path: str, *, base_url: str, api_key: str | None = None, served_model: str | None = None,
                 tokenizer: str | None = None, max_concurrency: int = MAX_CONCURRENCY,
                 request_timeout: float = REQUEST_TIMEOUT_S, record_logprobs: bool = False,
                 exact_model: bool = False) -> None:
        if max_concurrency < 1:
            raise Pr1EvalError(f"--max-concurrency must be at least 1, got {max_concurrency}")
        if request_timeout <= 0:
            raise Pr1EvalError(f"--request-timeout must be above 0 seconds, got {request_timeout:g}")
        self.model_path = model_path
        self.tokenizer_from = source = tokenizer or model_path
        self._tokenizer = load_tokenizer(source)
        # the EOS set of the checkpoint the tokenizer comes from, as the server (vLLM) computes it
        self.eos_token_ids = set(model_eos_token_ids(source, self._tokenizer))
        self.max_concurrency = max_concurrency
        self.record_logprobs = record_logprobs
        self.client = OpenAIClient(base_url, api_key or os.environ.get(API_KEY_ENV) or None,
                                   timeout_s=request_timeout, max_connections=max_concurrency)
        try:
            card = self._served_card(served_model, exact_model)
        except BaseException:
            self.client.close()
            raise
        self.max_model_len: int | None = int(card["max_model_len"]) if card.get("max_model_len") else None
        self.served_root = card.get("root")
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="pr1-openai")

    def _served_card(self, wanted: str | None, exact: bool) -> dict[str, Any]:
        """``GET /models``: the card of the model this run asks for (:func:`pick_served_model`)."""
        where = f"{self.client.public_base_url}/models"
        models = self.client.get("/models")
        cards = [m for m in (models.get("data") or []) if isinstance(m, dict)] if isinstance(models, dict) else []
        self.served_model = pick_served_model([str(m.get("id")) for m in cards], wanted, self.model_path, where, exact)
        return next(m for m in cards if str(m.get("id")) == self.served_model)

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def describe(self) -> dict[str, Any]:
        """What ``run.json`` needs to replay the run: the server (no secrets) and the model it served."""
        return {
            "backend": "openai", "base_url": self.client.public_base_url, "served_model": self.served_model,
            "served_root": self.served_root, "max_model_len": self.max_model_len,
            "max_concurrency": self.max_concurrency, "api": "completions, prompt as token ids",
            "tokenizer": self.tokenizer_from,
        }

    def _budget(self, request: GenerationRequest, sampling: SamplingConfig) -> int:
        budget = request.max_new_tokens if request.max_new_tokens is not None else sampling.max_new_tokens
        return budget if self.max_model_len is None else min(budget, self.max_model_len - len(request.prompt_token_ids))

    def request_body(self, request: GenerationRequest, sampling: SamplingConfig, budget: int) -> dict[str, Any]:
        """The ``POST /completions`` body of one request (greedy: ``n = 1``)."""
        sampling = request_sampling(request, sampling)
        body: dict[str, Any] = {
            "model": self.served_model, "prompt": list(request.prompt_token_ids),
            "n": 1 if is_greedy(sampling.temperature) else request.n, "max_tokens": budget,
            "temperature": sampling.temperature, "top_p": sampling.top_p,
            "stop_token_ids": list(request.stop_token_ids), "skip_special_tokens": False,
            "spaces_between_special_tokens": False, "include_stop_str_in_output": True, "return_token_ids": True,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if sampling.top_k and sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        if self.record_logprobs:
            body["logprobs"] = 0
        return body

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        results: list[list[Completion]] = [[Completion([], "", "length") for _ in range(r.n)] for r in requests]
        todo = [(i, r, self._budget(r, sampling)) for i, r in enumerate(requests)]
        todo = [(i, r, b) for i, r, b in todo if b > 0 and r.n > 0]
        futures = [(i, r, self._pool.submit(self.client.post, "/completions", self.request_body(r, sampling, b)))
                   for i, r, b in todo]
        listener = self.on_call_progress
        if listener is not None:
            sizes = {id(f): r.n for _, r, f in futures}
            total, done = sum(sizes.values()), 0
            listener(0, total)
            for future in as_completed([f for *_, f in futures]):
                done += sizes[id(future)]
                listener(done, total)
        for i, request, future in futures:
            results[i] = self._completions(future.result(), request)
        return results

    def _completions(self, answer: Any, request: GenerationRequest) -> list[Completion]:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices:
            raise Pr1EvalError(f"{self.client.public_base_url}/completions answered without choices ({str(answer)[:160]}); "
                               "is it an OpenAI-compatible completions endpoint?")
        choices = sorted(choices, key=lambda c: int(c.get("index", 0)))
        out = [self._to_completion(c, request) for c in choices]
        if len(out) == 1 and request.n > 1:  # greedy: one sent, repeated
            first = out[0]
            out += [replace(first, token_ids=list(first.token_ids),
                            logprobs=None if first.logprobs is None else list(first.logprobs))
                    for _ in range(request.n - 1)]
        if len(out) != request.n:
            raise Pr1EvalError(f"{self.client.public_base_url}/completions returned {len(out)} choices for n={request.n}")
        return out

    def _token_ids(self, choice: dict[str, Any]) -> list[int]:
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            return [int(t) for t in ids]
        return list(self._tokenizer.encode(str(choice.get("text") or ""), add_special_tokens=False))

    def _to_completion(self, choice: dict[str, Any], request: GenerationRequest) -> Completion:
        ids = self._token_ids(choice)
        finish, reason = choice.get("finish_reason"), choice.get("stop_reason")
        stops = set(request.stop_token_ids)
        stop = reason if isinstance(reason, int) and reason in stops else None
        if stop is None and finish == "stop" and ids and ids[-1] in stops:
            stop = ids[-1]
        if stop is not None:
            kind = "stop"
            if not ids or ids[-1] != stop:  # keep the stop token, as the engine contract says
                ids.append(stop)
        elif finish in ("length", "abort", "error"):
            kind = str(finish)
        elif finish == "stop":
            kind = "eos"
            if ids and (ids[-1] in self.eos_token_ids or ids[-1] == reason):
                ids.pop()
        else:
            kind = "error"
        text = self._tokenizer.decode(ids, skip_special_tokens=False)
        return Completion(ids, text, kind, stop, self._logprobs(choice, len(ids)))

    def _logprobs(self, choice: dict[str, Any], length: int) -> list[float] | None:
        if not self.record_logprobs:
            return None
        values = ((choice.get("logprobs") or {}).get("token_logprobs")) or []
        padded = [float("nan") if v is None else float(v) for v in values[:length]]
        return padded + [float("nan")] * (length - len(padded))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def __enter__(self) -> OpenAIEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
