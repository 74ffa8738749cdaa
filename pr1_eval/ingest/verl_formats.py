"""Reading the ``{step}.jsonl`` files VERL writes (``trainer.rollout_data_dir`` / ``validation_data_dir``).

Three formats exist in the wild, told apart by a file's first row (every later row must agree):

* **parallel-r1** — the official Parallel-R1 fork (VERL 0.4.1), ``RayPPOTrainer._dump_generations``:
  ``input, output, score, step`` then the reward's keys (``acc``, ``pred``; validation also
  ``reward``). No ``gts``, no ``uid``. Training dumps decode prompt and response with the special
  tokens kept, so each prompt carries its left padding (``<|endoftext|>`` × (max_prompt_length −
  prompt tokens)) and chat markers, and each response its eos and right padding up to
  max_response_length. Its validation dump decodes the prompt *without* specials and the output
  with them. The tags survive.
* **verl-0.9.1-v1** — VERL 0.9.1's default (V1) trainer, ``trainer_base._write_generations``:
  ``input, output, gts, score, step, uid`` (validation adds ``reward`` and the reward's keys). The
  uid is ``{uuid4}_{session}_{index}`` (one uuid per prompt, new every step); rows whose uid starts
  with ``pad`` are the synthetic padding samples of ``upsample_batch_to_divisible_size``.
* **verl-0.9.1-legacy** — VERL 0.9.1's ``ray_trainer.RayPPOTrainer``: ``input, output, gts, score,
  step`` then the reward's keys; no uid. The reward's own ``step`` key, when it has one, overwrites
  the trainer's, as a float.

VERL 0.9.1 decodes with ``skip_special_tokens=True``: Parallel-R1's tags are special tokens, so they
are gone from its dumps and block structure cannot be measured (accuracy, reward and length can).

Token counts come from the padding (fork training dumps only): a response holds ``L`` tokens in
all, ``L`` = the job's ``data.max_response_length``; its count is what VERL's response mask counts
(content and eos): ``L − pads`` when the eos is ``<|im_end|>``, ``L − pads + 1`` when the eos is
the pad token itself, and ``L`` (cut: ``finish_reason='length'``) when it has neither. Prompts
likewise: ``max_prompt_length − leading pads``. Every pad is removed from the stored text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest import fields
from pr1_eval.jsonl import json_reason, unique_keys
from pr1_eval.protocol.paper_settings import PAPER_MAX_NEW_TOKENS

FORK = "parallel-r1"
V1 = "verl-0.9.1-v1"
LEGACY = "verl-0.9.1-legacy"
FORMATS = (FORK, V1, LEGACY)
PAD = "<|endoftext|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
REQUIRED = ("input", "output", "score", "step")
_TRAILING_PADS = re.compile(f"(?:{re.escape(PAD)})+\\Z")
_LEADING_PADS = re.compile(f"(?:{re.escape(PAD)})*")
#: Keys that are the row itself, not the reward's: everything else goes to ``reward_info``.
_OWN_KEYS = frozenset({"input", "output", "gts", "score", "step", "uid", "acc"})
_ASSISTANT_TAIL = re.compile(r"\s*(?:<\|im_end\|>)?\s*(?:<\|im_start\|>)?\s*assistant\s*(?:<think>\s*</think>\s*)?$")
_USER_HEAD = re.compile(r"^\s*(?:<\|im_start\|>)?\s*user\s*\n")
HINT = ("import-verl reads the {step}.jsonl files a VERL job writes to trainer.rollout_data_dir and "
        "trainer.validation_data_dir")


@dataclass(frozen=True)
class Lengths:
    """The job's padded lengths (``data.max_prompt_length`` / ``max_response_length``): the fork's
    pads count tokens only against them. Defaults: the Parallel-R1 RL scripts' 2000-token prompts
    and the paper's response budget."""

    prompt: int | None = 2000
    response: int | None = PAPER_MAX_NEW_TOKENS


