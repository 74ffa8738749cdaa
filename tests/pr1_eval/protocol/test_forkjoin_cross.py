"""One protocol for evaluation and training: the batched evaluation decoder and repro's VERL agent
loop, fed by one scripted model, produce the same responses.

Both drive :class:`pr1_eval.protocol.forkjoin.ForkJoinMachine`; this test pins that nothing around
the machine (wave batching and ``n=k`` grouping in evaluation; VERL's prompt builder, the server
manager's raw vLLM-style ids, EOS handling and loss masks in training) changes what a sample is.
The only difference by contract: a training response keeps the EOS that ends it (the model must
learn to stop), an evaluation record does not.
"""

from __future__ import annotations

from typing import Any

import pytest

from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import SamplingConfig
from pr1_eval.protocol.tags import resolve_tag_ids
from tests.support.parallel_fakes import ScriptedEngine, ScriptedModel, ScriptedServer

pytest.importorskip("verl")

MESSAGES = [[{"role": "user", "content": f"What is {a} + {b}?"}] for a, b in ((3, 4), (12, 30))]
K = 2
SCENARIOS = [  # (response budget, max_blocks, after_last_block)
    (400, 4, "end"),
    (400, 2, "end"),
    (400, 1, "continue"),
    (400, 0, "end"),
    (70, 4, "end"),
    (33, 4, "end"),
    (19, 4, "end"),
]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from repro.testing import tiny_model_dir

    return AutoTokenizer.from_pretrained(str(tiny_model_dir()))


def _model(tokenizer: Any) -> ScriptedModel:
    tags = resolve_tag_ids(tokenizer)
    words = [i for i in range(300, 700) if i not in set(tags.values()) | set(tokenizer.all_special_ids)]
    return ScriptedModel(tags=tags, eos=int(tokenizer.eos_token_id), words=words)


def _repro(tokenizer: Any, budget: int, max_blocks: int, after: str) -> tuple[list[list[Any]], list[list[int]]]:
    from repro.testing import compose_stage, forkjoin_agent_loop, tiny_model_dir

    cfg = compose_stage("unseen_s2", [
        f"actor_rollout_ref.model.path={tiny_model_dir()}", f"data.max_response_length={budget}",
        f"repro.forkjoin.max_blocks={max_blocks}", f"repro.forkjoin.after_last_block={after}",
    ])
    server = ScriptedServer(_model(tokenizer))
    loop = forkjoin_agent_loop(cfg, server, tokenizer)
    outputs, prompts = [], []
    for messages in MESSAGES:
        prompts.append(loop.loop.run_until_complete(loop.ct_build_initial_tokens(messages)))
        outputs.append([
            loop.loop.run_until_complete(loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=messages))
            for _ in range(K)
        ])
    return outputs, prompts


@pytest.mark.parametrize(("budget", "max_blocks", "after"), SCENARIOS)
def test_eval_decoder_and_agent_loop_write_the_same_responses(tokenizer: Any, budget: int, max_blocks: int,
                                                              after: str) -> None:
    trained, prompts = _repro(tokenizer, budget, max_blocks, after)
    engine = ScriptedEngine(_model(tokenizer), tokenizer)
    decoder = ForkJoinDecoder(paths=2, max_blocks=max_blocks, after_last_block=after)
    evaluated = decoder.decode(engine, prompts, K, SamplingConfig(max_new_tokens=budget, seed=0), ["p/0", "p/1"])
    eos = tokenizer.eos_token_id
    for eval_samples, train_samples in zip(evaluated, trained, strict=True):
        for ev, tr in zip(eval_samples, train_samples, strict=True):
            ended = [eos] if ev.finish_reason == "eos" else []
            assert tr.response_ids == ev.token_ids + ended, "identical token streams"
            assert ev.generated_mask is not None and ev.logprobs is not None
            assert tr.response_mask == [int(g) for g in ev.generated_mask] + [1] * len(ended), "generated vs inserted"
            assert tr.response_logprobs[: len(ev.logprobs)] == ev.logprobs, "log-probs, inserted ones included"
            assert all(ev.logprobs[i] == 0.0 for i, g in enumerate(ev.generated_mask) if not g)
            assert tr.extra_fields["pr1_critical_path_tokens"] == ev.critical_path_tokens + len(ended)
            assert tr.extra_fields["pr1_engine_closed_tags"] == ev.engine_inserted_tokens
            assert len(ev.token_ids) <= budget and len(tr.response_ids) <= budget
            assert (tr.extra_fields["min_global_steps"], tr.extra_fields["max_global_steps"]) == (3, 3)


def test_the_scenarios_exercise_every_protocol_branch(tokenizer: Any) -> None:
    """Guard against a vacuous cross-test: the scripted model forks, repairs, hits the block limit,
    is cut by the budget and ends at EOS across the scenarios above."""
    finishes, repairs, hidden = set(), 0, 0
    for budget, max_blocks, after in SCENARIOS:
        engine = ScriptedEngine(_model(tokenizer), tokenizer)
        prompts = [[1000 + i] for i in range(2)]
        out = ForkJoinDecoder(max_blocks=max_blocks, after_last_block=after).decode(
            engine, [[5, 6, 7], [8, 9]], K, SamplingConfig(max_new_tokens=budget, seed=0), [str(p) for p in prompts])
        for s in (s for samples in out for s in samples):
            finishes.add(s.finish_reason)
            repairs += s.engine_inserted_tokens
            hidden += len(s.token_ids) - (s.critical_path_tokens or 0)
    assert finishes == {"eos", "length", "block_limit"} and repairs > 0 and hidden > 0


@pytest.mark.parametrize("path_temperature", ["1.0", "null"])
def test_the_verl_agent_loop_samples_paths_at_the_official_temperature(tokenizer: Any, path_temperature: str) -> None:
    """Through repro's VERL agent loop with the stage config: path requests at 1.0 (the official
    rollout), main line and summary at the rollout's temperature; ``path_temperature: null`` keeps
    the rollout's for paths too. The path spans ride along in ``extra_fields``."""
    from repro.testing import compose_stage, forkjoin_agent_loop, tiny_model_dir

    cfg = compose_stage("unseen_s2", [f"actor_rollout_ref.model.path={tiny_model_dir()}",
                                      f"repro.forkjoin.path_temperature={path_temperature}"])
    server = ScriptedServer(_model(tokenizer))
    loop = forkjoin_agent_loop(cfg, server, tokenizer)
    out = loop.loop.run_until_complete(loop.run({"temperature": 0.6, "logprobs": True}, raw_prompt=MESSAGES[0]))
    path_open = resolve_tag_ids(tokenizer)["<Path>"]
    kinds = {("path" if c["prompt_ids"][-1] == path_open else "other", c["temperature"]) for c in server.calls}
    want_path = 1.0 if path_temperature == "1.0" else 0.6
    assert kinds == {("path", want_path), ("other", 0.6)}
    assert out.extra_fields["pr1_path_spans"] and all(len(span) == 3 for span in out.extra_fields["pr1_path_spans"])
