"""One real VERL SFT epoch of the Seen and the Unseen variant on the tiny model, merged and scored.

Why: nothing of repro/ has trained a step; VERL's trainers need an accelerator. VERL's SFT trainer
needs neither vLLM nor SGLang, so it fits the GPU machine this project is sometimes lent (one H200,
no network, Python 3.12 with torch 2.11 and transformers 5.17 installed, at most 64 MiB carried per
call). The stages, each printed as one line with its time (and loss where there is one):

1. install: the carried wheels (``.whl-sft/``, see :data:`WHEELS`) that the machine lacks, or has
   older, into ``/tmp/site`` with ``pip install --no-index --no-deps --target``;
2. tiny model (``pr1_eval.testing.tiny_model``, trained kind) and SFT data (``pr1-repro data`` on the
   fixture slices in tests/fixtures: 33 Parallel-GSM8K rows);
3. per variant: ``pr1-repro run sft|sft_unseen`` (VERL's ``verl.trainer.sft_trainer`` under torchrun,
   one GPU, one epoch), ``pr1-repro merge`` (``python -m verl.model_merger merge --backend fsdp``)
   and ``pr1-eval run --engine hf`` on the merged checkpoint (fork-join for Seen, structured for Unseen).

How the wheel list was found (on CPU, VERL 0.9.1 installed): every module ``verl.trainer.sft_trainer``,
``repro.structured_actor``, VERL's FSDP merger and ``pr1-eval run`` import, mapped to distributions,
minus the GPU image's package list, each remaining one then hidden from the import system (absent,
not broken) to see whether the import still succeeds: ``TransferQueue``, ``msgspec``, ``pyzmq``,
``nvtx``, ``python-multipart``, ``cachetools``, ``sniffio``, ``google-*`` and OpenTelemetry's SDK,
exporters and protos are optional there; what fails without it is in :data:`WHEELS` (with what those
need: ``lazy-importer`` for ``importlib-metadata``). ``antlr4-python3-runtime`` 4.9.3 exists only as a
source distribution, so ``download`` builds its (pure-Python) wheel here.

Ray: ``verl/protocol.py`` imports ray at module level, and ray's wheel (about 70 MB for Python 3.12)
does not fit the carry limit. The single-node SFT trainer and the merger never call Ray, so when
``import ray`` fails on the machine a stub package is put on the path: imports and decorators
resolve (what VERL 0.9.1 touches at import: ``ray.remote``, ``ray.actor.ActorHandle``,
``ray.ObjectRef``, ``ray.util.placement_group``, ``ray.util.scheduling_strategies``,
``ray.experimental.state.api``), any call into it at run time raises.

The Seen stage runs with ``model.use_remove_padding=false`` and sdpa: its production config packs
sequences for flash-attention, which the machine does not have (nor can it build it).

    python bench/gpu_sft_check.py download          # here, with network: fill .whl-sft/ (about 7 MB)
    python bench/gpu_sft_check.py run --out OUT     # on the GPU machine (bench/gpu_sft_check.sh)
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEEL_DIR = ROOT / ".whl-sft"
SITE = Path("/tmp/site")
STUB = Path("/tmp/pr1-ray-stub")
WHEELS = (
    "verl==0.9.1", "hydra-core==1.3.8", "omegaconf==2.3.1", "antlr4-python3-runtime==4.9.3", "tensordict==0.10.0",
    "pyvers==0.1.0", "orjson==3.13.0", "importlib-metadata==10.2.0", "lazy-importer==0.1.0", "codetiming==1.4.0",
    "torchdata==0.11.0", "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "fastapi==0.165.0",
    "starlette==1.10.0", "uvicorn==0.54.0", "pydantic==2.14.4", "pydantic-core==2.50.5", "annotated-types==0.8.0",
    "typing-inspection==0.4.5", "typing-extensions==4.16.0", "opentelemetry-api==1.45.2", "math-verify==0.9.0",
    "latex2sympy2-extended==1.11.0",
)
"""What VERL 0.9.1's SFT trainer, its merger and ``pr1-eval run`` import that the GPU image lacks."""
SOURCE_ONLY = {"antlr4-python3-runtime"}
GPU_IMAGE = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-ml-py onnx onnx-ir onnxruntime onnxscript opencv-python-headless
optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())  # noqa: SIM905 - a package list, easier to read and update as text
"""The GPU machine's Python packages as listed for it (read 2026-11-17): the carried wheels may need only these."""
NOT_IMPORTED = frozenset({"ray", "wandb", "pylatexenc"})
"""verl's requirements that its SFT trainer and merger never import (ray: see the stub below)."""
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
            "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