@dataclass
class DumpRow:
    """One row of a dump, cleaned: text without pads, the job's reward, where it sits in its group."""

    where: str
    prompt: str
    response: str
    score: float | None
    acc: bool | None
    gold: str | None
    step: int | None
    reward_info: dict[str, Any] = field(default_factory=dict)
    group: str | None = None  # V1: the uid's uuid; None: group by prompt
    order: tuple[int, int] = (0, 0)  # V1: (session, index) inside the group
    padding: bool = False  # a V1 synthetic padding row
    n_prompt_tokens: int | None = None
    n_response_tokens: int | None = None
    finish_reason: str = "unknown"
    #: What was not stored as the file wrote it (a score or acc that is no usable value), one line each.
    notes: list[str] = field(default_factory=list)


def detect_format(row: dict[str, Any], where: str) -> str:
    """The format of a dump from one of its rows (see the module docstring)."""
    missing = [key for key in REQUIRED if key not in row]
    if missing:
        raise Pr1EvalError(f"{where}: not a VERL generations dump (no {', '.join(missing)} field); {HINT}")
    if "gts" in row:
        return V1 if "uid" in row else LEGACY
    return FORK


def read_step(value: Any, where: str) -> int:
    """A row's ``step``: an integer, or a float with an integral value (the legacy trainer's)."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise Pr1EvalError(f"{where}: step {value!r} is not a whole number; the file is damaged or not a VERL dump")


def _number(value: Any, where: str, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    raise Pr1EvalError(f"{where}: {name} {value!r} is not a number; the file is damaged or not a VERL dump")


def _score(value: Any, where: str, notes: list[str]) -> float | None:
    """``score``, the job's reward; a score that is no finite number (``NaN``, ``Infinity``, or
    ``1e309``, which JSON reads as infinity) is stored as no reward (``None``), with a note naming
    the line. Why not keep it: one NaN makes every mean reward of the step NaN, one infinity makes
    it infinite, without a word. Why not refuse the file: a dump is the only record of a training
    step and cannot be made again; the row's response is still a sample, graded by the grader."""
    number = _number(value, where, "score")
    if number is not None and not math.isfinite(number):
        notes.append(f"{where}: score {fields.shown(value)} is not a finite number; stored as no reward (could not score)")
        return None
    return number


def _acc(value: Any, where: str, notes: list[str]) -> bool | None:
    """``acc``, the job's own verdict: true/false, 1/0 (1.0/0.0). Anything else (``NaN``, ``5``,
    ``-1``, ``0.5``) is no verdict: stored as none (``None``), with a note naming the line, never
    read as right because it is above 0."""
    number = _number(value, where, "acc")
    if number is None:
        return None
    if number not in (0.0, 1.0):
        notes.append(f"{where}: acc {fields.shown(value)} is not a verdict (true/false or 1/0); stored as no verdict")
        return None
    return number == 1.0


def _text(value: Any, where: str, name: str) -> str:
    return fields.text(value, where, name, required=False)


