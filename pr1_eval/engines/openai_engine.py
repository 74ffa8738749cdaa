"""The OpenAI-compatible endpoint engine: ``--engine openai --base-url http://HOST:PORT/v1``.

For models already served (``vllm serve``, SGLang, llama.cpp, ``transformers serve``, one server
or many behind a router: ``docs/guides/scale-out.md``). At start a probe
(:mod:`pr1_eval.engines.openai_probe`) asks the server what it can do, the engine picks its mode,
prints one line naming the server's features and the mode, and refuses in one line what it cannot
do right (naming the missing feature and what adds it). Never a run that silently differs.

* **token mode** (vLLM, SGLang's server, llama.cpp): prompts are token ids, rendered here by the
  run's tokenizer and chat template (``--model``'s, or ``--tokenizer``), so the server gets exactly
  what the HF and vLLM engines are given; vLLM's fields keep the tags (``skip_special_tokens:
  false``…) and return the ids (``return_token_ids``); a server that returns none gets its text
  tokenised by the run's tokenizer. Where the server takes these fields, ``top_k: -1`` (unless
  ``--top-k``) and ``min_p: 0`` are sent too: "off" in vLLM, SGLang and llama.cpp alike, so a
  server's own sampler defaults (llama.cpp: ``top_k 40``, ``min_p 0.05``) never reshape the run's
  distribution.
* **text mode** (servers that take string prompts only: ``transformers serve``, TGI, Ollama, the
  SGLang router): the rendered prompt is sent as its text, after checking that the text reads back
  as the same ids (:func:`check_round_trip`; the six tags must survive) and, from every answer's
  ``usage.prompt_tokens``, that the server read it as that many tokens; the answer's text is
  tokenised by the run's tokenizer (token counts are the run tokenizer's).
* **stops** (fork-join's ``</Path>``, ``</Summary>``, ``<Parallel>``): by ``stop_token_ids`` where
  honoured, else by their text as ``stop`` strings; a choice whose ``stop_reason`` names a
  requested stop, whose last id is one, or whose text ends in one, is ``stop`` with the tag kept;
  ``stop`` otherwise is an EOS (removed, as every engine removes it); ``length``, ``abort`` and
  ``error`` stay themselves; anything else is ``error``. A server whose stops are trimmed and
  unreported, or ignored, cannot run fork-join: refused at the first request that needs a stop.
* **n and seeds, never a duplicate**: one request per :class:`GenerationRequest` with ``n`` and its
  ``seed`` where the server honours ``n``, else ``n`` requests of one choice with seeds ``seed + j``
  (vLLM's own seeding of choice ``j``, so both ways ask for the same streams); an answer with fewer
  choices than asked gets the missing ones asked again the same way. Only greedy requests send
  ``n = 1`` and repeat the one answer (greedy is deterministic; vLLM refuses ``n > 1`` greedy).
  Whether a rerun repeats is the server's (the probe says whether a seeded request repeats).
* **the model length**: ``GET /models`` gives the served name and, from vLLM/SGLang,
  ``max_model_len``; budgets are clamped to what the prompt leaves; a prompt that leaves no room is
  an error (never a stored empty sample).
* **concurrency**: every request of a ``generate`` call is in flight at once up to
  ``max_concurrency`` (a thread pool over one pooled HTTP client: the work is waiting, not
  computing); the server batches them.

Structured decoding is refused for this engine (``pr1_eval.generate.preflight``): it needs a 4-D
attention mask and position ids per token, which no completions API takes.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig, is_greedy, request_sampling
from pr1_eval.engines.hf import load_tokenizer
from pr1_eval.engines.openai_answers import Choice, parse_answer
from pr1_eval.engines.openai_client import REQUEST_TIMEOUT_S, OpenAIClient
from pr1_eval.engines.openai_probe import EXTENSIONS, GOOD_STOPS, Prober, ServerFeatures, special_tags
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol.eos import model_eos_token_ids
from pr1_eval.protocol.tags import single_token_tag_ids

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


def _model_len(card: dict[str, Any], where: str) -> int | None:
    """The card's ``max_model_len`` (vLLM/SGLang), checked: a positive integer, or absent."""
    value = card.get("max_model_len")
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Pr1EvalError(f"{where} gives max_model_len {str(value)[:40]!r}, not a positive number of tokens; the "
                           "server (or a proxy in front of it) is misreporting its model; check what --base-url points at")
    return value


