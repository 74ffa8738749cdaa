"""HF transformers engine: batched sampling on CPU or GPU.

All samples of several requests go into one ``generate`` call (up to ``max_batch_size`` rows),
left-padded. Requests are grouped by stop tokens so each batch stops on the right tags. Every
batch is seeded from its requests' seeds, so a run with ``--seed`` is reproducible. Responses
are decoded with special tokens kept (the six tags are special tokens); only pad/eos are cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from pr1_eval.engines.base import (
    Completion,
    EngineDead,
    GenerationRequest,
    SamplingConfig,
    dead_engine_reason,
    is_greedy,
    request_sampling,
)
from pr1_eval.engines.library_bars import transformers_bars_off
from pr1_eval.errors import Pr1EvalError, describe_exception
from pr1_eval.inputs.model_files import TOKENIZER_FILES
from pr1_eval.protocol.eos import model_eos_token_ids


def load_tokenizer(model_path: str) -> Any:
    """The model's tokenizer, with a clear error when the directory has none."""
    from transformers import AutoTokenizer

    local = Path(model_path).expanduser()
    if local.is_dir() and not any((local / name).is_file() for name in TOKENIZER_FILES):
        # transformers 5 would build an empty tokenizer from config.json alone: refuse instead
        raise Pr1EvalError(
            f"model directory {local} has no tokenizer files ({', '.join(TOKENIZER_FILES)}); "
            "copy them from the base model"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path)
    except Exception as exc:
        raise Pr1EvalError(
            f"could not load a tokenizer from {model_path!r} ({describe_exception(exc)}); "
            "a model directory needs tokenizer files (tokenizer.json / tokenizer_config.json) — "
            "copy them from the base model"
        ) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _check_model_path(model_path: str) -> None:
    path = Path(model_path).expanduser()
    looks_local = model_path.startswith((".", "/", "~")) or path.exists()
    if looks_local and not (path / "config.json").is_file():
        raise Pr1EvalError(f"model directory {path} has no config.json; pass a Hugging Face model directory or hub id")


