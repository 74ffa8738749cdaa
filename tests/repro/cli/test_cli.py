"""``pr1-repro``: the dry-run of every stage (command + fully resolved VERL config, checked against
the paper's settings, and the model and data paths it would read), multi-node submission,
add-tokens, merge with VERL's merger, score, ``data``, and one-line errors with exit status 2."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from repro.cli.main import main
from repro.data import MANIFEST, OUTPUTS
from repro.stages import STAGES

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

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
    assert main(["run", *own, "--dry-run", *extra]) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert text.split("\n")[0] in ("# inputs: all found", "# inputs: not checked (--no-path-check)")  # first
    head, config = text.split("# resolved config\n", 1)
    command = head.split("# command\n", 1)[1].strip()
    return shlex.split(command.replace("${RAY_ADDRESS}", "RAY")), yaml.safe_load(config)


def inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A model folder (config.json) and a data folder holding every file a stage reads."""
    model, data = tmp_path / "base", tmp_path / "data"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data.mkdir()
    for name in OUTPUTS.values():
        (data / name).write_bytes(b"")
    return model, data


@pytest.mark.parametrize("stage", list(STAGES))
def test_dry_run_of_every_stage(capsys, tmp_path, stage: str) -> None:
    model, data = inputs(tmp_path)
    cmd, cfg = dry_run(
        capsys,
        stage,
        "--model",
        str(model),
        "--gpus-per-node",
        "4",
        "--data-dir",
        str(data),
        "--",
        "trainer.save_freq=5",
    )
    assert f"--config-name={stage}" in cmd and cmd[-1] == "trainer.save_freq=5"
    assert cfg["trainer"]["n_gpus_per_node"] == 4 and cfg["trainer"]["nnodes"] == 1 and cfg["trainer"]["save_freq"] == 5
    structured = STAGES[stage].structured
    if stage in RL:
        assert cmd[:3] == ["python", "-m", "verl.trainer.main_ppo"]
        check_rl(cfg, stage, structured, data, model)
    else:
        assert cmd[0] == "torchrun" and "verl.trainer.sft_trainer" in cmd and "--nproc_per_node=4" in cmd
        check_sft(cfg, structured, data, model)


def check_rl(cfg: dict, stage: str, structured: bool, data: Path, model: Path) -> None:
    arr, actor, rollout = (
        cfg["actor_rollout_ref"],
        cfg["actor_rollout_ref"]["actor"],
        cfg["actor_rollout_ref"]["rollout"],
    )
    assert arr["model"]["path"] == str(model)
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


def check_sft(cfg: dict, structured: bool, data: Path, model: Path) -> None:
    assert cfg["model"]["path"] == str(model)
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
    assert cfg["data"]["custom_cls"]["name"] == ("StructuredSFTDataset" if structured else "OfficialEndSFTDataset")
    assert cfg["model"]["use_remove_padding"] is (not structured)


