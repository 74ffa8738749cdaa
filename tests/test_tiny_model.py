"""The tiny offline Qwen3 model: tokenizer, chat template, loading, determinism, caching, and
whether the trained kind really emits Parallel-R1-shaped responses.

The trained model is shared per machine through ``cached_tiny_model`` (built once, under a minute
on two cores); the random one is cheap and is also built fresh where a test needs its own.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from pr1_eval import tiny_model as tm
from pr1_eval import tiny_traces
from pr1_eval.paths import packaged_prompts_dir
from pr1_eval.structure import parse_structure
from pr1_eval.tags import ALL_TAGS

SHARED_TEMPLATE = packaged_prompts_dir() / "parallel_r1_v3.txt"  # the paper's template as shipped in the package
FINAL_ANSWER = re.compile(r"^Final Answer:\s*\S", re.MULTILINE)


@pytest.fixture(scope="module")
def random_dir() -> Path:
    return tm.cached_tiny_model("random")


@pytest.fixture(scope="module")
def tokenizer(random_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(random_dir)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tokenizer_round_trips_any_text(tokenizer: Any) -> None:
    text = (
        "Let $x^2 = \\frac{3}{4}$ — naïve 漢字 😀\n<Parallel>\n<Path>\n3 + 4 = 7\n</Path>\n</Parallel>\nFinal Answer: 7"
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_each_tag_is_one_special_token(tokenizer: Any) -> None:
    tag_ids = set()
    for tag in ALL_TAGS:
        ids = tokenizer(tag, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, (tag, ids)
        tag_ids.add(ids[0])
        glued = tokenizer(f"x{tag}7", add_special_tokens=False)["input_ids"]
        assert ids[0] in glued and len(glued) == 3, (tag, glued)
        assert tag in tokenizer.all_special_tokens
    assert len(tag_ids) == 6
    for look_alike in ("<Parallelogram>", "<path>", "< Path>", "<summary>"):
        ids = tokenizer(look_alike, add_special_tokens=False)["input_ids"]
        assert not tag_ids & set(ids), look_alike
        assert tokenizer.decode(ids) == look_alike


def test_special_tokens_and_chat_template(tokenizer: Any) -> None:
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert tokenizer.eos_token_id != tokenizer.pad_token_id
    messages = [{"role": "user", "content": "What is 3 + 4?"}]
    with_prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert with_prompt == "<|im_start|>user\nWhat is 3 + 4?<|im_end|>\n<|im_start|>assistant\n"
    without = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert without == "<|im_start|>user\nWhat is 3 + 4?<|im_end|>\n"
    ids = tokenizer(with_prompt, add_special_tokens=False)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")


def test_harness_prompt_rendering_matches(tokenizer: Any) -> None:
    from pr1_eval.prompts import apply_chat

    message = tiny_traces.paper_template().replace("{problem}", "What is 3 + 4?")
    assert apply_chat(tokenizer, message) == f"<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n"


def test_loads_with_auto_classes(random_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(random_dir)
    assert model.config.model_type == "qwen3"
    assert model.generation_config.eos_token_id == model.config.eos_token_id
    assert model.generation_config.pad_token_id == model.config.pad_token_id
    assert tm.read_manifest(random_dir)["kind"] == "random"


def test_build_is_deterministic_given_seed(tmp_path: Path) -> None:
    a = tm.build_tiny_model(tmp_path / "a", seed=0)
    b = tm.build_tiny_model(tmp_path / "b", seed=0)
    c = tm.build_tiny_model(tmp_path / "c", seed=1)
    print(f"random build: {tm.read_manifest(a)['build_seconds']} s")
    assert _sha(a / "tokenizer.json") == _sha(b / "tokenizer.json")
    assert _sha(a / "model.safetensors") == _sha(b / "model.safetensors")
    assert _sha(a / "model.safetensors") != _sha(c / "model.safetensors")


def test_synthetic_traces_are_well_formed_and_varied() -> None:
    rng = random.Random(0)
    shapes = set()
    for _ in range(300):
        trace = tiny_traces.make_trace(rng)
        structure = parse_structure(trace.response)
        assert structure.format_ok, (structure.error, trace.response)
        assert trace.response.endswith(f"\nFinal Answer: {trace.answer}")
        assert "{problem}" not in trace.user
        shapes.add((structure.n_blocks, tuple(structure.paths_per_block)))
    assert {(0, ()), (1, (2,)), (1, (3,)), (2, (2, 2))} <= shapes


def test_paper_template_is_read_from_the_shared_file() -> None:
    assert SHARED_TEMPLATE.read_text(encoding="utf-8").rstrip("\n") == tiny_traces.paper_template()


def test_cache_builds_once_under_concurrency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tm.CACHE_ENV, str(tmp_path))
    (tmp_path / f"tiny-random-{tm.CACHE_VERSION}").mkdir()  # a half-built leftover, no manifest
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(tm.cached_tiny_model("random"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1] == tmp_path / f"tiny-random-{tm.CACHE_VERSION}"
    assert (results[0] / "config.json").is_file() and tm.read_manifest(results[0])["kind"] == "random"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == [results[0].name]
    with pytest.raises(ValueError):
        tm.cached_tiny_model("huge")


@pytest.fixture(scope="module")
def trained_dir() -> Path:
    path = tm.cached_tiny_model("trained")
    manifest = tm.read_manifest(path)
    print(f"trained tiny model: {manifest}")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("template", ["paper", "short"])
def test_trained_model_samples_are_mostly_well_formed(trained_dir: Path, template: str) -> None:
    text = SHARED_TEMPLATE.read_text(encoding="utf-8")
    text = text if template == "paper" else tiny_traces.SHORT_TEMPLATE
    samples = tm.sample_responses(trained_dir, "What is 3 + 4?", n=32, seed=0, template=text, max_new_tokens=120)
    parsed = [parse_structure(s) for s in samples]
    well_formed = sum(p.format_ok and p.has_parallel for p in parsed) / len(samples)
    final = sum(bool(FINAL_ANSWER.search(s)) for s in samples) / len(samples)
    print(f"{template}: well-formed with a block {well_formed:.0%}, Final Answer line {final:.0%}")
    assert well_formed >= 0.6, samples
    assert final >= 0.6, samples
    assert any(tag in s for s in samples for tag in ALL_TAGS)  # decoding keeps the tags
    assert tm.format_rates(samples) == {"well_formed_with_block": well_formed, "final_answer": final}


@pytest.mark.slow
def test_trained_model_keeps_the_format_on_a_competition_style_problem(trained_dir: Path) -> None:
    """Benchmark problems are long and full of LaTeX; the model still answers in format (less often)."""
    problem = (
        "Let $ABC$ be a triangle with $AB = 13$, $BC = 14$, and $CA = 15$. The incircle of $\\triangle ABC$ "
        "touches $BC$ at $D$, and $M$ is the midpoint of $BC$. If $DM^2 + 2^{10}$ can be written as "
        "$\\frac{m}{n}$ for relatively prime positive integers $m$ and $n$, find the remainder when $m+n$ "
        "is divided by $1000$."
    )
    samples = tm.sample_responses(trained_dir, problem, n=32, seed=0, max_new_tokens=160)
    rates = tm.format_rates(samples)
    print(f"competition-style problem: {rates}")
    assert rates["well_formed_with_block"] >= 0.25, samples
    assert rates["final_answer"] >= 0.6, samples


@pytest.mark.slow
def test_trained_model_keeps_tags_as_single_generated_tokens(trained_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(trained_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(trained_dir)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": tiny_traces.SHORT_TEMPLATE.replace("{problem}", "What is 2 + 5?")}],
        tokenize=False,
        add_generation_prompt=True,
    )
    encoded = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    output = model.generate(**encoded, do_sample=False, max_new_tokens=120)
    new_ids = output[0, encoded["input_ids"].shape[1] :].tolist()
    text = tokenizer.decode(new_ids, skip_special_tokens=False)
    tag_ids = {tokenizer.convert_tokens_to_ids(tag) for tag in ALL_TAGS}
    assert tag_ids & set(new_ids), text
    assert "<Parallel>" in text and "Final Answer:" in text, text
    assert new_ids[-1] == tokenizer.eos_token_id, text