class _StepReporter:
    """A stopping criterion that never stops: it tells ``report`` each token step of a batch (the
    number of rows), so a ``generate`` call of minutes shows progress (:mod:`pr1_eval.generate.progress`)."""

    def __init__(self, report: Callable[[int], None]) -> None:
        self.report = report

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        self.report(int(input_ids.shape[0]))
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class HFEngine:
    """transformers ``generate`` behind the :class:`~pr1_eval.engines.base.Engine` interface."""

    name = "hf"
    #: Told the rows of every token step (set by the run's progress display; None: nobody listens).
    #: The structured decoder, which drives the model itself, reports its steps here too.
    on_decoding_step: Callable[[int], None] | None = None

    def __init__(
        self,
        model_path: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        max_batch_size: int = 64,
        record_logprobs: bool = False,
    ) -> None:
        from transformers import AutoModelForCausalLM

        _check_model_path(model_path)
        self.model_path = model_path
        self._tokenizer = load_tokenizer(model_path)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        torch_dtype = {"auto": torch.bfloat16 if self.device.startswith("cuda") else torch.float32,
                       "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
        try:
            with transformers_bars_off():  # pr1-eval's own lines say what loads (library_bars)
                model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype)
            self.model = model.to(self.device)  # type: ignore[arg-type]
        except OSError as exc:
            raise Pr1EvalError(f"could not load model weights from {model_path!r}: {exc}") from None
        self.model.eval()
        self.dtype = str(torch_dtype).replace("torch.", "")
        self.max_batch_size = max_batch_size
        self.record_logprobs = record_logprobs
        # The protocol's one EOS set, read from the checkpoint as vLLM reads it (config.json fallback included).
        self.eos_token_ids: set[int] = set(model_eos_token_ids(model_path, self._tokenizer))
        self.pad_token_id: int = self._tokenizer.pad_token_id

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def describe(self) -> dict[str, Any]:
        return {"backend": "hf", "device": self.device, "dtype": self.dtype, "max_batch_size": self.max_batch_size}

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        results: list[list[Completion]] = [[] for _ in requests]
        rows = [(i, r) for i, r in enumerate(requests) for _ in range(r.n)]
        # Group by stop tokens only: rows with different budgets share a batch (each is cut to its
        # own budget afterwards), so fork-join waves, whose samples all have different budgets
        # left, still run as a few batched calls rather than one call per sample.
        # (and by the request's own temperature, when it has one: fork-join paths)
        groups: dict[tuple[tuple[int, ...], float | None], list[tuple[int, GenerationRequest]]] = {}
        for i, request in rows:
            groups.setdefault((tuple(sorted(request.stop_token_ids)), request.temperature), []).append((i, request))
        for (stops, _), group in groups.items():
            group_sampling = request_sampling(group[0][1], sampling)
            for start in range(0, len(group), self.max_batch_size):
                batch = group[start : start + self.max_batch_size]
                budgets = [self._budget(r, sampling) for _, r in batch]
                try:
                    completions = self._generate_batch([r.prompt_token_ids for _, r in batch], stops, budgets,
                                                       group_sampling, batch)
                except Exception as exc:  # a CUDA error leaves the CUDA context unusable: every later call fails
                    reason = dead_engine_reason(exc)
                    if reason is None:
                        raise
                    raise EngineDead(f"the HF engine of {self.model_path} hit {reason}; this process cannot "
                                     "generate again") from exc
                for (i, _), completion in zip(batch, completions, strict=True):
                    results[i].append(completion)
        return results

    @staticmethod
    def _budget(request: GenerationRequest, sampling: SamplingConfig) -> int:
        return max(0, request.max_new_tokens if request.max_new_tokens is not None else sampling.max_new_tokens)

    def _batch_seed(self, batch: Sequence[tuple[int, GenerationRequest]], sampling: SamplingConfig) -> int | None:
        seeds = [r.seed for _, r in batch if r.seed is not None]
        if not seeds:
            return sampling.seed
        return (sum(seeds) + 1_000_003 * len(batch)) % (2**31 - 1)

    def _generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        stop_ids: tuple[int, ...],
        budgets: Sequence[int],
        sampling: SamplingConfig,
        batch: Sequence[tuple[int, GenerationRequest]],
    ) -> list[Completion]:
        from transformers import StoppingCriteriaList

        budget = max(budgets)
        if budget <= 0:
            return [Completion([], "", "length") for _ in prompts]
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            if prompt:
                input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
                attention[row, width - len(prompt) :] = 1
        seed = self._batch_seed(batch, sampling)
        if seed is not None:
            torch.manual_seed(seed)
        do_sample = not is_greedy(sampling.temperature)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                do_sample=do_sample,
                temperature=sampling.temperature if do_sample else None,
                top_p=sampling.top_p if do_sample else None,
                top_k=sampling.top_k if do_sample else None,
                max_new_tokens=budget,
                eos_token_id=sorted(self.eos_token_ids | set(stop_ids)),
                pad_token_id=self.pad_token_id,
                return_dict_in_generate=True,
                output_logits=self.record_logprobs,
                **({} if self.on_decoding_step is None else
                   {"stopping_criteria": StoppingCriteriaList([_StepReporter(self.on_decoding_step)])}),
            )
        new_tokens = out.sequences[:, width:].tolist()
        logprobs = self._chosen_logprobs(out.logits, out.sequences[:, width:]) if self.record_logprobs else None
        return [self._to_completion(tokens[: budgets[row]], set(stop_ids), budgets[row], logprobs[row] if logprobs else None)
                for row, tokens in enumerate(new_tokens)]

    @staticmethod
    def _chosen_logprobs(logits: Sequence[torch.Tensor], chosen: torch.Tensor) -> list[list[float]]:
        """Log-probabilities of the sampled tokens under the model's raw distribution."""
        stacked = torch.stack(list(logits), dim=1).float().log_softmax(-1)
        return stacked.gather(-1, chosen[:, : stacked.shape[1], None]).squeeze(-1).tolist()

    def _to_completion(self, tokens: list[int], stop_ids: set[int], budget: int, logprobs: list[float] | None) -> Completion:
        kept: list[int] = []
        finish, stop_token = "length", None
        for token in tokens:
            if token in stop_ids:
                kept.append(token)
                finish, stop_token = "stop", token
                break
            if token in self.eos_token_ids or token == self.pad_token_id:
                finish = "eos"
                break
            kept.append(token)
        if finish == "length" and len(kept) < budget:
            finish = "eos"  # padded early: the sequence ended on pad (pad == eos tokenizers)
        text = self._tokenizer.decode(kept, skip_special_tokens=False)
        return Completion(kept, text, finish, stop_token, logprobs[: len(kept)] if logprobs is not None else None)
