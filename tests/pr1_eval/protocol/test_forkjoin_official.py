"""Fork-join against the official rollout's path rules, on one scripted model, in all three drivers.

The official loop (``parallel_thinking_loop_v3``, as read; restated below in a few lines, the
test's own reference) samples every path at temperature 1.0 whatever the rollout's, cuts a path
at ``max_path_response_length`` and then appends ``</Path>`` unless the cut left it ending in one
(an EOS it recognises — the tokenizer's — is replaced instead), and does the same for the
summary; vLLM stops on every EOS of the generation config, so a *second* EOS id ends a path too,
is not recognised, and stays, followed by the closing tag. The protocol machine must give the same
tokens through repro's RL rollout and evaluation's batched decoder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pr1_eval.decoding.forkjoin import ForkJoinDecoder, secondary_eos_ids
from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.forkjoin import ForkJoinMachine, ForkJoinParams, Generation
from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput

EOS, EOS2, NL = 0, 9, 7
PO, PC, HO, HC, SO, SC = 1, 2, 3, 4, 5, 6
TAGS = dict(zip(T.ALL_TAGS, (PO, PC, HO, HC, SO, SC), strict=True))
RUN_TEMPERATURE = 0.6


@dataclass
class Model:
    """Writes, from its prompt's last token: paths of ``path_lens`` ending in ``path_ends``, a summary
    ending in ``summary_end``, and a main line that opens ``blocks`` blocks, then ends with EOS.
    Returns raw ids as vLLM does: cut after the first stop token or any EOS, then at ``max_tokens``."""

    path_lens: tuple[int, ...] = (3, 5)
    path_ends: tuple[int, ...] = (HC, HC)
    summary_end: int = SC
    blocks: int = 2
    counts: dict[tuple[int, ...], int] = field(default_factory=dict)
    temperatures: list[tuple[str, float | None]] = field(default_factory=list)

    def raw(self, prompt: Sequence[int], stops: Sequence[int], max_tokens: int) -> list[int]:
        key = tuple(prompt)
        variant = self.counts.get(key, 0)
        self.counts[key] = variant + 1
        words = [10 + (len(prompt) * 3 + variant * 11 + i) % 80 for i in range(64)]
        last = prompt[-1]
        if last == HO:
            i = variant % len(self.path_lens)
            tokens = [*words[: self.path_lens[i]], self.path_ends[i]]
        elif last == SO:
            tokens = [*words[:2], self.summary_end]
        elif list(prompt).count(PO) < self.blocks:
            tokens = [*words[:3], PO]
        else:
            tokens = [*words[:4], EOS]
        out: list[int] = []
        for token in tokens:
            out.append(token)
            if token in stops or token in (EOS, EOS2):  # vLLM stops on every EOS of the generation config
                break
        return out[:max_tokens]

    def kind(self, prompt: Sequence[int]) -> str:
        return {HO: "path", SO: "summary"}.get(prompt[-1], "main")


def official(model: Model, prompt: list[int], budget: int, cap: int, max_blocks: int = 4) -> list[int]:
    """The official loop's token logic, restated (paths ``n=2``, the tokenizer's EOS is ``EOS``)."""
    resp: list[int] = []
    blocks = 0

    def closed(ids: list[int], tag: int) -> list[int]:
        if ids[-1] != tag:
            if ids[-1] == EOS:
                ids[-1] = tag
            else:
                ids.append(tag)
        return ids

    while True:
        model.temperatures.append(("main", RUN_TEMPERATURE))
        ids = model.raw(prompt + resp, [PO, EOS], budget - len(resp))
        resp += ids
        if len(resp) >= budget or ids[-1] != PO:
            break
        block: list[int] = []
        for _ in range(2):
            model.temperatures.append(("path", 1.0))
            path = model.raw(prompt + resp + [HO], [HC, EOS], budget)
            if cap and len(path) > cap:
                path = path[:cap]
            block += [HO, *closed(path, HC)]
        block += [PC, NL, SO]
        model.temperatures.append(("summary", RUN_TEMPERATURE))
        block += closed(model.raw(prompt + resp + block, [SC, EOS], budget), SC)
        resp += block
        blocks += 1
        if len(resp) >= budget or blocks >= max_blocks:
            break
    return resp[:budget]


def rl_rollout(model: Model, prompt: list[int], budget: int, cap: int, secondary: str = "keep") -> list[int]:
    async def generate(p: list[int], stops: list[int], max_tokens: int, temperature: float | None) -> RawOutput:
        model.temperatures.append((model.kind(p), RUN_TEMPERATURE if temperature is None else temperature))
        return RawOutput(model.raw(p, stops, max_tokens))

    config = ForkJoinConfig(response_length=budget, max_path_response_length=cap, secondary_eos=secondary)
    rollout = ForkJoinRollout(TAGS, [EOS, EOS2], [NL], config, generate, primary_eos_id=EOS)
    return asyncio.run(rollout.run(prompt)).ids


class Tokenizer:
    eos_token_id = EOS

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [TAGS[text]] if text in TAGS else [NL]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return " ".join(map(str, ids))


@dataclass
class Engine:
    """The scripted model as a pr1-eval engine: EOS removed, stop tokens kept; both ids are EOS."""

    model: Model
    name: str = "scripted"
    tokenizer: Any = field(default_factory=Tokenizer)
    eos_token_ids: frozenset[int] = frozenset({EOS, EOS2})

    def describe(self) -> dict[str, Any]:
        return {"backend": "scripted"}

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        out = []
        for r in requests:
            budget = r.max_new_tokens if r.max_new_tokens is not None else sampling.max_new_tokens
            temperature = sampling.temperature if r.temperature is None else r.temperature
            completions = []
            for _ in range(r.n):
                self.model.temperatures.append((self.model.kind(r.prompt_token_ids), temperature))
                ids = self.model.raw(r.prompt_token_ids, r.stop_token_ids, budget)
                if ids and ids[-1] in r.stop_token_ids:
                    completions.append(Completion(ids, "", "stop", ids[-1]))
                elif ids and ids[-1] in self.eos_token_ids:
                    completions.append(Completion(ids[:-1], "", "eos"))
                else:
                    completions.append(Completion(ids, "", "length"))
            out.append(completions)
        return out


def eval_decode(model: Model, prompt: list[int], budget: int, cap: int, secondary: str = "keep") -> list[int]:
    decoder = ForkJoinDecoder(max_path_tokens=cap, secondary_eos=secondary)
    sampling = SamplingConfig(temperature=RUN_TEMPERATURE, max_new_tokens=budget)
    return decoder.decode(Engine(model), [prompt], 1, sampling, ["r0"])[0][0].token_ids


SCENARIOS = {
    "plain": Model(),
    "path over the cap": Model(path_lens=(3, 12)),
    "path of exactly the cap, then </Path>": Model(path_lens=(6, 2)),
    "tokenizer EOS in a path": Model(path_ends=(EOS, HC)),
    "second EOS in a path": Model(path_ends=(EOS2, HC)),
    "second EOS in a summary": Model(summary_end=EOS2),
    "second EOS over the cap": Model(path_lens=(12, 2), path_ends=(EOS2, EOS2)),
    "four blocks": Model(blocks=6),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("cap", [6, 0, 4096])
def test_token_streams_and_temperatures_equal_the_official_loop(name: str, cap: int) -> None:
    def fresh() -> Model:
        base = SCENARIOS[name]
        return Model(base.path_lens, base.path_ends, base.summary_end, base.blocks)

    prompt = [50, 51]
    ref_model, rl_model, eval_model = fresh(), fresh(), fresh()
    want = official(ref_model, prompt, 200, cap)
    assert rl_rollout(rl_model, prompt, 200, cap) == want
    final_eos = [EOS] if want[-1] == EOS else []  # an evaluation record holds no final EOS
    assert eval_decode(eval_model, prompt, 200, cap) + final_eos == want
    assert rl_model.temperatures == ref_model.temperatures == eval_model.temperatures
    assert ("path", 1.0) in ref_model.temperatures and ("main", RUN_TEMPERATURE) in ref_model.temperatures


def test_cap_and_second_eos_by_hand() -> None:
    ids = rl_rollout(Model(path_lens=(8, 2), path_ends=(HC, EOS2), blocks=1), [50], 200, 5)
    start = ids.index(HO)
    assert ids[start : start + 7] == [HO, *ids[start + 1 : start + 6], HC], "5 tokens, then </Path> appended"
    second = ids.index(HO, start + 1)
    assert ids[second + 3 : second + 5] == [EOS2, HC], "the second EOS kept, then </Path>"
    replaced = rl_rollout(Model(path_lens=(8, 2), path_ends=(HC, EOS2), blocks=1), [50], 200, 5, secondary="replace")
    assert EOS2 not in replaced and len(replaced) == len(ids) - 1


def test_eval_records_the_options_and_the_engine_secondary_eos() -> None:
    info = ForkJoinDecoder().describe()
    assert (info["path_temperature"], info["max_path_tokens"], info["secondary_eos"]) == (1.0, 4096, "keep")
    assert ForkJoinDecoder(path_temperature=None).describe()["path_temperature"] == "run"
    assert secondary_eos_ids(Engine(Model())) == {EOS2}
    model = Model()
    ForkJoinDecoder(path_temperature=None).decode(Engine(model), [[50]], 1, SamplingConfig(RUN_TEMPERATURE), ["r"])
    assert {t for _, t in model.temperatures} == {RUN_TEMPERATURE}


def test_machine_path_request_has_cap_temperature_and_stops() -> None:
    m = ForkJoinMachine(TAGS, [NL], ForkJoinParams(budget=100, max_path_tokens=7), secondary_eos_ids=[EOS2])
    m.feed([Generation((20, PO), None, "stop")])
    assert m.request is not None and m.request.kind == "paths"
    assert (m.request.max_tokens, m.request.temperature, m.request.stop_ids) == (7, 1.0, (HC, EOS2))
    replace = ForkJoinMachine(TAGS, [NL], ForkJoinParams(budget=5, secondary_eos="replace"), secondary_eos_ids=[EOS2])
    replace.feed([Generation((20, PO), None, "stop")])
    assert replace.request is not None and replace.request.stop_ids == (HC,) and replace.request.max_tokens == 2


def test_cli_options_reach_the_run_config_and_its_decoding_record() -> None:
    import argparse

    from pr1_eval.cli.options import add_generation_options, run_config
    from pr1_eval.decoding.factory import make_decoder, path_options

    parser = argparse.ArgumentParser()
    add_generation_options(parser)
    parser.add_argument("--tasks", default="aime24")
    parser.add_argument("--model", default="m")
    default = run_config(parser.parse_args([]), model="m")
    assert (default.path_temperature, default.max_path_tokens, default.secondary_eos) == (1.0, 4096, "keep")
    args = parser.parse_args(["--path-temperature", "run", "--max-path-tokens", "0", "--secondary-eos", "replace"])
    config = run_config(args, model="m")
    info = make_decoder("forkjoin", path=path_options(config)).describe()
    assert (info["path_temperature"], info["max_path_tokens"], info["secondary_eos"]) == ("run", 0, "replace")
    with pytest.raises(SystemExit):
        parser.parse_args(["--path-temperature", "hot"])