def _gold(value: Any, where: str) -> str | None:
    """``gts``: a string, or an integer as its digits; anything else (NaN, a list, a float) is no
    gold, and the sample keeps only the job's own reward (see :mod:`pr1_eval.ingest.fields`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return fields.text(value, where, "gts", required=False) if isinstance(value, str) else None


def problem_text(prompt: str) -> str:
    """The problem inside a rendered prompt: the text after ``Problem: `` (the paper's template),
    else the user turn, with the chat markers and the assistant header removed."""
    at = prompt.find("Problem: ")
    text = prompt[at + len("Problem: "):] if at >= 0 else _USER_HEAD.sub("", prompt.replace(PAD, ""), count=1)
    return _ASSISTANT_TAIL.sub("", text).strip()


def _clean_fork(row: DumpRow, lengths: Lengths) -> None:
    """Strip the fork's pads and eos; count tokens from the padding (module docstring)."""
    body = row.response
    trailing = _TRAILING_PADS.search(body)  # one C-speed scan: 3,000 pads a row are common
    end = trailing.start() if trailing else len(body)
    n_pad = (len(body) - end) // len(PAD)
    body = body[:end].replace(PAD, "")
    eos = body.endswith(IM_END)
    if eos:
        body = body[: -len(IM_END)]
    row.finish_reason = "stop" if eos or n_pad else "length"
    if lengths.response is not None:
        if n_pad > lengths.response:
            raise Pr1EvalError(f"{row.where}: the response holds {n_pad} pads, more than --max-response-length "
                               f"{lengths.response}; pass the job's data.max_response_length")
        row.n_response_tokens = lengths.response - n_pad + (1 if n_pad and not eos else 0)
    row.response = body
    prompt = row.prompt
    lead = _LEADING_PADS.match(prompt).end() // len(PAD)  # type: ignore[union-attr]  # (…)* always matches
    if IM_START in prompt and lengths.prompt is not None:  # specials kept: the padding counts the tokens
        if lead >= lengths.prompt:
            raise Pr1EvalError(f"{row.where}: the prompt holds {lead} pads, as many as --max-prompt-length "
                               f"{lengths.prompt} or more; pass the job's data.max_prompt_length")
        row.n_prompt_tokens = lengths.prompt - lead
    row.prompt = prompt.replace(PAD, "")


def _v1_group(uid: str) -> tuple[str, tuple[int, int]]:
    """``{uuid}_{session}_{index}`` → (uuid, (session, index)); any other uid is its own group."""
    parts = uid.rsplit("_", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], (int(parts[1]), int(parts[2]))
    return uid, (0, 0)


def parse_row(raw: dict[str, Any], fmt: str, where: str, lengths: Lengths) -> DumpRow:
    """One raw JSON row of format ``fmt`` as a cleaned :class:`DumpRow`."""
    for key in REQUIRED:
        if key not in raw:
            raise Pr1EvalError(f"{where}: no {key} field, unlike the file's first row; the file is damaged")
    if (fmt == FORK) == ("gts" in raw) or (fmt == V1) != ("uid" in raw):
        raise Pr1EvalError(f"{where}: this row's fields ({', '.join(raw)}) are not those of the file's first row "
                           f"({fmt} format); a dump holds one format")
    gold = raw.get("gts")
    notes: list[str] = []
    row = DumpRow(where=where, prompt=_text(raw["input"], where, "input"), response=_text(raw["output"], where, "output"),
                  score=_score(raw["score"], where, notes), acc=_acc(raw.get("acc"), where, notes),
                  gold=_gold(gold, where), step=read_step(raw["step"], where),
                  reward_info={k: v for k, v in raw.items() if k not in _OWN_KEYS}, notes=notes)
    if fmt == V1:
        uid = str(raw["uid"])
        row.group, row.order = _v1_group(uid)
        row.padding = uid.startswith("pad")
    if fmt == FORK:
        _clean_fork(row, lengths)
    return row


def iter_dump(path: Path, lengths: Lengths = Lengths(), digest: Any = None) -> Iterator[tuple[str, DumpRow]]:
    """Yield ``(format, row)`` for each row of one dump file, streaming; errors name file and line.
    ``digest`` (a hashlib object) is fed every byte read, so the file's hash costs no second pass."""
    fmt: str | None = None
    with path.open("rb") as handle:
        for lineno, data in enumerate(handle, start=1):
            if digest is not None:
                digest.update(data)
            if not data.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                line = data.decode("utf-8")
                raw = json.loads(line, object_pairs_hook=unique_keys(where))
            except UnicodeDecodeError as exc:
                raise Pr1EvalError(f"{where}: not UTF-8 text (byte {exc.start}); {HINT}") from None
            except json.JSONDecodeError as exc:
                raise Pr1EvalError(f"{where}: not valid JSON ({json_reason(exc, line)}); {HINT}") from None
            except RecursionError:  # what import's reader (pr1_eval.jsonl) says of the same line
                raise Pr1EvalError(f"{where}: not valid JSON (nested too deeply to read); {HINT}") from None
            if not isinstance(raw, dict):
                raise Pr1EvalError(f"{where}: expected a JSON object, found {type(raw).__name__}; {HINT}")
            if fmt is None:
                fmt = detect_format(raw, where)
            yield fmt, parse_row(raw, fmt, where, lengths)