VARIANTS = {"seen": ("sft", "forkjoin"), "unseen": ("sft_unseen", "structured")}
SFT_OVERRIDES = ("trainer.total_epochs=1", "data.train_batch_size=8", "data.micro_batch_size_per_gpu=2",
                 "model.enable_gradient_checkpointing=false", "trainer.logger=[console]", "trainer.save_freq=after_each_epoch")
SEEN_OVERRIDES = ("model.use_remove_padding=false", "++model.override_config.attn_implementation=sdpa")
SCORE = ("--tasks", "aime24", "--limit", "4", "-k", "2", "--max-new-tokens", "256", "--data-source", "packaged")
LOSS = re.compile(r"train/loss:\s*([-+0-9.eE]+)")

RAY_STUB = '''"""A stand-in for ray (pr1-eval bench/gpu_sft_check.py): imports resolve, calls raise."""
import importlib.abc, importlib.machinery, sys, types

class _Stub:
    def __init__(self, name): self._name = name
    def __getattr__(self, item):
        if item.startswith("__"): raise AttributeError(item)
        return _Stub(self._name + "." + item)
    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):  # @ray.remote on a class or function
            return args[0]
        if self._name in ("ray.remote",):  # @ray.remote(num_gpus=...) etc.
            return lambda obj: obj
        raise RuntimeError(self._name + "(): ray is not installed here (a stub stands in for its imports)")
    def __mro_entries__(self, bases): return (object,)
    def __getitem__(self, item): return self

def _attrs(modname):
    def getattr_(name):
        if name.startswith("__"): raise AttributeError(name)
        return _Stub(modname + "." + name)
    return getattr_

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith("ray."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None
    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _attrs(spec.name)
        return module
    def exec_module(self, module): pass

sys.meta_path.insert(0, _Finder())
__path__ = []
__version__ = "0.0.0-stub"
__getattr__ = _attrs("ray")
def is_initialized(): return False
'''


def _name(spec: str) -> str:
    return spec.split("==")[0]


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:4])


def wheel_for(spec: str, folder: Path = WHEEL_DIR) -> Path | None:
    """The carried wheel of ``NAME==VERSION`` in ``folder`` (None when it is not there)."""
    name, version = spec.split("==")
    stem = re.sub(r"[-.]+", "_", name).lower()
    for path in sorted(folder.glob("*.whl")):
        parts = path.name.split("-")
        if parts[0].lower() == stem and parts[1] == version:
            return path
    return None


def needed_wheels(folder: Path = WHEEL_DIR) -> list[Path]:
    """Carried wheels whose distribution is missing here, or older than the carried one."""
    out = []
    for spec in WHEELS:
        name, version = spec.split("==")
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have is not None and _version_tuple(have) >= _version_tuple(version):
            continue
        wheel = wheel_for(spec, folder)
        if wheel is None:
            raise SystemExit(f"{spec}: no wheel in {folder}; run `python bench/gpu_sft_check.py download` first")
        out.append(wheel)
    return out


def download_commands(folder: Path = WHEEL_DIR) -> list[list[str]]:
    """The pip commands that fill ``folder`` for Python 3.12 on x86-64 Linux (run where PyPI is reachable)."""
    binary = [s for s in WHEELS if _name(s) not in SOURCE_ONLY]
    built = [s for s in WHEELS if _name(s) in SOURCE_ONLY]
    pip = [sys.executable, "-m", "pip"]
    cmds = [[*pip, "download", "--no-deps", "--only-binary=:all:", *PLATFORM, "-d", str(folder), *binary]]
    if built:  # pure-Python sdists: the wheel built here is the same for every platform
        cmds.append([*pip, "wheel", "--no-deps", "-w", str(folder), *built])
    return cmds


def install_command(wheels: Sequence[Path], target: Path = SITE) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--upgrade",
            "--target", str(target), *map(str, wheels)]


def sft_command(variant: str, model: str, data_dir: str, out: str) -> list[str]:
    """``pr1-repro run`` of the variant's SFT stage: one GPU, one short epoch (see the module docstring)."""
    stage, _ = VARIANTS[variant]
    extra = [*SFT_OVERRIDES, *(SEEN_OVERRIDES if variant == "seen" else ())]
    return [sys.executable, "-m", "repro.cli", "run", stage, "--model", model, "--data-dir", data_dir, "--out", out,
            "--gpus-per-node", "1", "--experiment", f"gpu-check-{variant}", "--", *extra]


