"""bench/vllm_carry.py and bench/gpu_vllm_check.sh on the CPU: the split/join/sha256 round trip on a
synthetic file, damaged and missing parts named, the per-call sizes against the limit, the plan's
commands, the requirement classification and pip resolution of the real downloads (when they are
here), and the GPU script's composition (bash -n, dry run, argument parsing)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


carry = _load("vllm_carry")
DOWNLOADS = carry.DEFAULT_DIR / "wheels"


def _synthetic(tmp_path: Path) -> list[Path]:
    rng = random.Random(7)
    files = []
    for name, size in (("big-1.0-py3-none-any.whl", 2_500_000), ("small-2.0-py3-none-any.whl", 300_001),
                       ("empty-0.1-py3-none-any.whl", 0)):
        path = tmp_path / "src" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(rng.randbytes(size))
        files.append(path)
    return files


def test_split_join_round_trip_is_byte_identical(tmp_path):
    files = _synthetic(tmp_path)
    manifest = carry.split_files(files, tmp_path / "parts", part_size=700_000)
    sizes = [p["size"] for p in manifest["parts"]]
    assert sizes == [700_000] * 4 + [2_800_001 - 4 * 700_000]  # 2.8 MB cut by hand
    joined = carry.join_parts(manifest, tmp_path / "parts", tmp_path / "joined")
    assert [p.read_bytes() for p in joined] == [f.read_bytes() for f in files]
    import hashlib

    assert [e["sha256"] for e in manifest["files"]] == [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]


def test_damaged_and_missing_parts_are_named(tmp_path):
    manifest = carry.split_files(_synthetic(tmp_path), tmp_path / "parts", part_size=1_000_000)
    third = tmp_path / "parts" / manifest["parts"][2]["name"]
    data = bytearray(third.read_bytes())
    data[10] ^= 1
    third.write_bytes(bytes(data))
    with pytest.raises(carry.CarryError, match=f"part {third.name} .* damaged"):
        carry.join_parts(manifest, tmp_path / "parts", tmp_path / "joined")
    third.unlink()
    with pytest.raises(carry.CarryError, match=f"missing part\\(s\\) {third.name}"):
        carry.join_parts(manifest, tmp_path / "parts", tmp_path / "joined")


def test_park_checks_each_call_and_install_needs_every_part(tmp_path):
    manifest = carry.split_files(_synthetic(tmp_path), tmp_path / "parts", part_size=1_500_000)
    parked = tmp_path / "parked"
    for index, part in enumerate(manifest["parts"], 1):
        call = tmp_path / f"call-{index}"
        call.mkdir()
        (tmp_path / "parts" / part["name"]).rename(call / part["name"])
        (call / carry.MANIFEST).write_text(json.dumps(manifest))
    first = carry.park(tmp_path / "call-1", parked)
    assert "1/2 parts there" in first and manifest["parts"][1]["name"] in first
    with pytest.raises(carry.CarryError, match="missing part"):
        carry.install(parked, tmp_path / "site")
    second = tmp_path / "call-2" / manifest["parts"][1]["name"]
    second.write_bytes(second.read_bytes()[:-1])  # cut short in transfer
    with pytest.raises(carry.CarryError, match="damaged"):
        carry.park(tmp_path / "call-2", parked)


def test_part_size_leaves_room_for_the_tree_and_margin():
    tree = carry.tree_bytes()
    size = carry.part_size_for(tree)
    assert size % carry.MIB == 0
    assert tree + size + carry.MARGIN <= carry.CALL_LIMIT
    assert tree + size + carry.MARGIN + carry.MIB + 64 * 1024 > carry.CALL_LIMIT  # the largest whole MiB
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    assert tree >= sum((ROOT / f).stat().st_size for f in listed if (ROOT / f).is_file())
    with pytest.raises(carry.CarryError, match="leaves no room"):
        carry.part_size_for(63 * carry.MIB)


def test_plan_lines_fit_the_call_limit(tmp_path):
    manifest = carry.split_files(_synthetic(tmp_path), tmp_path / "parts", part_size=1_000_000)
    manifest["tree_bytes"] = 3_000_000
    lines = carry.plan_lines(manifest, carry.DEFAULT_DIR)
    commands = [line for line in lines if line.strip().startswith("command:")]
    assert len(commands) == len(manifest["parts"]) == 3
    assert all(".vllm-carry/calls/call-" in c and len(c) < 2000 for c in commands)
    assert "install --target /tmp/site" in commands[-1] and "install" not in commands[0]


def test_slim_wheel_drops_members_and_their_record_lines(tmp_path):
    import zipfile

    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo/__init__.py", "x = 1\n")
        archive.writestr("demo/big.so", b"\0" * 1000)
        archive.writestr("demo-1.0.dist-info/RECORD", "demo/__init__.py,sha256=a,6\ndemo/big.so,sha256=b,1000\n")
    out, dropped = carry.slim_wheel(wheel, tmp_path / "slim", [("demo/*.so", "why")])
    assert dropped == ["demo/big.so"]
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ["demo/__init__.py", "demo-1.0.dist-info/RECORD"]
        assert archive.read("demo-1.0.dist-info/RECORD").decode() == "demo/__init__.py,sha256=a,6\n"
    with pytest.raises(carry.CarryError, match="no member matching"):
        carry.slim_wheel(wheel, tmp_path / "slim2", [("demo/none.so", "why")])


def test_stub_version_sits_inside_every_specifier():
    from packaging.specifiers import SpecifierSet

    specs = [SpecifierSet(">=0.133.0,<0.137.0"), SpecifierSet(">=0.134")]
    version = carry.stub_version(specs)
    assert version == "0.134+stub" and all(s.contains(version) for s in specs)


needs_downloads = pytest.mark.skipif(not any(DOWNLOADS.glob("vllm-0.24.0-*.whl")),
                                     reason=f"no downloads in {DOWNLOADS}: run `python bench/vllm_carry.py download`")


@needs_downloads
def test_every_declared_requirement_is_accounted_for():
    rows = carry.classify(carry.DEFAULT_DIR, with_ray=False)
    by_name = {r[0].split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].split("!")[0].strip().lower(): r
               for r in rows if r[1].startswith("vllm-")}
    assert by_name["torch"][2] == "present" and by_name["torch"][3] == "2.11.0"
    assert by_name["pyzmq"][2] == "carried" and by_name["flashinfer-cubin"][2] == "left out"


@needs_downloads
@pytest.mark.slow
def test_the_wheel_list_resolves_for_python_312():
    resolved = carry.resolve(carry.DEFAULT_DIR, with_ray=False)
    real = {r for r in resolved if "+stub" not in r}
    assert "vllm==0.24.0" in real and len(real) == len(carry.wanted_pins(False))


def test_gpu_check_composes_and_dry_runs(tmp_path):
    script = ROOT / "bench" / "gpu_vllm_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path / "out"), "K": "4"}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    parts = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("DRY ")]
    assert parts == ["imports", "tiny-model", "smoke", "run-sequential", "run-forkjoin", "agree", "bench", "ray"]
    assert "--decoding forkjoin" in done.stdout and "-k 4" in done.stdout and "bench/bench_vllm.py --tiny" in done.stdout
    assert (tmp_path / "out" / "summary.txt").read_text() == done.stdout


def test_gpu_parts_parse_their_arguments():
    parts = _load("gpu_vllm_parts")
    args = parts.build_parser().parse_args(["agree", "--problems", "2", "--max-new-tokens", "64"])
    assert (args.part, args.problems, args.max_new_tokens) == ("agree", 2, 64)
    assert parts.common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    with pytest.raises(SystemExit):
        parts.build_parser().parse_args(["nope"])
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "vllm_carry.py"), "park", "/nonexistent"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "manifest.json not found" in done.stderr and "Traceback" not in done.stderr


def test_gpu_check_skips_parts_past_its_budget(tmp_path):
    env = {**os.environ, "BUDGET_S": "0", "OUT": str(tmp_path / "out"), "RUNS": str(tmp_path / "runs")}
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_vllm_check.sh")], capture_output=True, text=True, env=env,
                          cwd=ROOT, check=True)
    skipped = [line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.startswith("SKIP ")]
    assert skipped[:7] == ["imports", "tiny-model", "smoke", "run-sequential", "run-forkjoin", "agree", "bench"]
    assert skipped[7] == "ray" and "FAIL" not in done.stdout  # ray: not importable, or fewer than two GPUs
    assert (tmp_path / "out" / "summary.txt").read_text() == done.stdout


def test_run_summary_reads_a_report():
    parts = _load("gpu_vllm_parts")
    report = {"status": "complete", "tasks": {"aime24": {
        "k": 4, "n_samples": 16, "complete": True, "mean@4": 0.125, "pass@4": 0.25, "format_ok_ratio": 0.875,
        "parallel_ratio": 0.9375, "tokens_per_sample": 201.4, "critical_path_tokens_per_sample": 150.0,
        "engine_calls_per_sample": 3.25}}}
    line = parts.run_summary("run-forkjoin", report)
    assert line == ("RESULT run-forkjoin: status complete; aime24 16 samples (complete), mean@4 0.125, pass@4 0.250, "
                    "format_ok 0.88, parallel 0.94, tokens/sample 201, critical path 150, engine calls 3.2")


@pytest.mark.slow
def test_agreement_part_reports_a_disagreeing_engine(tmp_path):
    """The agreement part end to end on the CPU, against the fake vllm (scripted words, fixed log-probs):
    it must run and report the fake as disagreeing with the model, or it could not catch a real one."""
    from pr1_eval.testing.tiny_model import cached_tiny_model

    model = str(cached_tiny_model("random"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_vllm"), str(ROOT)])}
    out = tmp_path / "agree.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_vllm_parts.py"), "agree", "--model", model,
                           "--device", "cpu", "--problems", "2", "--max-new-tokens", "12", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=scaled(240))
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["greedy_n"] == 2 and figures["sampled_tokens"] > 0
    assert figures["logprob_max_abs_gap"] > 0.01  # the fake's -0.25 - 0.01 k is not the model's distribution
    assert done.stdout.strip().splitlines()[-1].startswith("RESULT agree: greedy identical ")