def check_round_trip(tokenizer: Any, ids: Sequence[int], what: str) -> str:
    """``ids`` as text, after checking that the text encodes back to exactly ``ids`` (what a
    text-prompt server will read, given the same tokenizer); refuses in one line otherwise."""
    text = str(tokenizer.decode(list(ids), skip_special_tokens=False))
    back = list(tokenizer.encode(text, add_special_tokens=False))
    if back != list(ids):
        at = next((i for i, (a, b) in enumerate(zip(back, ids, strict=False)) if a != b), min(len(back), len(ids)))
        raise Pr1EvalError(f"{what} does not survive as text: its {len(ids)} token ids read back as {len(back)} "
                           f"(first difference at token {at}); a server that takes text prompts would see another "
                           "prompt; serve the model with vLLM or SGLang's launch_server (token-id prompts)")
    return text


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
        if not request_timeout > 0 or not math.isfinite(request_timeout):
            raise Pr1EvalError(f"--request-timeout must be a number of seconds above 0, got {request_timeout:g}")
        self.model_path = model_path
        self.tokenizer_from = source = tokenizer or model_path
        self._tokenizer = load_tokenizer(source)
        # the EOS set of the checkpoint the tokenizer comes from, as the server (vLLM) computes it
        self.eos_token_ids = set(model_eos_token_ids(source, self._tokenizer))
        self.max_concurrency = max_concurrency
        self.record_logprobs = record_logprobs
        self._stop_texts: dict[int, str] = {}
        self._warned_short = False
        self.client = OpenAIClient(base_url, api_key or os.environ.get(API_KEY_ENV) or None,
                                   timeout_s=request_timeout, max_connections=max_concurrency)
        try:
            card = self._served_card(served_model, exact_model)
            self.max_model_len = _model_len(card, f"{self.client.public_base_url}/models")
            self.features: ServerFeatures = Prober(self.client, self.served_model, self._tokenizer).run()
            self._refuse_what_cannot_be_done()
        except BaseException:
            self.client.close()
            raise
        self.served_root = card.get("root") if isinstance(card.get("root"), str) else None
        unchecked = " (a router's placeholder: which model answers is not checked)" if self.served_model == "unknown" else ""
        print(self.features.line(f"{self.client.public_base_url} ({self.served_model}{unchecked})"), file=sys.stderr,
              flush=True)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="pr1-openai")

    def _served_card(self, wanted: str | None, exact: bool) -> dict[str, Any]:
        """``GET /models``: the card of the model this run asks for (:func:`pick_served_model`)."""
        where = f"{self.client.public_base_url}/models"
        models = self.client.get("/models")
        cards = [m for m in (models.get("data") or []) if isinstance(m, dict)] if isinstance(models, dict) else []
        self.served_model = pick_served_model([str(m.get("id")) for m in cards], wanted, self.model_path, where, exact)
        return next(m for m in cards if str(m.get("id")) == self.served_model)

    def _refuse_what_cannot_be_done(self) -> None:
        """One line for what the probe found this server cannot do right for this tokenizer."""
        f, where = self.features, self.client.public_base_url
        if f.mode == "text":
            tags = single_token_tag_ids(self._tokenizer)
            for tag, tag_id in tags.items():
                check_round_trip(self._tokenizer, [tag_id], f"the tag {tag}")
            if f.prompt_tokens is not None and f.prompt_tokens != f.prompt_tokens_wanted:
                raise Pr1EvalError(
                    f"the server at {where} takes text prompts only and read a {f.prompt_tokens_wanted}-token prompt as "
                    f"{f.prompt_tokens} tokens (it does not read special tokens in prompt text, or adds its own); its "
                    "generations would continue another prompt; serve the model with vLLM or SGLang's launch_server")
        if f.tags_shown in ("no", "unchecked") and special_tags(self._tokenizer):
            how = "a forced </Path> came back without it" if f.tags_shown == "no" else \
                "it ignores logit_bias, so a forced </Path> could not show they survive"
            raise Pr1EvalError(
                f"the server at {where} returns text without token ids, and the six tags are special tokens of this "
                f"tokenizer that its text must keep ({how}); start llama.cpp's llama-server with --special, or serve "
                "with vLLM/SGLang (they honour skip_special_tokens=false), or serve a copy of the checkpoint whose "
                "tokenizer marks the six tags \"special\": false (same ids) and pass that copy as --tokenizer")

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def describe(self) -> dict[str, Any]:
        """What ``run.json`` needs to replay the run: the server (no secrets), the model it served, and
        what the probe found it can do (the mode)."""
        prompt = "token ids" if self.features.mode == "tokens" else "text"
        return {
            "backend": "openai", "base_url": self.client.public_base_url, "served_model": self.served_model,
            "served_root": self.served_root, "max_model_len": self.max_model_len,
            "max_concurrency": self.max_concurrency, "api": f"completions, prompt as {prompt}",
            "tokenizer": self.tokenizer_from, "server": self.features.to_dict(),
        }

    def _budget(self, request: GenerationRequest, sampling: SamplingConfig) -> int:
        budget = request.max_new_tokens if request.max_new_tokens is not None else sampling.max_new_tokens
        if self.max_model_len is None or budget <= 0:
            return budget
        room = self.max_model_len - len(request.prompt_token_ids)
        if room <= 0:
            raise Pr1EvalError(
                f"request {request.request_id}: its prompt has {len(request.prompt_token_ids)} tokens, but the server at "
                f"{self.client.public_base_url} serves {self.served_model} with max_model_len {self.max_model_len}: no "
                "room for a response; serve it with a longer context (vllm serve --max-model-len) or shorten the prompt")
        return min(budget, room)

    def _stop_text(self, token_id: int) -> str:
        if token_id not in self._stop_texts:
            self._stop_texts[token_id] = str(self._tokenizer.decode([token_id], skip_special_tokens=False))
        return self._stop_texts[token_id]

    def request_body(self, request: GenerationRequest, sampling: SamplingConfig, budget: int, n: int | None = None,
                     seed: int | None = None) -> dict[str, Any]:
        """The ``POST /completions`` body of one request in this server's mode (greedy: ``n = 1``)."""
        sampling = request_sampling(request, sampling)
        f = self.features
        prompt: Any = list(request.prompt_token_ids)
        if f.mode == "text":
            prompt = check_round_trip(self._tokenizer, prompt, f"the prompt of request {request.request_id}")
        body: dict[str, Any] = {
            "model": self.served_model, "prompt": prompt, "n": 1 if is_greedy(sampling.temperature) else (n or request.n),
            "max_tokens": budget, "temperature": sampling.temperature, "top_p": sampling.top_p,
        }
        if f.extensions:
            body.update({k: v for k, v in EXTENSIONS.items() if f.mode == "text" or k != "no_stop_trim"})
        if f.stops == "ids":
            body["stop_token_ids"] = list(request.stop_token_ids)
        elif request.stop_token_ids:
            body["stop"] = [self._stop_text(t) for t in request.stop_token_ids]
        seed = request.seed if seed is None else seed
        if seed is not None:
            body["seed"] = seed
        if sampling.top_k and sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        elif f.extensions:  # say "off": llama.cpp's server would otherwise apply its own top_k 40 and min_p 0.05
            body["top_k"] = -1
        if f.extensions:
            body["min_p"] = 0.0
        if self.record_logprobs:
            body["logprobs"] = 0
        return body

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        if any(r.stop_token_ids for r in requests) and self.features.stops not in GOOD_STOPS:
            why = ("the model wrote fewer than two tokens to the start-up probe, so its stops could not be checked"
                   if self.features.stops == "unchecked" else
                   f"stops {self.features.stops}: stop_token_ids not taken, and stop strings trimmed from the text "
                   "without saying which fired, or ignored")
            raise Pr1EvalError(
                f"fork-join stops each path at </Path>, but the server at {self.client.public_base_url} does not honour "
                f"stops in a way pr1-eval can read ({why}); run --decoding sequential here, or serve with vLLM or "
                "SGLang's launch_server")
        if not self.features.samples and any(not is_greedy(request_sampling(r, sampling).temperature) for r in requests):
            raise Pr1EvalError(
                f"the server at {self.client.public_base_url} gave one answer to two seeds at temperature 1.0: it does "
                "not sample (transformers serve samples only when the model's generation_config.json says \"do_sample\": "
                "true); set that where it serves from, or run greedy (--temperature 0, and --path-temperature run for "
                "fork-join)")
        results: list[list[Completion]] = [[] for _ in requests]
        calls: list[tuple[int, Future[list[Completion]], int]] = []
        budgets = [self._budget(r, sampling) for r in requests]  # every refusal before any request is sent
        for i, (request, budget) in enumerate(zip(requests, budgets, strict=True)):
            if request.n <= 0:
                continue
            if budget <= 0:
                results[i] = [Completion([], "", "length") for _ in range(request.n)]
                continue
            greedy = is_greedy(request_sampling(request, sampling).temperature)
            if greedy or self.features.n:
                calls.append((i, self._pool.submit(self._ask, request, sampling, budget, request.n, request.seed), request.n))
            else:  # the server ignores n: one request per sample, seeded as vLLM seeds choice j
                calls += [(i, self._pool.submit(self._ask, request, sampling, budget, 1, _plus(request.seed, j)), 1)
                          for j in range(request.n)]
        listener = self.on_call_progress
        if listener is not None:
            sizes = {id(f): count for _, f, count in calls}
            total, done = sum(sizes.values()), 0
            listener(0, total)
            for future in as_completed([f for _, f, _ in calls]):
                done += sizes[id(future)]
                listener(done, total)
        for i, future, _ in calls:
            results[i].extend(future.result())
        return results

    def _ask(self, request: GenerationRequest, sampling: SamplingConfig, budget: int, count: int,
             seed: int | None) -> list[Completion]:
        """``count`` completions of ``request``: one POST asking for ``count``; a greedy answer is
        repeated; a sampled answer with fewer choices gets the missing ``j`` asked again one by one
        (``n = 1``, seed ``seed + j``), never copied."""
        out = self._post(self.request_body(request, sampling, budget, count, seed), request)
        if is_greedy(request_sampling(request, sampling).temperature):
            if len(out) != 1:
                raise Pr1EvalError(f"{self.client.public_base_url}/completions returned {len(out)} choices for a "
                                   "greedy request sent with n=1")
            first = out[0]
            return [first, *(replace(first, token_ids=list(first.token_ids),
                                     logprobs=None if first.logprobs is None else list(first.logprobs))
                             for _ in range(count - 1))]
        if len(out) > count:
            raise Pr1EvalError(f"{self.client.public_base_url}/completions returned {len(out)} choices for n={count}")
        if len(out) < count and not self._warned_short:
            self._warned_short = True
            print(f"warning: {self.client.public_base_url} returned {len(out)} choice(s) for n={count}; asking again for "
                  "the missing ones one at a time (n=1, seed+j), never copying one", file=sys.stderr, flush=True)
        for j in range(len(out), count):
            more = self._post(self.request_body(request, sampling, budget, 1, _plus(seed, j)), request)
            if len(more) != 1:
                raise Pr1EvalError(f"{self.client.public_base_url}/completions returned {len(more)} choices for n=1")
            out += more
        return out

    def _post(self, body: dict[str, Any], request: GenerationRequest) -> list[Completion]:
        where = f"{self.client.public_base_url}/completions"
        answer = parse_answer(self.client.post("/completions", body), where, len(self._tokenizer))
        wanted = len(request.prompt_token_ids)
        if self.features.mode == "text" and answer.prompt_tokens is not None and answer.prompt_tokens != wanted:
            raise Pr1EvalError(f"{where} read the {wanted}-token prompt of request {request.request_id} as "
                               f"{answer.prompt_tokens} tokens; its answer would continue another prompt; serve the "
                               "model with vLLM or SGLang's launch_server (token-id prompts)")
        return [self._to_completion(c, request) for c in answer.choices]

    def _to_completion(self, choice: Choice, request: GenerationRequest) -> Completion:
        stops = set(request.stop_token_ids)
        reason, text, stop = choice.stop_reason, choice.text, None
        if isinstance(reason, int) and reason in stops:
            stop = reason
        elif isinstance(reason, str):
            stop = next((t for t in request.stop_token_ids if self._stop_text(t) == reason), None)
        if choice.token_ids is not None:
            ids = list(choice.token_ids)
        else:
            if stop is not None and not text.endswith(self._stop_text(stop)):  # reported, but trimmed from the text
                text += self._stop_text(stop)
            ids = list(self._tokenizer.encode(text, add_special_tokens=False))
        if stop is None and choice.finish_reason == "stop" and ids and ids[-1] in stops:
            stop = ids[-1]
        if stop is not None:
            kind = "stop"
            if not ids or ids[-1] != stop:  # keep the stop token, as the engine contract says
                ids.append(stop)
        elif choice.finish_reason in ("length", "abort", "error"):
            kind = str(choice.finish_reason)
        elif choice.finish_reason == "stop":
            kind = "eos"
            if ids and (ids[-1] in self.eos_token_ids or ids[-1] == reason):
                ids.pop()
        else:
            kind = "error"
        decoded = self._tokenizer.decode(ids, skip_special_tokens=False)
        return Completion(ids, decoded, kind, stop, self._logprobs(choice, len(ids)))

    def _logprobs(self, choice: Choice, length: int) -> list[float] | None:
        if not self.record_logprobs:
            return None
        values = (choice.token_logprobs or [])[:length]
        return values + [float("nan")] * (length - len(values))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def __enter__(self) -> OpenAIEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plus(seed: int | None, j: int) -> int | None:
    """Choice ``j``'s seed, as vLLM derives it from a request's (``seed + j``); None stays None."""
    return None if seed is None else seed + j
