"""Ask an OpenAI-compatible server, once at start, what it can do; the endpoint engine picks its
mode from the answer and refuses what it cannot do right.

Why a probe: servers differ in exactly what this engine relies on
(``docs/usage/run.md#which-servers-work``): vLLM takes token-id prompts, returns token ids, honours
``stop_token_ids``, ``skip_special_tokens: false`` and ``n``; ``transformers serve``, TGI, Ollama
and the SGLang router take string prompts only; llama.cpp ignores the fields it does not know
(stops by id, special tokens) without a word; several servers ignore ``n``. Guessing from a
server's name is wrong behind a proxy, and finding out mid-run is too late (a refused request
after an hour, or worse, a run that silently differs). A handful of tiny requests (at most ten,
two of them forms the server may refuse, a few tokens each, marked ``"user": "pr1-eval-probe"``)
settle it:

1. **the prompt form**: token ids with vLLM's fields, else text with them, else plain text (the
   first one not refused with 400/422); the answer says whether token ids come back, whether ``n``
   is honoured (2 choices for ``n = 2``) and, from ``usage.prompt_tokens``, whether the server
   reads the rendered text as the same tokens;
2. **seeds and sampling**: the same seeded request again (equal answers: a rerun repeats), and
   with another seed (the same answer again: the server does not sample at all, as
   ``transformers serve`` when the model's ``generation_config.json`` lacks ``do_sample: true``);
   two identical choices where two seeds differ mean ``n`` copies one stream: treated as ignored;
3. **stops**: a greedy continuation, then the same request stopped at its second token (by id
   where the fields are taken, else by its text): the stop is honoured and kept, reported
   (``stop_reason``/``matched_stop``), trimmed from the text, or ignored;
4. **special tokens shown** (only when no token ids come back and the six tags are special tokens
   of the run's tokenizer): ``<Path>`` forced by ``logit_bias`` must come back in the text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pr1_eval.engines.openai_answers import Answer, parse_answer
from pr1_eval.engines.openai_client import OpenAIClient, ServerRefused
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.tags import single_token_tag_ids

PROBE_USER = "pr1-eval-probe"
"""The OpenAI ``user`` field of probe requests (so a log, or a test's fake server, can tell them apart)."""
PROBE_SEED = 1234
EXTENSIONS: dict[str, Any] = {
    "skip_special_tokens": False, "spaces_between_special_tokens": False, "include_stop_str_in_output": True,
    "no_stop_trim": True, "return_token_ids": True,
}
"""vLLM's (and SGLang's ``no_stop_trim``) fields that keep the tags and the stop in the text and
return token ids; sent whenever the server takes them."""
GOOD_STOPS = ("ids", "kept", "reported")


@dataclass(frozen=True)
class ServerFeatures:
    """What the probe found (recorded in ``run.json`` under ``engine.server``)."""

    token_prompts: bool
    extensions: bool
    token_ids_back: bool
    n: bool
    seeds_repeat: bool
    samples: bool
    """Whether two seeds at temperature 1.0 gave different answers (else sampled requests are refused)."""
    stops: str
    """``ids`` (stop_token_ids honoured), ``kept`` (stop strings, kept in the text), ``reported``
    (the server says which stop fired), ``trimmed`` (cut from the text, not said), ``ignored``, or
    ``unchecked`` (the model wrote too little to check)."""
    tags_shown: str
    """``ids`` (token ids come back), ``yes``, ``no``, ``unchecked`` (``logit_bias`` not honoured),
    or ``not needed`` (the tokenizer has no special tags)."""
    prompt_tokens: int | None
    """How many tokens the server read the probe prompt as (``usage``), when it says."""
    prompt_tokens_wanted: int

    @property
    def mode(self) -> str:
        return "tokens" if self.token_prompts else "text"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mode": self.mode}

    def line(self, where: str) -> str:
        """The one line the run prints: the server's features and the mode picked."""
        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        per_sample = "" if self.n else ", one request per sample (n ignored)"
        return (f"server {where}: token-id prompts {yes(self.token_prompts)}, token ids back {yes(self.token_ids_back)}, "
                f"vLLM fields {yes(self.extensions)}, stops {self.stops}, tags in text {self.tags_shown}, "
                f"n {yes(self.n)}, samples {yes(self.samples)}, seeds repeat {yes(self.seeds_repeat)} -> mode: {self.mode} prompts{per_sample}")


class Prober:
    """The probe's requests against one server and served model (see the module docstring)."""

    def __init__(self, client: OpenAIClient, model: str, tokenizer: Any) -> None:
        self.client, self.model, self.tokenizer = client, model, tokenizer
        self.where = f"{client.public_base_url}/completions"
        self.tags = single_token_tag_ids(tokenizer)
        words = list(tokenizer.encode("Count: 1, 2, 3,", add_special_tokens=False))
        self.prompt_ids = [*words, self.tags[T.PATH_OPEN]] if T.PATH_OPEN in self.tags else words
        self.prompt_text = tokenizer.decode(self.prompt_ids, skip_special_tokens=False)

    def _ask(self, body: dict[str, Any], form: tuple[bool, bool], prompt: list[int] | None = None) -> Answer:
        tokens, extensions = form
        ids = self.prompt_ids if prompt is None else prompt
        text = self.prompt_text if prompt is None else self.tokenizer.decode(ids, skip_special_tokens=False)
        full = {"model": self.model, "prompt": ids if tokens else text, **body, "user": PROBE_USER}
        if extensions:
            full = {**{k: v for k, v in EXTENSIONS.items() if not tokens or k != "no_stop_trim"}, **full}
        return parse_answer(self.client.post("/completions", full), self.where, len(self.tokenizer))

    def _ids(self, answer: Answer, index: int = 0) -> list[int]:
        choice = answer.choices[index]
        if choice.token_ids is not None:
            return choice.token_ids
        return list(self.tokenizer.encode(choice.text, add_special_tokens=False))

    def run(self) -> ServerFeatures:
        sampled = {"max_tokens": 8, "temperature": 1.0, "top_p": 1.0, "n": 2, "seed": PROBE_SEED}
        form, first = self._form(sampled)
        again = self._ask(sampled, form)
        other = self._ask({**sampled, "seed": PROBE_SEED + 7}, form)
        texts = [[c.text for c in a.choices] for a in (first, again, other)]
        greedy = {"max_tokens": 6, "temperature": 0.0, "top_p": 1.0, "n": 1}
        prompt = self.prompt_ids
        continuation = self._ask(greedy, form)
        if len(self._ids(continuation)) < 2:  # the model ended at once: a second, plainer prompt for the stop check
            prompt = list(self.tokenizer.encode("1, 2, 3, 4, 5, 6,", add_special_tokens=False))
            continuation = self._ask(greedy, form, prompt)
        ids_back = all(c.token_ids is not None for c in first.choices)
        seeds_differ = texts[0][0] != texts[2][0]
        # n honoured: two choices, and not two copies of one stream where two seeds give two answers
        n = len(first.choices) == 2 and (texts[0][0] != texts[0][1] or not seeds_differ)
        return ServerFeatures(
            token_prompts=form[0], extensions=form[1], token_ids_back=ids_back, n=n,
            seeds_repeat=texts[0] == texts[1], samples=seeds_differ or len(set(texts[0])) > 1, stops=self._stops(greedy, form, continuation, prompt),
            tags_shown=self._tags_shown(greedy, form, ids_back), prompt_tokens=first.prompt_tokens,
            prompt_tokens_wanted=len(self.prompt_ids),
        )

    def _form(self, body: dict[str, Any]) -> tuple[tuple[bool, bool], Answer]:
        refusals = []
        for form in ((True, True), (False, True), (False, False)):
            try:
                return form, self._ask(body, form)
            except ServerRefused as exc:
                if exc.status not in (400, 422):
                    raise
                refusals.append(f"{exc.status}: {exc.message[:120]}")
        raise Pr1EvalError(f"the server at {self.where} refused a completions request in every form pr1-eval sends "
                           f"(token ids with vLLM's fields, text with them, plain text; it said: {' | '.join(refusals)});"
                           " is --base-url an OpenAI-compatible completions API serving this model?")

    def _stops(self, greedy: dict[str, Any], form: tuple[bool, bool], continuation: Answer, prompt: list[int]) -> str:
        ids = self._ids(continuation)
        if len(ids) < 2:
            return "unchecked"
        stop = ids[1]
        if form[1]:
            answer = self._ask({**greedy, "stop_token_ids": [stop]}, form, prompt)
            choice, got = answer.choices[0], self._ids(answer)
            if choice.stop_reason == stop or (choice.finish_reason == "stop" and got in (ids[:2], ids[:1])):
                return "ids"
        head, word = (self.tokenizer.decode(ids[:n], skip_special_tokens=False) for n in (1, 2))
        word = word[len(head):] if word.startswith(head) else ""
        if not word.strip() or word in head:
            return "unchecked"
        answer = self._ask({**greedy, "stop": [word]}, form, prompt)
        choice = answer.choices[0]
        if choice.stop_reason is not None and choice.finish_reason == "stop":
            return "reported"
        if choice.text == head + word:
            return "kept"
        return "trimmed" if choice.text == head and choice.finish_reason == "stop" else "ignored"

    def _tags_shown(self, greedy: dict[str, Any], form: tuple[bool, bool], ids_back: bool) -> str:
        if ids_back:
            return "ids"
        if not special_tags(self.tokenizer):
            return "not needed"
        tag = self.tags[T.PATH_CLOSE]
        answer = self._ask({**greedy, "max_tokens": 1, "logit_bias": {str(tag): 100}}, form)
        choice = answer.choices[0]
        if T.PATH_CLOSE in choice.text:
            return "yes"
        return "no" if choice.text == "" and choice.finish_reason == "length" else "unchecked"


def special_tags(tokenizer: Any) -> bool:
    """Whether the six tags are special tokens of ``tokenizer`` (a server decoding with
    ``skip_special_tokens`` drops them from its text), as in Parallel-R1 checkpoints."""
    tags = single_token_tag_ids(tokenizer)
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    return any(getattr(added.get(i), "special", False) for i in tags.values())
