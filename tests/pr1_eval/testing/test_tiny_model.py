"""The tiny offline Qwen3 models: tokenizer, chat template, loading, determinism (seed, thread
count), caching, the ``tiny-model`` command, and whether the trained kinds really emit
Parallel-R1-shaped responses (the causal one sequentially, the Unseen one under the structured mask).

The trained models are shared per machine through ``cached_tiny_model`` (each built once, about
30 s on one core); the random one is cheap and is also built fresh where a test needs its own.
Quality thresholds sit well below what the deterministic seed-0 models reach (measured values in
the comments), so they hold for the model, not for a lucky draw.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.cli.main import main
from pr1_eval.inputs.prompts import load_template
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.tags import ALL_TAGS
from pr1_eval.testing import tiny_model as tm
from pr1_eval.testing import tiny_traces
from pr1_eval.testing.tiny_training import Recipe
from tests.support.deadlines import scaled

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
    from pr1_eval.inputs.prompts import apply_chat

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


_WHITESPACE_JOIN = re.compile(r"(<Parallel>|</Path>)\s+(<Path>|</Parallel>)|</Parallel>(?!\n<Summary>)")


def test_synthetic_traces_are_well_formed_and_varied() -> None:
    rng = random.Random(0)
    shapes = set()
    for _ in range(300):
        trace = tiny_traces.make_trace(rng, tiny_traces.SHORT_TEMPLATE)
        structure = parse_structure(trace.response)
        assert structure.format_ok, (structure.error, trace.response)
        assert trace.response.endswith(f"\nFinal Answer: {trace.answer}")
        assert "{problem}" not in trace.user
        assert not _WHITESPACE_JOIN.search(trace.response), trace.response  # fork-join's one block layout
        shapes.add((structure.n_blocks, tuple(structure.paths_per_block)))
    assert {(0, ()), (1, (2,)), (1, (3,)), (2, (2, 2))} <= shapes


def test_unseen_traces_close_a_block_only_after_a_check_path() -> None:
    """Under the Unseen mask a path sees only itself: its own text must say whether the block ends."""
    rng = random.Random(0)
    paths = checks = 0
    for _ in range(300):
        trace = tiny_traces.make_trace(rng, tiny_traces.SHORT_TEMPLATE, unseen=True)
        structure = parse_structure(trace.response)
        assert structure.format_ok and not _WHITESPACE_JOIN.search(trace.response), trace.response
        assert structure.n_blocks == 1, trace.response  # the Unseen model is for branching: always one block
        for block in structure.blocks:
            texts = [trace.response[p.start : p.end] for p in block.paths]
            assert texts[-1].endswith(tiny_traces.CHECK_MARK) and not any("check" in t for t in texts[:-1]), texts
            paths, checks = paths + len(texts), checks + 1
    assert 0.13 <= checks / paths <= 0.2  # ~5 paths in 6 go on to another path: most sampled blocks branch


def test_paper_template_is_the_one_run_uses() -> None:
    assert tiny_traces.paper_template() == load_template("parallel_r1_v3").text
    assert "{problem}" in tiny_traces.paper_template()


def test_cache_builds_once_under_concurrency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tm.CACHE_ENV, str(tmp_path))
    target = tm.cache_path("random")
    assert target.parent == tmp_path and tm.CACHE_VERSION in target.name
    target.mkdir()  # a half-built leftover, no manifest
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(tm.cached_tiny_model("random"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1] == target
    assert (target / "config.json").is_file() and tm.read_manifest(target)["kind"] == "random"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == [target.name]
    with pytest.raises(ValueError):
        tm.cached_tiny_model("huge")


def test_cache_key_covers_seed_template_and_code_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tm.CACHE_ENV, str(tmp_path))
    other = tmp_path / "other.txt"
    other.write_text("Think in parallel.\n{problem}", encoding="utf-8")
    names = {tm.cache_path(k, seed=s, prompt=p).name for k in tm.KINDS for s in (0, 1) for p in (None, str(other))}
    assert len(names) == len(tm.KINDS) * 4
    assert tm.cache_path("trained", prompt="parallel_r1_v3") == tm.cache_path("trained")
    old = tm.cache_path("random")
    old.mkdir()
    (old / tm.MANIFEST).write_text(json.dumps({"kind": "random", "cache_version": "v2"}))
    assert not tm.is_complete(old, "random")  # a model built by older code is rebuilt, never reused


_BUILD_SNIPPET = """
import json, sys, torch
from pr1_eval.testing import tiny_model as tm
from pr1_eval.testing.tiny_training import Recipe
out = {}
for mask in ("causal", "structured"):
    path = tm.build_trained_tiny_model(sys.argv[1] + "/" + mask, 0, structured=mask == "structured",
                                       recipe=Recipe(steps=12, mask=mask))
    out[mask] = {**tm.read_manifest(path), "caller_threads": torch.get_num_threads()}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_trained_builds_are_identical_with_one_or_two_threads(tmp_path: Path) -> None:
    """The caller's thread count does not reach the weights: a build in a one-thread process (as on a
    one-core machine) and one here on two threads give the same bytes, tokenizer included, for both
    masks."""
    import torch

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _BUILD_SNIPPET, str(tmp_path / "one")], env=env,
                          capture_output=True, text=True, timeout=scaled(600))
    assert done.returncode == 0, done.stderr[-2000:]
    one = json.loads(done.stdout.strip().splitlines()[-1])
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two = {mask: tm.read_manifest(tm.build_trained_tiny_model(
            tmp_path / "two" / mask, 0, structured=mask == "structured", recipe=Recipe(steps=12, mask=mask)))
            for mask in ("causal", "structured")}
    finally:
        torch.set_num_threads(threads)
    for mask in ("causal", "structured"):
        assert one[mask]["caller_threads"] == 1
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            assert _sha(tmp_path / "one" / mask / name) == _sha(tmp_path / "two" / mask / name), (mask, name)
        assert one[mask]["weights_sha256"] == two[mask]["weights_sha256"] == _sha(tmp_path / "two" / mask / "model.safetensors")
        assert one[mask]["loss_curve"] == two[mask]["loss_curve"] and two[mask]["train"]["intra_op_threads"] == 1
    assert one["causal"]["weights_sha256"] != one["structured"]["weights_sha256"]


