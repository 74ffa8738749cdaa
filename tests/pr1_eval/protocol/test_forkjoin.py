"""The fork-join step machine on hand-written engine outputs: the paper's layout, budgets, the block
limit, EOS handling, inserted tokens and the critical path, each checked against a value worked
out by hand."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.forkjoin import (
    INSERTED_LOGPROB,
    MAIN,
    PATHS,
    SUMMARY,
    ForkJoinMachine,
    ForkJoinParams,
    Generation,
    run_async,
)

TAGS = {tag: 101 + i for i, tag in enumerate(T.ALL_TAGS)}
PO, PC, HO, HC, SO, SC = (TAGS[t] for t in T.ALL_TAGS)
NL, EOS = 10, 0


def gen(tokens: Sequence[int], finish: str | None = None) -> Generation:
    """A generation whose finish follows its last token (stop tag → stop); log-prob −0.5 each."""
    if finish is None:
        finish = "stop" if tokens and tokens[-1] in (PO, HC, SC) else "eos"
    return Generation(tuple(tokens), tuple([-0.5] * len(tokens)), finish)


def machine(**params: object) -> ForkJoinMachine:
    return ForkJoinMachine(TAGS, [NL], ForkJoinParams(**{"budget": 200, **params}))  # type: ignore[arg-type]


def test_paper_layout_inserted_tokens_and_critical_path() -> None:
    m = machine()
    assert m.request is not None and m.request.kind == MAIN and m.request.stop_ids == (PO,)
    assert m.request.max_tokens == 200
    m.feed([gen([1, 2, PO])])
    assert m.request.kind == PATHS and m.request.n == 2 and m.request.prefix == (1, 2, PO, HO)
    assert m.request.stop_ids == (HC,) and m.request.max_tokens == 200 - 3 - 1  # what is left after <Path>
    m.feed([gen([20, 21, HC]), gen([30, HC])])
    assert m.request.kind == SUMMARY and m.request.prefix[-3:] == (PC, NL, SO) and m.request.stop_ids == (SC,)
    m.feed([gen([40, SC])])
    assert m.request.kind == MAIN
    m.feed([gen([3], "eos")])
    assert m.done and m.finish == "eos"
    assert m.tokens == [1, 2, PO, HO, 20, 21, HC, HO, 30, HC, PC, NL, SO, 40, SC, 3]
    inserted = {3, 7, 10, 11, 12}  # <Path> x2, </Parallel>, "\n", <Summary>
    assert [i for i, g in enumerate(m.generated_mask) if not g] == sorted(inserted)
    assert all(m.logprobs[i] == INSERTED_LOGPROB for i in inserted)
    assert all(m.logprobs[i] == -0.5 for i in range(len(m.tokens)) if i not in inserted)
    # main 3 + longest path (<Path> 20 21 </Path> = 4) + join 3 + summary 2 + main 1; the 3-token path is hidden
    assert m.critical_path_tokens() == 3 + 4 + 3 + 2 + 1 == len(m.tokens) - 3
    assert (m.steps, m.repairs, len(m.blocks)) == (4, 0, 1)


def test_eos_in_a_path_or_summary_is_replaced_by_the_closing_tag() -> None:
    m = machine()
    m.feed([gen([PO])])
    m.feed([gen([20], "eos"), gen([30, HC])])
    m.feed([gen([40], "eos")])
    m.feed([gen([5], "eos")])
    assert m.tokens == [PO, HO, 20, HC, HO, 30, HC, PC, NL, SO, 40, SC, 5]
    assert not m.generated_mask[3] and m.generated_mask[6] and not m.generated_mask[11]  # repairs are inserted
    assert m.repairs == 2 and m.finish == "eos"


def test_the_response_ends_after_the_last_blocks_summary() -> None:
    m = machine(max_blocks=2)
    for _ in range(2):
        assert m.request is not None and m.request.kind == MAIN and m.request.stop_ids == (PO,)
        m.feed([gen([1, PO])])
        m.feed([gen([2, HC]), gen([3, HC])])
        m.feed([gen([4, SC])])
    assert m.done and m.finish == "block_limit" and len(m.blocks) == 2
    assert m.tokens[-1] == SC and m.tokens.count(PO) == 2


def test_continue_after_the_last_block_is_an_explicit_option() -> None:
    m = machine(max_blocks=1, after_last_block="continue")
    m.feed([gen([1, PO])])
    m.feed([gen([2, HC]), gen([3, HC])])
    m.feed([gen([4, SC])])
    assert m.request is not None and m.request.kind == MAIN and m.request.stop_ids == ()  # no more fork points
    m.feed([gen([PO, HO, 5, HC], "eos")])  # the model writes a block inline; the machine does not fork
    assert m.finish == "eos" and len(m.blocks) == 1 and m.tokens.count(PO) == 2


def test_max_blocks_zero_ends_before_the_first_block() -> None:
    m = machine(max_blocks=0)
    assert m.request is not None and m.request.stop_ids == (PO,)
    m.feed([gen([1, 2, PO])])
    assert m.done and m.finish == "block_limit" and m.tokens == [1, 2]


def test_paths_may_use_the_whole_remaining_budget_and_the_response_is_cut() -> None:
    m = machine(budget=12)
    m.feed([gen([1, 2, PO])])  # 9 left: each path may write 8 after its <Path>
    assert m.request is not None and m.request.max_tokens == 8
    m.feed([gen([20] * 8, "length"), gen([30, HC])])  # a cut path is closed, the paper's way
    assert m.done and m.finish == "length" and len(m.tokens) == 12
    assert m.tokens == [1, 2, PO, HO, *[20] * 8]  # the cut removes the closing tag and the second path
    assert len(m.generated_mask) == len(m.logprobs) == 12
    assert m.critical_path_tokens() == 12  # the second path is not in the response


@pytest.mark.parametrize("budget", [0, 1, 2, 3, 4, 5, 6, 8, 11, 14, 17])
def test_the_budget_is_never_exceeded(budget: int) -> None:
    m = machine(budget=budget)
    script = {MAIN: [[1, PO]], PATHS: [[2, 3, HC], [4, HC]], SUMMARY: [[5, SC]]}
    while m.request is not None:
        request = m.request
        outs = [list(script[request.kind][i % len(script[request.kind])]) for i in range(request.n)]
        m.feed([gen(o[: request.max_tokens], "length" if len(o) > request.max_tokens else None) for o in outs])
    assert len(m.tokens) <= budget and len(m.tokens) == len(m.generated_mask) == len(m.logprobs)
    assert m.finish in ("length", "block_limit")
    if budget == 3:  # <Parallel> leaves 1: only <Path> fits, the response ends there
        assert m.tokens == [1, PO, HO] and m.steps == 1


def test_generation_from_raw_vllm_ids() -> None:
    stop = Generation.from_raw([5, 6, HC], [-1.0, -2.0, -3.0], [HC], [EOS])
    assert stop.finish == "stop" and stop.token_ids == (5, 6, HC)
    eos = Generation.from_raw([5, EOS], [-1.0, -0.25], [HC], [EOS])
    assert (eos.finish, eos.token_ids, eos.eos_id, eos.eos_logprob, eos.logprobs) == ("eos", (5,), EOS, -0.25, (-1.0,))
    cut = Generation.from_raw([5, 6], None, [HC], [EOS])
    assert cut.finish == "length" and cut.logprobs is None


def test_keep_final_eos_for_training() -> None:
    m = ForkJoinMachine(TAGS, [NL], ForkJoinParams(budget=50), keep_final_eos=True)
    m.feed([Generation.from_raw([7, 8, EOS], [-0.1, -0.2, -0.3], [PO], [EOS])])
    assert m.tokens == [7, 8, EOS] and m.generated_mask == [True] * 3 and m.logprobs == [-0.1, -0.2, -0.3]


def test_run_async_draws_the_paths_concurrently_on_the_same_prompt() -> None:
    seen: list[tuple[list[int], list[int], int]] = []

    async def generate(prompt: list[int], stops: list[int], max_tokens: int, temperature: float | None) -> Generation:
        seen.append((prompt, stops, max_tokens))
        await asyncio.sleep(0)
        if stops == [HC]:
            return gen([len(seen), HC])
        return gen([SC]) if stops == [SC] else gen([1, PO] if PO not in prompt else [9], None)

    m = asyncio.run(run_async(ForkJoinMachine(TAGS, [NL], ForkJoinParams(budget=40)), [77], generate))
    path_calls = [c for c in seen if c[1] == [HC]]
    assert len(path_calls) == 2 and path_calls[0][0] == path_calls[1][0] == [77, 1, PO, HO]
    assert m.finish == "eos" and m.tokens[:3] == [1, PO, HO]


def test_unknown_engine_logprobs_are_nan_and_params_are_checked() -> None:
    m = machine()
    m.feed([Generation((1, 2), None, "eos")])
    assert all(math.isnan(x) for x in m.logprobs) and not m.engine_logprobs
    for bad in ({"paths": 0}, {"max_blocks": -1}, {"after_last_block": "sometimes"}):
        with pytest.raises(Pr1EvalError):
            ForkJoinParams(**bad)  # type: ignore[arg-type]
    assert ForkJoinParams().describe()["after_last_block"] == "end"


def test_an_engine_that_gives_up_ends_the_response_with_its_reason() -> None:
    m = machine()
    m.feed([gen([1, 2], "abort")])
    assert m.done and m.finish == "abort" and m.tokens == [1, 2]
    m = machine()
    m.feed([gen([1, PO])])
    m.feed([gen([5, HC]), gen([6], "error")])
    assert m.done and m.finish == "error" and m.tokens == [1, PO]  # partial paths are not kept
