"""``pr1-repro``: the dry-run of every stage (command + fully resolved VERL config, checked against
the paper's settings), multi-node submission, add-tokens, merge with VERL's merger, and score."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from repro.cli import main
from repro.stages import STAGES

RL = {"rl_gsm8k", "rl_dapo", "unseen_s1", "unseen_s2", "mid_training"}
MODES = {
    "rl_gsm8k": "parallel_accuracy",
    "rl_dapo": "accuracy",
    "unseen_s1": "accuracy",
    "unseen_s2": "alternating",
    "mid_training": "mid_training",
}


def dry_run(capsys, *args: str) -> tuple[list[str], dict]:
    own, extra = (args[: args.index("--")], args[args.index("--") :]) if "--" in args else (args, ())
    assert main(["run", *own, "--dry-run", *extra]) == 0
    text = capsys.readouterr().out
    head, config = text.split("# resolved config\n", 1)
    command = head.replace("# command\n", "").strip()
    return shlex.split(command.replace("${RAY_ADDRESS}", "RAY")), yaml.safe_load(config)


@pytest.mark.parametrize("stage", list(STAGES))
def test_dry_run_of_every_stage(capsys, tmp_path, stage: str) -> None:
    cmd, cfg = dry_run(
        capsys,
        stage,
        "--model",
        "/models/base",
        "--gpus-per-node",
        "4",
        "--data-dir",
        str(tmp_path),
        "--",
        "trainer.save_freq=5",
    )
    assert f"--config-name={stage}" in cmd and cmd[-1] == "trainer.save_freq=5"
    assert cfg["trainer"]["n_gpus_per_node"] == 4 and cfg["trainer"]["nnodes"] == 1 and cfg["trainer"]["save_freq"] == 5
    structured = STAGES[stage].structured
    if stage in RL:
        assert cmd[:3] == ["python", "-m", "verl.trainer.main_ppo"]
        check_rl(cfg, stage, structured, tmp_path)
    else:
        assert cmd[0] == "torchrun" and "verl.trainer.sft_trainer" in cmd and "--nproc_per_node=4" in cmd
        check_sft(cfg, structured, tmp_path)


def check_rl(cfg: dict, stage: str, structured: bool, data: Path) -> None:
    arr, actor, rollout = (
        cfg["actor_rollout_ref"],
        cfg["actor_rollout_ref"]["actor"],
        cfg["actor_rollout_ref"]["rollout"],
    )
    assert arr["model"]["path"] == "/models/base"
    assert cfg["algorithm"]["adv_estimator"] == "grpo" and cfg["algorithm"]["use_kl_in_reward"] is False
    assert actor["use_kl_loss"] is False and actor["optim"]["lr"] == 1e-6
    assert (actor["ppo_mini_batch_size"], cfg["data"]["train_batch_size"], rollout["n"]) == (128, 256, 8)
    assert (rollout["prompt_length"], rollout["response_length"], rollout["temperature"]) == (2000, 3000, 1.0)
    assert actor["clip_ratio_high"] == (0.28 if stage in ("unseen_s2", "mid_training") else 0.2)
    reward = cfg["reward"]
    assert reward["custom_reward_function"]["path"] == "pkg://repro.rewards"
    assert reward["custom_reward_function"]["reward_kwargs"]["mode"] == MODES[stage]
    assert reward["reward_manager"] == {
        **reward["reward_manager"],
        "source": "importlib",
        "name": "TagPreservingRewardManager",
    }
    train = "rl_gsm8k.parquet" if stage == "rl_gsm8k" else "rl_dapo.parquet"
    assert cfg["data"]["train_files"] == str(data.resolve() / train)
    assert cfg["trainer"]["use_v1"] is True, "the step reaches the reward through the V1 trainer"
    assert arr["model"]["external_lib"] == ("repro.structured_actor" if structured else "repro.agent_loop")
    assert rollout["agent"]["default_agent_loop"] == ("pr1_forkjoin" if structured else "single_turn_agent")
    assert arr["model"]["use_remove_padding"] is (not structured)
    if structured:
        assert arr["model"]["override_config"]["attn_implementation"] == "sdpa"


def check_sft(cfg: dict, structured: bool, data: Path) -> None:
    assert cfg["model"]["path"] == "/models/base"
    assert (cfg["trainer"]["total_epochs"], cfg["data"]["train_batch_size"], cfg["data"]["max_length"]) == (
        5,
        128,
        4096,
    )
    assert (
        cfg["optim"]["lr"] == 1e-5
        and cfg["optim"]["lr_scheduler_type"] == "cosine"
        and cfg["optim"]["lr_warmup_steps_ratio"] == 0.1
    )
    assert cfg["data"]["train_files"] == str(data.resolve() / "sft_parallel_gsm8k.parquet")
    assert cfg["data"]["custom_cls"]["name"] == ("StructuredSFTDataset" if structured else None)
    assert cfg["model"]["use_remove_padding"] is (not structured)


def test_multi_node_submits_to_ray(capsys) -> None:
    cmd, cfg = dry_run(
        capsys,
        "unseen_s1",
        "--model",
        "/m",
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
        "--ray-address",
        "http://head:8265",
    )
    assert cmd[:4] == ["ray", "job", "submit", "--address=http://head:8265"] and cmd[4] == "--"
    assert cmd[5:8] == ["python", "-m", "verl.trainer.main_ppo"] and cfg["trainer"]["nnodes"] == 4
    cmd, cfg = dry_run(capsys, "sft", "--model", "/m", "--nodes", "2")
    assert cmd[:4] == ["ray", "job", "submit", "--address=RAY"] and "verl.trainer.sft_trainer_ray" in cmd
    assert cfg["trainer"]["nnodes"] == 2


def test_stage_listing_and_unknown_stage(capsys) -> None:
    assert main(["stages"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in STAGES)
    with pytest.raises(SystemExit, match="unknown stage"):
        main(["run", "rl_math", "--model", "/m", "--dry-run"])
    with pytest.raises(SystemExit, match="Hydra overrides"):
        main(["run", "sft", "--model", "/m", "--", "--dry-run"])


def test_add_tokens_cli_and_merge_then_score(capsys, tmp_path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.checkpoints import find_steps, merge_in_process
    from repro.testing import build_untagged_base, fake_verl_checkpoint

    base = build_untagged_base(tmp_path / "base", free_rows=8)
    assert main(["add-tokens", str(base), str(tmp_path / "tagged")]) == 0
    assert "reused free embedding rows" in capsys.readouterr().out
    root = tmp_path / "ckpts"
    fake_verl_checkpoint(tmp_path / "tagged", root, 10)
    fake_verl_checkpoint(tmp_path / "tagged", root, 20, ppo=False)
    assert main(["merge", str(root), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "-m verl.model_merger merge --backend fsdp --local_dir" in printed and "global_step_10/actor" in printed
    steps = find_steps(root)
    assert [s.step for s in steps] == [10, 20]
    merge_in_process(steps[0])
    merged = AutoModelForCausalLM.from_pretrained(str(steps[0].merged))
    original = AutoModelForCausalLM.from_pretrained(str(tmp_path / "tagged"))
    assert all(
        (a == b.to(a.dtype)).all()
        for a, b in zip(merged.state_dict().values(), original.state_dict().values(), strict=True)
    )
    tok = AutoTokenizer.from_pretrained(str(steps[0].merged))
    assert len(tok.encode("<Parallel>", add_special_tokens=False)) == 1, "the merged tokenizer keeps the tags"
    capsys.readouterr()  # the merger's own progress lines
    assert (
        main(
            [
                "score",
                str(root),
                "--dry-run",
                "--tasks",
                "aime24",
                "-k",
                "4",
                "--decoding",
                "forkjoin",
                "--",
                "--limit",
                "2",
            ]
        )
        == 0
    )
    lines = [shlex.split(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert len(lines) == 1, "only merged steps are scored"
    assert lines[0][:4] == ["pr1-eval", "run", "--model", str(steps[0].merged)]
    assert lines[0][lines[0].index("--step") + 1] == "10" and lines[0][-2:] == ["--limit", "2"]
    assert lines[0][lines[0].index("--out") + 1] == "runs/ckpts/step_10"


def test_score_without_merged_checkpoints_says_what_to_do(tmp_path) -> None:
    (tmp_path / "global_step_1").mkdir()
    with pytest.raises(SystemExit, match="pr1-repro merge"):
        main(["score", str(tmp_path), "--dry-run"])


def test_printed_commands_become_runnable_here(monkeypatch) -> None:
    import sys

    from repro.stages import RunRequest, command, executable

    local = RunRequest(STAGES["sft"], model="/m", gpus_per_node=2)
    assert executable(command(local), local)[:3] == [sys.executable, "-m", "torch.distributed.run"]
    ppo = RunRequest(STAGES["rl_dapo"], model="/m")
    assert executable(command(ppo), ppo)[:3] == [sys.executable, "-m", "verl.trainer.main_ppo"]
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    cluster = RunRequest(STAGES["rl_dapo"], model="/m", nodes=2)
    assert executable(command(cluster), cluster)[3] == "--address=http://head:8265"