def merge_command(out: str) -> list[str]:
    """``pr1-repro merge``: VERL's ``python -m verl.model_merger merge --backend fsdp`` per saved step."""
    return [sys.executable, "-m", "repro.cli", "merge", out]


def score_command(model: str, variant: str, out: str) -> list[str]:
    _, decoding = VARIANTS[variant]
    return [sys.executable, "-m", "pr1_eval.cli.main", "run", "--model", model, "--engine", "hf", "--decoding", decoding,
            *SCORE, "--out", out]


def data_command(out: str) -> list[str]:
    fixtures = ROOT / "tests" / "fixtures"
    return [sys.executable, "-m", "repro.cli", "data", "--sft", str(fixtures / "parallel_gsm8k_sft.jsonl"),
            "--gsm8k", str(fixtures / "gsm8k_train.jsonl"), "--dapo", str(fixtures / "dapo_math_17k.jsonl"), "--out", out]


def losses(text: str) -> list[float]:
    """The train/loss values VERL's console logger printed, in order."""
    return [float(v) for v in LOSS.findall(text)]


def stage(name: str, cmd: Sequence[str], env: dict[str, str], log_dir: Path) -> str:
    """Run one stage, keep its log, print one line (time, loss); raise on failure with the log's tail."""
    start = time.perf_counter()
    done = subprocess.run(list(cmd), env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    text = done.stdout + done.stderr
    (log_dir / f"{name}.log").write_text(text)
    found = losses(text)
    loss = f", loss {found[0]:.4f} → {found[-1]:.4f} over {len(found)} step(s)" if found else ""
    status = "ok" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
    print(f"stage {name}: {status}, {seconds:.1f} s{loss}", flush=True)
    if done.returncode != 0:
        print(text[-4000:], flush=True)
        raise SystemExit(done.returncode)
    return text


def _environment() -> dict[str, str]:
    paths = [str(SITE), str(ROOT)]
    if subprocess.run([sys.executable, "-c", "import ray"], capture_output=True).returncode != 0:
        (STUB / "ray").mkdir(parents=True, exist_ok=True)
        (STUB / "ray" / "__init__.py").write_text(RAY_STUB)
        paths.insert(1, str(STUB))
    old = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *([old] if old else [])]), "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled"}


def run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("PR1_SFT_WORK", "/tmp/pr1-sft-check"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    wheels = needed_wheels()
    if wheels:
        stage("install", install_command(wheels), dict(os.environ), out)
    print(f"  installed: {', '.join(w.name.split('-')[0] for w in wheels) or 'nothing (all present)'}", flush=True)
    env = _environment()
    text = stage("tiny-model", [sys.executable, "-c", "from pr1_eval.testing.tiny_model import cached_tiny_model; "
                                "print('MODEL=' + str(cached_tiny_model('trained')))"], env, out)
    model = Path(re.findall(r"^MODEL=(.+)$", text, re.M)[-1])
    stage("data", data_command(str(work / "data")), env, out)
    for variant in VARIANTS:
        ckpt = work / f"{variant}-sft"
        stage(f"{variant}-sft", sft_command(variant, str(model), str(work / "data"), str(ckpt)), env, out)
        stage(f"{variant}-merge", merge_command(str(ckpt)), env, out)
        merged = sorted(ckpt.glob("global_step_*/hf"), key=lambda p: int(p.parent.name.rsplit("_", 1)[-1]))
        if not merged:
            raise SystemExit(f"{variant}: no merged checkpoint under {ckpt}")
        text = stage(f"{variant}-score", score_command(str(merged[-1]), variant, str(work / f"{variant}-run")), env, out)
        print("  " + " | ".join(line.strip() for line in text.splitlines() if "aime24" in line)[:400], flush=True)
    print(f"all stages: {time.perf_counter() - start:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("download", help="fill .whl-sft/ (needs PyPI)")
    sub.add_parser("needed", help="list the carried wheels this machine would install")
    p = sub.add_parser("run", help="install what is missing, train, merge, score (needs a GPU)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_sft_out"))
    args = parser.parse_args(argv)
    if args.command == "download":
        WHEEL_DIR.mkdir(exist_ok=True)
        for cmd in download_commands():
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
        size = sum(p.stat().st_size for p in WHEEL_DIR.glob("*.whl"))
        print(f"{len(list(WHEEL_DIR.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB in {WHEEL_DIR}")
    elif args.command == "needed":
        print("\n".join(w.name for w in needed_wheels()) or "nothing")
    else:
        run(Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
