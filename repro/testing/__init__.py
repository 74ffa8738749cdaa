"""Small fixtures for repro's CPU tests: the tiny model, a tag-free base, a fake VERL checkpoint.

Kept in the package (not in a conftest) so every ``tests/repro/`` module shares them and
so a user can reproduce a test by hand. Nothing here is used in training.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pr1_eval.testing.tiny_model import cached_tiny_model
from repro.stages import CONFIG_DIR


def tiny_model_dir(kind: str = "random") -> Path:
    """pr1-eval's tiny Qwen3 model (six tags as special tokens), built once per machine."""
    return Path(cached_tiny_model(kind=kind))


def build_untagged_base(out: Path, *, free_rows: int = 0, tied: bool = True, seed: int = 0) -> Path:
    """A tiny Qwen3 + byte-level BPE tokenizer *without* the six tags (the input of ``add-tokens``).

    ``free_rows`` extra embedding rows beyond the vocabulary mimic Qwen's padded matrix.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    corpus = ["Natalia sold 48 clips in April and half as many in May. Final Answer: 72"] * 20
    corpus += ["Let x be the number of cats; then 2x + 3 = 11, so x = 4.", "<path> and <Parallelogram> are plain text."]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", extra_special_tokens=["<|im_start|>"]
    )
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(fast) + free_rows,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        tie_word_embeddings=tied,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


def fake_verl_checkpoint(model_dir: Path, root: Path, step: int, *, ppo: bool = True) -> Path:
    """A one-rank FSDP checkpoint in VERL's layout (``global_step_N[/actor]`` with shards, ``fsdp_config.json``
    and ``huggingface/``) made from an HF model, for testing ``merge`` without a GPU."""
    import torch
    from transformers import AutoModelForCausalLM

    step_dir = root / f"global_step_{step}"
    shards = step_dir / "actor" if ppo else step_dir
    (shards / "huggingface").mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    torch.save(model.state_dict(), shards / "model_world_size_1_rank_0.pt")
    (shards / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": 1}))
    for item in model_dir.iterdir():
        if item.is_file() and not item.name.endswith((".safetensors", ".bin")):
            shutil.copy(item, shards / "huggingface" / item.name)
    return step_dir


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def compose_stage(stage: str, overrides: list[str]) -> Any:
    """A stage config composed exactly as ``pr1-repro run`` composes it (Hydra, repro's configs)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=stage, overrides=overrides)


def forkjoin_agent_loop(cfg: Any, server: Any, tokenizer: Any) -> Any:
    """The ``pr1_forkjoin`` agent loop instantiated the way VERL's ``AgentLoopWorker._run_agent_loop``
    does it (registry entry → ``hydra.utils.instantiate`` with the worker's arguments)."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import repro.agent_loop as agent_loop

    return hydra.utils.instantiate(
        config=_agent_loop_registry[agent_loop.AGENT_NAME],
        trainer_config=DictConfigWrap(cfg),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type="qwen3",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        tools=ToolListWrap([]),
    )
