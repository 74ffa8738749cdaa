"""Dump files written the way real jobs write them, for the ``import-verl`` tests.

* **VERL 0.9.1** (installed): its own dump code is called on CPU — ``_dump_generations`` of the V1
  ``PPOTrainerSync`` (its ``_dump_generations`` is ``PPOTrainer``'s) and of the legacy ``RayPPOTrainer``, each built with ``object.__new__`` plus the
  attributes the method reads (``global_steps`` and its dump executor). Their inputs are prepared
  as each trainer's ``_log_rollout_data`` / ``_validate`` prepares them: token tensors padded with
  the pad id, decoded with ``skip_special_tokens=True``, V1 rows sorted by uid key with synthetic
  ``pad…`` rows appended, the legacy reward's own float ``step`` among the extras.
* **The Parallel-R1 fork** (VERL 0.4.1, ``zhengkid/Parallel-R1`` @ 7c3a8f3, not installable here):
  :func:`fork_dump_generations` writes what its ``RayPPOTrainer._dump_generations`` writes: the
  fields ``input, output, score, step`` then every reward key of full length, in insertion order,
  ``json.dumps(entry, ensure_ascii=False)`` per row, rows joined by ``\\n`` plus a final ``\\n``.
  Training dumps decode prompts and responses with the special tokens kept (left pads, chat
  markers, eos, right pads); validation decodes the prompt without them and the output with them,
  and its reward dict starts with ``reward`` (then the reward function's ``score, acc, pred``).

Text goes through a real byte-level tokenizer with the Qwen chat markers and the six tags as
special tokens (:func:`pr1_eval.testing.tiny_model.build_tokenizer`), so what is stripped or kept
is what a real decode strips or keeps. Every row's truth (problem, tagged response, token counts,
cut or not) is returned beside the files, so tests compare imports with values computed here.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parents[2] / "pr1_eval" / "data" / "prompts" / "parallel_r1_v3.txt"


@lru_cache(maxsize=1)
def tokenizer() -> Any:
    from pr1_eval.testing.tiny_model import build_tokenizer

    return build_tokenizer(TEMPLATE.read_text(encoding="utf-8"))


@dataclass
class Truth:
    """What one dumped row is, known before it was written."""

    problem: str
    gold: str
    response: str  # tagged, no eos, no pad (cut at the budget when cut)
    n_prompt_tokens: int
    n_response_tokens: int  # what VERL's response mask counts: content + eos
    cut: bool
    score: float
    acc: bool
    uid: str = ""


def render(problem: str) -> str:
    return TEMPLATE.read_text(encoding="utf-8").replace("{problem}", problem)


def response_text(i: int, gold: str, parallel: bool, long: bool = False) -> str:
    head = "Let me set up the equations.\n"
    block = ("<Parallel><Path>Try x = 12: then 12 + 12 = 24.</Path><Path>Alternatively 36 - 12 = 24.</Path>"
             "</Parallel><Summary>Both paths give 24.</Summary>\n") if parallel else ""
    filler = " We double check every step carefully." * (40 if long else 0)
    answer = gold if i % 3 else "7"  # every third sample answers 7: wrong unless the gold is 7
    return f"{head}{block}Case {i}.{filler}\nFinal Answer: {answer}"


def encode_rows(items: list[tuple[str, str, str]], max_prompt: int, max_response: int
                ) -> tuple[list[list[int]], list[list[int]], list[Truth]]:
    """(problem, gold, response) → padded prompt and response ids (as VERL holds them) and the truth."""
    tok = tokenizer()
    prompts, responses, truths = [], [], []
    for problem, gold, response in items:
        ids = tok.apply_chat_template([{"role": "user", "content": render(problem)}], add_generation_prompt=True,
                                      tokenize=True)
        ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        assert len(ids) < max_prompt, "raise max_prompt for this fixture"
        prompts.append([tok.pad_token_id] * (max_prompt - len(ids)) + ids)
        body = tok(response, add_special_tokens=False)["input_ids"]
        cut = len(body) >= max_response
        full = body[:max_response] if cut else body + [tok.eos_token_id]
        responses.append(full + [tok.pad_token_id] * (max_response - len(full)))
        kept = tok.decode(full[:-1] if not cut else full, skip_special_tokens=False)
        acc = response.rstrip().endswith(f"Final Answer: {gold}") and not cut
        truths.append(Truth(problem, gold, kept, len(ids), len(full), cut, 1.0 if acc else -1.0, acc))
    return prompts, responses, truths


def fork_dump_generations(inputs: list[str], outputs: list[str], scores: list[float],
                          reward_extra_infos_dict: dict[str, list[Any]], dump_path: str, global_steps: int) -> None:
    """The Parallel-R1 fork's ``_dump_generations`` output, byte for byte (see the module docstring)."""
    os.makedirs(dump_path, exist_ok=True)
    n = len(inputs)
    base: dict[str, list[Any]] = {"input": inputs, "output": outputs, "score": scores, "step": [global_steps] * n}
    for key, values in reward_extra_infos_dict.items():
        if len(values) == n:
            base[key] = values
    lines = [json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False) for i in range(n)]
    with open(os.path.join(dump_path, f"{global_steps}.jsonl"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def _items(problems: list[tuple[str, str]], n: int, seed: int, long_every: int = 0) -> list[tuple[str, str, str]]:
    items = []
    for p, (problem, gold) in enumerate(problems):
        for j in range(n):
            i = p * n + j
            items.append((problem, gold, response_text(i, gold, parallel=i % 2 == 0,
                                                       long=bool(long_every) and i % long_every == 1)))
    return items


def write_fork_step(folder: Path, step: int, problems: list[tuple[str, str]], n: int, *, validation: bool,
                    max_prompt: int = 900, max_response: int = 160, seed: int = 0) -> list[Truth]:
    """One fork dump file; rows shuffled (batch balancing scatters a prompt's rollouts)."""
    tok = tokenizer()
    prompts, responses, truths = encode_rows(_items(problems, n, seed, long_every=5), max_prompt, max_response)
    order = list(range(len(truths)))
    random.Random(seed + step).shuffle(order)
    prompts, responses, truths = ([x[i] for i in order] for x in (prompts, responses, truths))
    inputs = [tok.decode(p, skip_special_tokens=validation) for p in prompts]
    outputs = tok.batch_decode(responses, skip_special_tokens=False)
    scores = [t.score for t in truths]
    extra = {"score": scores, "acc": [t.acc for t in truths], "pred": [t.gold if t.acc else "7" for t in truths]}
    if validation:
        extra = {"reward": list(scores), **extra}
    fork_dump_generations(inputs, outputs, scores, extra, str(folder), step)
    return truths


def _drain(trainer: Any) -> None:
    trainer._shutdown_dump_executor()


def write_v1_step(folder: Path, step: int, problems: list[tuple[str, str]], n: int, *, validation: bool,
                  padding_rows: int = 0, max_prompt: int = 900, max_response: int = 160) -> list[Truth]:
    """One VERL 0.9.1 V1 dump, through ``PPOTrainer._dump_generations`` (threaded writer)."""
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync  # the default V1 trainer

    tok = tokenizer()
    items = _items(problems, n, step)
    prompts, responses, truths = encode_rows(items, max_prompt, max_response)
    uids = [str(uuid.uuid4()) for _ in problems]
    # validation: each repeated row its own uid (V1 gives each dataset row one); rollouts: one uid per prompt
    keys = [f"{uids[i // n]}_{i % n}_0" if not validation else f"{uuid.uuid4()}_0_0" for i in range(len(items))]
    for t, key in zip(truths, keys, strict=True):
        t.uid = key
    if padding_rows:
        pad_uid = f"pad{uuid.uuid4().hex}"
        keys += [f"{pad_uid}_{i}_0" for i in range(padding_rows)]
        prompts += [prompts[0]] * padding_rows
        responses += [[tok.eos_token_id] + [tok.pad_token_id] * (max_response - 1)] * padding_rows
    order = sorted(range(len(keys)), key=lambda i: (keys[i].rsplit("_", 2)[0], int(keys[i].rsplit("_", 2)[1])))
    inputs = [tok.decode(prompts[i], skip_special_tokens=True) for i in order]
    outputs = [tok.decode(responses[i], skip_special_tokens=True) for i in order]
    scores = [truths[i].score if i < len(truths) else 0.0 for i in order]
    gts = [truths[i].gold if i < len(truths) else truths[0].gold for i in order]
    extra: dict[str, list[Any]] = {"uid": [keys[i] for i in order]}
    if validation:
        accs = [truths[i].acc if i < len(truths) else False for i in order]
        extra = {"reward": list(scores), "acc": accs} | extra
    trainer = object.__new__(PPOTrainerSync)
    trainer.global_steps = step
    trainer._init_dump_executor()
    trainer._dump_generations(inputs, outputs, gts, scores, extra, str(folder))
    _drain(trainer)
    return truths


def write_legacy_step(folder: Path, step: int, problems: list[tuple[str, str]], n: int, *, validation: bool,
                      max_prompt: int = 900, max_response: int = 160) -> list[Truth]:
    """One VERL 0.9.1 legacy dump, through ``RayPPOTrainer._dump_generations``; the rollout's reward
    extras carry the reward's own ``step`` as a float, which overwrites the trainer's."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    tok = tokenizer()
    prompts, responses, truths = encode_rows(_items(problems, n, step), max_prompt, max_response)
    inputs = tok.batch_decode(prompts, skip_special_tokens=True)
    outputs = tok.batch_decode(responses, skip_special_tokens=True)
    scores = [t.score for t in truths]
    accs = [t.acc for t in truths]
    extra: dict[str, list[Any]] = ({"reward": list(scores), "acc": accs} if validation
                                   else {"score": list(scores), "acc": accs, "step": [float(step)] * len(truths)})
    trainer = object.__new__(RayPPOTrainer)
    trainer.global_steps = step
    trainer._init_dump_executor()
    trainer._dump_generations(inputs, outputs, [t.gold for t in truths], scores, extra, str(folder))
    _drain(trainer)
    return truths


def aime_problems(count: int) -> list[tuple[str, str]]:
    from pr1_eval.inputs.tasks import load_task

    return [(p.problem, p.gold) for p in load_task("aime24").problems[:count]]


def training_problems(count: int) -> list[tuple[str, str]]:
    """Problems no benchmark holds (the job's training set), with integer golds."""
    return [(f"A training problem number {i}: what is {i} + {i + 1} when computed exactly?", str(2 * i + 1))
            for i in range(count)]