def test_tiny_model_command_shares_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cached = tm.cached_tiny_model("random")
    assert main(["tiny-model", str(tmp_path / "m")]) == 0
    assert "reused the cached model" in capsys.readouterr().out
    assert _sha(tmp_path / "m" / "model.safetensors") == _sha(cached / "model.safetensors")
    assert tm.read_manifest(tmp_path / "m") == tm.read_manifest(cached)
    assert main(["tiny-model", str(tmp_path / "s"), "--structured"]) == 2
    assert "add --trained" in capsys.readouterr().err
    assert main(["tiny-model", str(tmp_path / "p"), "--prompt", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err


def test_tiny_model_refuses_a_folder_holding_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trained checkpoint's folder is never overwritten with random weights without --force; a
    file path is one line, no traceback; a folder holding a tiny model already is rewritten."""
    from pr1_eval.cli.tiny_model import TINY_MANIFEST

    assert TINY_MANIFEST == tm.MANIFEST
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"trained weights")
    assert main(["tiny-model", str(checkpoint)]) == 2
    err = capsys.readouterr().err
    assert "not empty (model.safetensors)" in err and "--force" in err and "Traceback" not in err
    assert (checkpoint / "model.safetensors").read_bytes() == b"trained weights"
    (tmp_path / "file").write_text("x")
    assert main(["tiny-model", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and len(err.strip().splitlines()) == 1
    assert main(["tiny-model", str(checkpoint), "--force"]) == 0
    assert _sha(checkpoint / "model.safetensors") == _sha(tm.cached_tiny_model("random") / "model.safetensors")
    assert main(["tiny-model", str(checkpoint)]) == 0  # a tiny model's folder: written again


def test_tiny_model_refuses_a_folder_holding_another_tiny_model(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A tiny model of another kind or seed (weights a run may have used) is not silently replaced:
    one line naming both, no torch loaded for it; the same model, or --force, goes through."""
    from pr1_eval.cli.tiny_model import TINY_MANIFEST, check_destination

    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / TINY_MANIFEST).write_text(json.dumps({"kind": "trained", "seed": 1}))
    (folder / "model.safetensors").write_bytes(b"seed-1 weights")
    assert main(["tiny-model", str(folder), "--trained"]) == 2
    err = capsys.readouterr().err
    assert "holds another tiny model (seed 1 (this command: 0))" in err and "--force" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (folder / "model.safetensors").read_bytes() == b"seed-1 weights"
    assert main(["tiny-model", str(folder)]) == 2  # random weights over trained ones
    assert "kind trained (this command: random)" in capsys.readouterr().err
    check_destination(folder, False, "trained", 1)  # the same model: rewritten as before
    check_destination(folder, True, "random", 0)  # --force


@pytest.fixture(scope="module")
def trained_dir() -> Path:
    path = tm.cached_tiny_model("trained")
    manifest = tm.read_manifest(path)
    print(f"trained tiny model: {manifest}")
    return path


@pytest.fixture(scope="module")
def structured_dir() -> Path:
    return tm.cached_tiny_model("trained-structured")


def test_cached_trained_models_are_step_counted_and_single_threaded(trained_dir: Path, structured_dir: Path) -> None:
    for path, kind, mask in ((trained_dir, "trained", "causal"), (structured_dir, "trained-structured", "structured")):
        manifest = tm.read_manifest(path)
        recipe = tm.STRUCTURED_RECIPE if mask == "structured" else tm.CAUSAL_RECIPE
        assert manifest["kind"] == kind and manifest["cache_version"] == tm.CACHE_VERSION
        assert manifest["steps"] == recipe.steps and manifest["train"]["mask"] == mask  # never cut short by a clock
        assert manifest["train"]["intra_op_threads"] == 1
        assert manifest["weights_sha256"] == _sha(path / "model.safetensors")
        assert manifest["template"]["sha256"] == hashlib.sha256(tiny_traces.paper_template().encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("template", ["paper", "short"])
def test_trained_model_samples_are_mostly_well_formed(trained_dir: Path, template: str) -> None:
    text = tiny_traces.paper_template() if template == "paper" else tiny_traces.SHORT_TEMPLATE
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


@pytest.mark.parametrize("mask", ["causal", "structured"])
def test_training_loss_equals_one_forward_per_full_row(mask: str) -> None:
    """The shared-prefix batch (prefix run once, its cache repeated, right padding, 4-D masks, LM head on
    labelled positions only, numbers weighed down) gives the loss of running every full row alone
    with ``build_mask_and_positions`` (structured) or a causal mask."""
    import torch

    from pr1_eval.protocol.mask import additive_mask, build_mask_and_positions
    from pr1_eval.protocol.tags import resolve_tag_ids
    from pr1_eval.testing import tiny_training as tt

    template = tiny_traces.paper_template()
    tokenizer, model = tm._init_model(template, 0, {**tm.TRAINED_DIMS, "hidden_size": 48, "head_dim": 12})
    rng = random.Random(3)
    unseen = mask == "structured"
    traces = [tiny_traces.make_trace(rng, template, unseen=unseen) for _ in range(3)]
    encoded = tt._encode(tokenizer, traces, {})
    tag_ids = resolve_tag_ids(tokenizer) if unseen else None
    weights = tt.token_weights(tokenizer, 0.25)
    assert weights[tokenizer.convert_tokens_to_ids("7")] == 0.25 and weights[tokenizer.eos_token_id] == 1.0
    batch = {**tt._batch(encoded, tokenizer.pad_token_id, tag_ids), "token_weights": weights}
    assert batch["prefix"].shape[1] > 100  # the paper's template is shared, so it runs once
    with torch.no_grad():
        batched = float(tt._step_loss(model, batch))
        total = weight = 0.0
        for prompt, response in encoded:
            ids = prompt + response
            if tag_ids is None:
                kwargs: dict[str, Any] = {}
            else:
                allowed, positions = build_mask_and_positions(ids, tag_ids, response_start=len(prompt))
                kwargs = {"attention_mask": additive_mask(allowed[None, None], torch.float32),
                          "position_ids": positions[None]}
            logits = model(input_ids=torch.tensor([ids]), **kwargs).logits[0]
            losses = torch.nn.functional.cross_entropy(logits[len(prompt) - 1 : -1], torch.tensor(response),
                                                       reduction="none")
            row_weights = weights[torch.tensor(response)]
            total += float((losses * row_weights).sum())
            weight += float(row_weights.sum())
    assert batched == pytest.approx(total / weight, rel=1e-5)
    if unseen:
        causal = {**batch, **tt._batch(encoded, tokenizer.pad_token_id, None)}
        with torch.no_grad():
            assert abs(float(tt._step_loss(model, causal)) - batched) > 1e-4  # the mask really differs


def test_demo_narrator_repeats_the_phase_while_it_lasts(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    from pr1_eval.cli.demo import HEARTBEAT_SECONDS, Narrator

    assert HEARTBEAT_SECONDS < 10  # the promise: a line at least every 10 s
    narrator = Narrator(every=0.3)
    with narrator.heartbeat():
        narrator.enter("training")
        time.sleep(1.6)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("] training") and 2 <= sum(line.endswith("] still training") for line in lines) <= 6


def test_demo_reuses_the_cached_model_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's own steps around the run (the run itself is the runner's, tested end to end elsewhere
    and run by CI as `pr1-eval demo`): cached model reused and copied, every task, the prompt passed on."""
    import pr1_eval.cli.report
    import pr1_eval.generate.runner
    from pr1_eval.cli.demo import run_demo

    cached = tm.cached_tiny_model("trained")
    seen: list[Any] = []
    monkeypatch.setattr(pr1_eval.generate.runner, "run_eval", lambda config: seen.append(config) or tmp_path / "run")
    monkeypatch.setattr(pr1_eval.cli.report, "print_report", lambda out: print(f"REPORT {out}"))
    assert run_demo(tmp_path, prompt=None) == tmp_path / "run"
    out = capsys.readouterr().out
    assert f"reusing the trained tiny model from the shared cache ({cached})" in out and "REPORT" in out
    assert _sha(tmp_path / "tiny-model" / "model.safetensors") == _sha(cached / "model.safetensors")
    (config,) = seen
    assert config.model == str(tmp_path / "tiny-model") and config.prompt == "parallel_r1_v3"
    assert config.tasks == ["aime24", "aime25", "amc23", "math500", "math300_pr1", "gsm8k"] and config.engine == "hf"
    assert "expected to score about 0" in out and "not accuracy" in out
