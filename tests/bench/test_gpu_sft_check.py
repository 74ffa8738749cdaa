"""What bench/gpu_sft_check.py does that a CPU can check (the training itself needs the GPU machine).

* The carried wheel list resolves for Python 3.12 on x86-64 Linux: ``pip install --dry-run
  --no-index --no-deps`` finds every pinned wheel in .whl-sft/ for that platform (skipped, saying
  how to fill it, when the folder is absent), and every requirement of a carried wheel is carried,
  on the GPU machine's package list, or one the SFT path never imports.
* VERL's SFT trainer, the structured actor and VERL's merger import with the ray stub in place of ray.
* The commands compose: both SFT stages with the script's overrides compose on VERL's
  ``sft_trainer_engine`` and pass VERL's own dataclass validation (``omega_conf_to_dataclass`` of
  model, engine, optim and checkpoint, as ``SFTTrainer._build_config`` does); the data command builds
  the SFT parquet from the fixtures; the score command parses with pr1-eval's own parser; the
  merge command is pr1-repro's; the loss parser reads VERL's console logger lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import gpu_sft_check as g  # noqa: E402

sys.path.remove(str(ROOT / "bench"))


def _key(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.skipif(not g.WHEEL_DIR.is_dir(), reason=".whl-sft/ is absent: run `python bench/gpu_sft_check.py download`")
def test_the_carried_wheels_resolve_for_python_312_on_linux(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps", "--find-links", str(g.WHEEL_DIR),
           "--only-binary=:all:", *g.PLATFORM, "--target", str(tmp_path / "site"), *g.WHEELS]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(g.wheel_for(spec) is not None for spec in g.WHEELS)
    from packaging.requirements import Requirement

    carried = {_key(s.split("==")[0]) for s in g.WHEELS}
    image = {_key(n) for n in g.GPU_IMAGE}
    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""}
    uncovered = set()
    for spec in g.WHEELS:
        wheel = g.wheel_for(spec)
        assert wheel is not None
        import zipfile

        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            lines = zf.read(meta).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = _key(req.name)
            if name not in carried | image | set(g.NOT_IMPORTED):
                uncovered.add(f"{spec} needs {req}")
    assert uncovered == set()


def test_verl_sft_and_the_merger_import_with_the_ray_stub(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(g.RAY_STUB)
    code = ("import ray; assert ray.__version__ == '0.0.0-stub', ray.__file__\n"
            "import verl.trainer.sft_trainer, verl.model_merger.fsdp_model_merger, repro.structured_actor\n"
            "try:\n    ray.get(1)\nexcept RuntimeError as e:\n    print('call raises:', e)\n")
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(300), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "call raises: ray.get(): ray is not installed here" in done.stdout


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sft") / "data"
    done = subprocess.run(g.data_command(str(out)), capture_output=True, text=True, timeout=scaled(300), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.parametrize("variant", ["seen", "unseen"])
def test_the_sft_commands_compose_and_pass_verls_validation(variant: str, data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from verl.utils.config import omega_conf_to_dataclass

    from pr1_eval.testing.tiny_model import cached_tiny_model
    from repro import stages
    from repro.cli.main import build_parser

    model = str(cached_tiny_model("trained"))
    cmd = g.sft_command(variant, model, str(data_dir), str(tmp_path / "ckpt"))
    assert cmd[:4] == [sys.executable, "-m", "repro.cli", "run"]
    split = cmd.index("--")
    args = build_parser().parse_args(cmd[3:split])
    req = stages.RunRequest(stage=stages.STAGES[args.stage], model=args.model, gpus_per_node=args.gpus_per_node,
                            data_dir=args.data_dir, out_dir=args.out, experiment=args.experiment, extra=tuple(cmd[split + 1:]))
    assert stages.entrypoint(req)[:5] == ["torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=1", "-m"]
    assert "verl.trainer.sft_trainer" in stages.entrypoint(req)
    config: Any = stages.compose(req)
    assert (config.trainer.total_epochs, config.data.train_batch_size, config.trainer.n_gpus_per_node) == (1, 8, 1)
    assert Path(config.data.train_files).is_file() and list(config.trainer.logger) == ["console"]
    assert config.model.use_remove_padding is False and config.model.override_config.attn_implementation == "sdpa"
    if variant == "unseen":
        assert config.data.custom_cls.name == "StructuredSFTDataset" and config.model.external_lib == "repro.structured_actor"
    for part in ("model", "engine", "optim", "checkpoint"):  # what SFTTrainer._build_config validates
        omega_conf_to_dataclass(config[part])


def test_merge_and_score_commands_and_the_loss_parser(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    from pr1_eval.cli.main import build_parser

    assert g.merge_command(str(tmp_path / "ckpt")) == [sys.executable, "-m", "repro.cli", "merge", str(tmp_path / "ckpt")]
    for variant, decoding in (("seen", "forkjoin"), ("unseen", "structured")):
        cmd = g.score_command(str(tmp_path / "m"), variant, str(tmp_path / "run"))
        assert cmd[:4] == [sys.executable, "-m", "pr1_eval.cli.main", "run"]
        args = build_parser().parse_args(cmd[3:])
        assert (args.engine, args.decoding, args.k, args.limit) == ("hf", decoding, 2, 4)
    lines = [concat_dict_to_str({"train/loss": v, "train/lr": 1e-5}, step=i) for i, v in enumerate([2.5, 1.75, 1e-3])]
    assert g.losses("\n".join(["noise", *lines])) == [2.5, 1.75, 1e-3]