def test_multi_node_submits_to_ray(capsys) -> None:
    cmd, cfg = dry_run(
        capsys,
        "unseen_s1",
        "--no-path-check",
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
    cmd, cfg = dry_run(capsys, "sft", "--model", "/m", "--nodes", "2", "--no-path-check")
    assert cmd[:4] == ["ray", "job", "submit", "--address=RAY"] and "verl.trainer.sft_trainer_ray" in cmd
    assert cfg["trainer"]["nnodes"] == 2


def one_line_error(capsys, argv: list[str]) -> str:
    """Run ``pr1-repro argv``: exit status 2 and exactly one line on stderr (returned)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_stage_listing_and_unknown_stage(capsys) -> None:
    assert main(["stages"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in STAGES)
    assert "unknown stage 'rl_math'; choose one of sft" in one_line_error(capsys, ["run", "rl_math", "--model", "/m", "--dry-run"])
    assert "Hydra overrides" in one_line_error(capsys, ["run", "sft", "--model", "/m", "--", "--dry-run"])


def test_dry_run_names_every_missing_input_and_fails(capsys, tmp_path) -> None:
    """The dry-run still prints the command and config, then names each missing path: exit 2."""
    model, data = inputs(tmp_path)
    (data / OUTPUTS["val"]).unlink()
    assert main(["run", "rl_dapo", "--model", str(tmp_path / "nope"), "--data-dir", str(data), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert "# command" in out and "# resolved config" in out
    assert out.startswith(f"# inputs: model {tmp_path / 'nope'} does not exist; data.val_files {data / OUTPUTS['val']} does not exist\n")
    assert err.count("\n") == 1 and err.startswith("pr1-repro run: stage rl_dapo: model ") and "pr1-repro data --out" in err
    (model / "config.json").unlink()
    err = one_line_error(capsys, ["run", "sft", "--model", str(model), "--data-dir", str(data)])  # checked before launching
    assert f"model {model} has no config.json" in err
    assert main(["run", "sft", "--model", "Qwen/Qwen3-4B-Base", "--data-dir", str(data), "--dry-run"]) == 0
    assert "# note: model Qwen/Qwen3-4B-Base is not a local folder, so VERL will fetch it from the hub" in capsys.readouterr().out


@pytest.mark.parametrize("typed", ["models/qwen3-4b-tag", "./qwen3-4b-tags", "../elsewhere/m", "models/a/b"])
def test_a_mistyped_local_model_path_fails_the_dry_run(capsys, tmp_path, monkeypatch, typed: str) -> None:
    """A relative path with one slash whose first part is a folder here is a mistyped local path,
    not a hub id: the dry run exits 2 with the reason as its first line (it said 'all found', exit 0,
    and VERL would have been sent to the hub from the cluster)."""
    model, data = inputs(tmp_path)
    (tmp_path / "models" / "qwen3-4b-tags").mkdir(parents=True)
    (tmp_path / "models" / "qwen3-4b-tags" / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "sft", "--model", typed, "--data-dir", str(data), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("# inputs: model ") and "does not exist" in out.split("\n")[0]
    assert "hub" not in out.split("\n")[1] and err.startswith("pr1-repro run: stage sft: model ")
    assert main(["run", "sft", "--model", "models/qwen3-4b-tags", "--data-dir", str(data), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("# inputs: all found\n")


def test_rollout_run_options_reach_the_config(capsys, tmp_path) -> None:
    """--rollout-runs / --rollout-every / --no-rollout-runs become repro.rollout_runs (absolute paths)."""
    model, data = inputs(tmp_path)
    base = ["rl_dapo", "--model", str(model), "--data-dir", str(data)]
    _, cfg = dry_run(capsys, *base)
    assert cfg["repro"]["rollout_runs"]["dir"] == "checkpoints/pr1-repro/seen-rl-dapo/rollout_runs"
    assert cfg["repro"]["rollout_runs"]["every"] == 1, "all rollouts by default (about 5-7 GB for 300 steps)"
    _, cfg = dry_run(capsys, *base, "--out", str(tmp_path / "ckpt"))
    assert cfg["repro"]["rollout_runs"]["dir"] == str((tmp_path / "ckpt" / "rollout_runs").resolve())
    _, cfg = dry_run(capsys, *base, "--rollout-runs", str(tmp_path / "r"), "--rollout-every", "4")
    assert cfg["repro"]["rollout_runs"]["dir"] == str((tmp_path / "r").resolve())
    assert cfg["repro"]["rollout_runs"]["every"] == 4
    _, cfg = dry_run(capsys, *base, "--no-rollout-runs", "--", "repro.rollout_runs.every=2")
    assert cfg["repro"]["rollout_runs"]["dir"] is None and cfg["repro"]["rollout_runs"]["every"] == 2
    err = one_line_error(capsys, ["run", "sft", "--model", str(model), "--rollout-runs", "x", "--dry-run"])
    assert "apply to the RL stages" in err
    assert "pass 1" in one_line_error(capsys, ["run", *base, "--rollout-every", "0", "--dry-run"])


def test_usage_errors_are_one_line(capsys) -> None:
    for argv in (["bogus"], ["run", "sft"], ["score"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--help" in err, err


def test_data_command_builds_from_fixtures_and_reports_missing_inputs(capsys, tmp_path) -> None:
    out = tmp_path / "built"
    assert main(["data", "--out", str(out), "--training-dir", str(FIXTURES)]) == 0
    printed = capsys.readouterr().out
    assert "sft: 34 in → 33 out" in printed and "rl_val: 416 in → 416 out" in printed
    assert "response text: sft_answer of parallel_gsm8k_sft.jsonl (--sft-text official)" in printed
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUTS.values(), MANIFEST])
    empty = tmp_path / "empty"
    empty.mkdir()
    err = one_line_error(capsys, ["data", "--out", str(tmp_path / "none"), "--training-dir", str(empty)])
    assert err.startswith(f"pr1-repro data: training files missing (not in {empty}): parallel_gsm8k_sft.jsonl: "
                          "pass --sft FILE (JSONL with id, problem, answer, sft_answer: extra_info.answer of "
                          "zhengkid/Parallel-R1 verl/data_preprocess_scripts/data/gsm8k/adaptive_parallel_thinking_v2/"
                          "sft/train.parquet")
    assert "--sft-text released" in err
    err = one_line_error(capsys, ["data", "--out", str(tmp_path / "none"), "--training-dir", str(empty),
                                  "--sft-text", "released"])
    assert "parallel_gsm8k.jsonl: pass --sft FILE (Parallel-GSM8K JSONL with id, problem, answer, response" in err
    assert "openai/gsm8k" in err and "BytedTsinghua-SIA/DAPO-Math-17k" in err and not (tmp_path / "none").exists()
    assert "file not found" in one_line_error(capsys, ["data", "--sft", str(empty / "x.jsonl"), "--training-dir", str(FIXTURES)])
    err = one_line_error(capsys, ["add-tokens", str(tmp_path / "missing"), str(tmp_path / "o")])
    assert err == f"pr1-repro add-tokens: base model {tmp_path / 'missing'} does not exist; pass a local model folder or a hub id\n"


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
    merged = AutoModelForCausalLM.from_pretrained(str(steps[0].model_dir))
    original = AutoModelForCausalLM.from_pretrained(str(tmp_path / "tagged"))
    assert all(
        (a == b.to(a.dtype)).all()
        for a, b in zip(merged.state_dict().values(), original.state_dict().values(), strict=True)
    )
    tok = AutoTokenizer.from_pretrained(str(steps[0].model_dir))
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
    lines = capsys.readouterr().out.strip().splitlines()
    command = shlex.split(lines[0])  # score is pr1-eval sweep: one command, every checkpoint
    assert command[:3] == ["pr1-eval", "sweep", str(root)] and command[-2:] == ["--limit", "2"]
    assert command[command.index("-k") + 1] == "4" and command[command.index("--decoding") + 1] == "forkjoin"
    assert command[command.index("--tasks") + 1] == "aime24"
    assert lines[1] == f"# step10: {steps[0].model_dir} -> runs/ckpts-step10-forkjoin-k4-seed0"
    assert lines[2].startswith(f"# step20: merged first into {root / 'global_step_20' / 'hf'} (pr1-repro merge")
    assert lines[2].endswith("then scored into runs/ckpts-step20-forkjoin-k4-seed0") and len(lines) == 3


def test_score_without_merged_checkpoints_says_what_to_do(capsys, tmp_path) -> None:
    (tmp_path / "global_step_1").mkdir()
    assert main(["score", str(tmp_path), "--dry-run"]) == 0
    assert "# step1: skipped: no config.json, no merged hf/ folder and no VERL shards" in capsys.readouterr().out
    assert "does not exist or is not a folder" in one_line_error(capsys, ["score", str(tmp_path / "absent"), "--dry-run"])
    assert "no such folder" in one_line_error(capsys, ["merge", str(tmp_path / "absent")])
    (tmp_path / "empty").mkdir()
    assert "no global_step_N folders" in one_line_error(capsys, ["merge", str(tmp_path / "empty")])
    assert "no FSDP checkpoint" in one_line_error(capsys, ["merge", str(tmp_path)])  # a FileNotFoundError, one line


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
