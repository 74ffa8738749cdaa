"""Carry vLLM 0.24.0 to a GPU machine that has no network, in parts that fit one call each.

Why: the GPU machine (one H200; Python 3.12 with torch 2.11.0+cu130, transformers 5.17, triton,
numba) matches vLLM 0.24.0's torch pin, but nothing can be fetched there, and at most 64 MiB
travel per call, the working tree included, while the vLLM wheel alone is 279 MB. Files left in
an ignored folder there survive from one call to the next while the machine stays warm (about
30 s after each call), so the wheels travel as one byte stream cut into parts, one part per call,
and are joined there. What travels, and why each of vLLM's other requirements does not, is in
``bench/vllm_carry_deps.py``.

Here (needs pip and network to PyPI; ``packaging``)::

    python bench/vllm_carry.py download     # the CARRIED wheels for cp312/x86-64 into .vllm-carry/wheels
    python bench/vllm_carry.py classify     # every declared requirement: carried, present or left out (why)
    python bench/vllm_carry.py resolve      # pip --dry-run --no-index over the wheels (+ stubs), Python 3.12
    python bench/vllm_carry.py plan         # cut into parts, write manifest, print the calls in order

There (stdlib only)::

    python3 bench/vllm_carry.py park .vllm-carry/calls/call-1    # each call: check the part, park it
    python3 bench/vllm_carry.py install --target /tmp/site      # last call: join, sha256, pip --no-index
    PYTHONPATH=/tmp/site python3 bench/vllm_carry.py check      # import every module vLLM needs there

``--with-ray`` adds Ray (79 MB wheel: two more calls) for ``pr1-eval run --ray``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_carry_deps as deps  # noqa: E402

MIB = 1 << 20
CALL_LIMIT = 64 * MIB  # the working tree plus everything carried, per call
MARGIN = 2 * MIB  # the tree may grow a little between planning and the calls
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / ".vllm-carry"
PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64"] + [f"manylinux_2_{n}_x86_64" for n in (24, 26, 27, 28, 31)]
MANIFEST = "manifest.json"


class CarryError(Exception):
    """A carry step that cannot go on; the message says what, where and what to do."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


# ---- splitting and joining (pure byte work, tested on synthetic files) ----

def split_files(files: Sequence[Path], out_dir: Path, part_size: int) -> dict[str, Any]:
    """Concatenate ``files`` and cut the stream into parts of ``part_size`` bytes in ``out_dir``.

    Returns the manifest: each file's name, size and sha256 (in stream order) and each part's."""
    if part_size < 1:
        raise CarryError(f"part size must be positive, got {part_size}")
    out_dir.mkdir(parents=True, exist_ok=True)
    total = sum(f.stat().st_size for f in files)
    count = max(1, -(-total // part_size))
    parts: list[dict[str, Any]] = []
    stream = _chain(files)
    for index in range(1, count + 1):
        name = f"part-{index:03d}-of-{count:03d}"
        digest, size = hashlib.sha256(), 0
        with open(out_dir / name, "wb") as handle:
            while size < part_size:
                chunk = stream.read(min(MIB, part_size - size))
                if not chunk:
                    break
                handle.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        parts.append({"name": name, "size": size, "sha256": digest.hexdigest()})
    stream.close()
    return {"files": [{"name": f.name, "size": f.stat().st_size, "sha256": sha256_file(f)} for f in files],
            "parts": parts, "total": total}


class _chain:
    """A read-only stream over several files in order."""

    def __init__(self, files: Sequence[Path]) -> None:
        self._files = list(files)
        self._handle = self._next()

    def _next(self) -> Any:
        return open(self._files.pop(0), "rb") if self._files else None  # noqa: SIM115 (closed in read/close)

    def read(self, n: int) -> bytes:
        while self._handle is not None:
            chunk = self._handle.read(n)
            if chunk:
                return chunk
            self._handle.close()
            self._handle = self._next()
        return b""

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def check_parts(manifest: dict[str, Any], part_dir: Path, names: Iterable[str] | None = None) -> list[str]:
    """Each named part (default: all) is in ``part_dir`` with its size and sha256; else a CarryError naming it."""
    wanted = {p["name"]: p for p in manifest["parts"]}
    names = list(wanted) if names is None else list(names)
    missing = [n for n in names if not (part_dir / n).is_file()]
    if missing:
        raise CarryError(f"missing part(s) {', '.join(missing)} in {part_dir}: carry the call(s) that hold them again "
                         "(the machine may have gone back between calls, which empties the parked folder)")
    for name in names:
        if name not in wanted:
            raise CarryError(f"{part_dir / name} is not a part of this manifest (parts of another plan?)")
        path, entry = part_dir / name, wanted[name]
        if path.stat().st_size != entry["size"] or sha256_file(path) != entry["sha256"]:
            raise CarryError(f"part {name} in {part_dir} is damaged (size {path.stat().st_size}, expected "
                             f"{entry['size']}; sha256 differs): carry it again")
    return names


def join_parts(manifest: dict[str, Any], part_dir: Path, out_dir: Path) -> list[Path]:
    """Check every part, rebuild the files of ``manifest`` in ``out_dir`` and check each file's sha256."""
    check_parts(manifest, part_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stream = _chain([part_dir / p["name"] for p in manifest["parts"]])
    written = []
    try:
        for entry in manifest["files"]:
            path, left, digest = out_dir / entry["name"], entry["size"], hashlib.sha256()
            with open(path, "wb") as handle:
                while left:
                    chunk = stream.read(min(MIB, left))
                    if not chunk:
                        raise CarryError(f"the parts end before {entry['name']} is complete: the manifest and "
                                         "the parts are from different plans")
                    handle.write(chunk)
                    digest.update(chunk)
                    left -= len(chunk)
            if digest.hexdigest() != entry["sha256"]:
                raise CarryError(f"{entry['name']} rebuilt from the parts has the wrong sha256: plan again here")
            written.append(path)
    finally:
        stream.close()
    return written


# ---- here: sizes, download, plan ----

def tree_bytes(root: Path = ROOT) -> int:
    """What travels with every call besides the carried paths: tracked plus untracked-not-ignored files."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout.split(b"\0")
    return sum((root / os.fsdecode(name)).stat().st_size for name in listed if name and (root / os.fsdecode(name)).is_file())


def part_size_for(tree: int, limit: int = CALL_LIMIT, margin: int = MARGIN, overhead: int = 64 * 1024) -> int:
    """The largest part (whole MiB) that fits one call beside the tree, a margin and the manifest."""
    size = (limit - tree - margin - overhead) // MIB * MIB
    if size < MIB:
        raise CarryError(f"the working tree ({tree / MIB:.1f} MiB) leaves no room for a part under "
                         f"{limit / MIB:.0f} MiB per call")
    return size


def wanted_pins(with_ray: bool) -> dict[str, str]:
    return {**deps.CARRIED, **deps.PR1_EVAL, **(deps.RAY if with_ray else {})}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def wheel_name(path: Path) -> str:
    return _norm(path.name.split("-")[0])


def download(directory: Path, with_ray: bool) -> list[Path]:
    """``pip download --no-deps`` of each pin for CPython 3.12 on x86-64 Linux into ``directory/wheels``."""
    wheels = directory / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    platform_args = [arg for p in PLATFORMS for arg in ("--platform", p)]
    pins = [p for p in wanted_pins(with_ray) if p not in deps.BUILT]
    built = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), *deps.BUILT]
    print("+", " ".join(built), flush=True)
    subprocess.run(built, check=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", *platform_args, "-d", str(wheels), *pins]
    print("+", " ".join(cmd[:12]), "...", f"({len(pins)} pins)", flush=True)
    subprocess.run(cmd, check=True)
    return chosen_wheels(directory, with_ray)


def chosen_wheels(directory: Path, with_ray: bool) -> list[Path]:
    """The downloaded wheel of each pin, largest first (vllm first); an error names what is missing or doubled."""
    found: dict[str, list[Path]] = {}
    for path in sorted((directory / "wheels").glob("*.whl")):
        found.setdefault(wheel_name(path), []).append(path)
    chosen, problems = [], []
    for pin in wanted_pins(with_ray):
        name, version = pin.split("==")
        matches = [p for p in found.get(_norm(name), []) if p.name.split("-")[1] == version]
        if len(matches) != 1:
            problems.append(f"{pin}: {len(matches)} wheels")
        else:
            chosen.append(matches[0])
    if problems:
        raise CarryError(f"{directory / 'wheels'}: {'; '.join(problems)}: run `python bench/vllm_carry.py download`")
    return sorted(chosen, key=lambda p: -p.stat().st_size)


def slim_wheel(source: Path, out_dir: Path, drop: Sequence[tuple[str, str]]) -> tuple[Path, list[str]]:
    """A copy of ``source`` without the members matching ``drop`` (and their RECORD lines)."""
    import fnmatch
    import zipfile

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / source.name
    dropped: list[str] = []
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as dst:
        for info in src.infolist():
            if any(fnmatch.fnmatch(info.filename, pattern) for pattern, _ in drop):
                dropped.append(info.filename)
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",", 1)[0] not in dropped).encode()
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)
    missing = [pattern for pattern, _ in drop if not any(fnmatch.fnmatch(name, pattern) for name in dropped)]
    if missing:
        raise CarryError(f"{source.name} has no member matching {missing}: update SLIM in bench/vllm_carry_deps.py")
    return target, dropped


def carried_wheels(directory: Path, with_ray: bool, full: bool) -> tuple[list[Path], dict[str, dict[str, Any]]]:
    """The wheels to split: the downloads, or (default) their slim copies; with what each dropped."""
    wheels = chosen_wheels(directory, with_ray)
    if full:
        return wheels, {}
    slim_dir, out, notes = directory / "slim", [], {}
    for wheel in wheels:
        drop = deps.SLIM.get(wheel_name(wheel))
        if not drop:
            out.append(wheel)
            continue
        copy = slim_dir / wheel.name
        stamp = slim_dir / f"{wheel.name}.from"
        upstream = sha256_file(wheel)
        if not (copy.is_file() and stamp.is_file() and stamp.read_text() == upstream):
            print(f"slimming {wheel.name} ...", flush=True)
            copy, _ = slim_wheel(wheel, slim_dir, drop)
            stamp.write_text(upstream)
        import zipfile

        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
        import fnmatch

        notes[wheel.name] = {"upstream_sha256": upstream, "upstream_size": wheel.stat().st_size,
                             "dropped": [n for n in names if any(fnmatch.fnmatch(n, p) for p, _ in drop)]}
        out.append(copy)
    return out, notes


def make_plan(directory: Path, with_ray: bool, part_size: int | None = None, tree: int | None = None,
              full: bool = False) -> dict[str, Any]:
    """Split the wheels into one part per call under ``directory/calls/call-N``, each with the manifest."""
    tree = tree_bytes() if tree is None else tree
    part_size = part_size or part_size_for(tree)
    wheels, slim_notes = carried_wheels(directory, with_ray, full)
    calls = directory / "calls"
    shutil.rmtree(calls, ignore_errors=True)
    staging = directory / "parts"
    shutil.rmtree(staging, ignore_errors=True)
    manifest = split_files(wheels, staging, part_size)
    manifest.update({"tree_bytes": tree, "part_size": part_size, "limit": CALL_LIMIT, "with_ray": with_ray,
                     "slim": slim_notes})
    for index, part in enumerate(manifest["parts"], 1):
        call = calls / f"call-{index}"
        call.mkdir(parents=True)
        (staging / part["name"]).rename(call / part["name"])
        (call / MANIFEST).write_text(json.dumps(manifest, indent=1))
    staging.rmdir()
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def plan_lines(manifest: dict[str, Any], directory: Path, check: str = "bash bench/gpu_vllm_check.sh") -> list[str]:
    """The calls, in order: what each carries and the command it runs (each under 2000 characters)."""
    rel = directory.resolve().relative_to(ROOT) if directory.resolve().is_relative_to(ROOT) else directory
    n, lines = len(manifest["parts"]), []
    for index, part in enumerate(manifest["parts"], 1):
        carry = f"{rel}/calls/call-{index}"
        command = f"python3 bench/vllm_carry.py park {carry}"
        if index == n:
            command += f" && python3 bench/vllm_carry.py install --target /tmp/site && {check}"
        travels = manifest["tree_bytes"] + part["size"]
        lines.append(f"call {index}/{n}: carry [\"{carry}\"], timeout_s {600 if index == n else 120}  "
                     f"({part['size'] / MIB:.1f} MiB + tree "
                     f"{manifest['tree_bytes'] / MIB:.1f} MiB = {travels / MIB:.1f} of {CALL_LIMIT / MIB:.0f} MiB)")
        lines.append(f"    command: {command}")
    return lines


# ---- here: classification and resolution ----

def marker_env(extra: str = "") -> dict[str, str]:
    return {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix", "extra": extra}


def wheel_requirements(path: Path, extras: Iterable[str] = ()) -> list[Any]:
    """The requirements a wheel declares that apply on cp312/x86-64 Linux with ``extras`` asked for."""
    import zipfile

    from packaging.requirements import Requirement

    with zipfile.ZipFile(path) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode()
    reqs = [Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines() if line.startswith("Requires-Dist:")]
    keep = []
    for req in reqs:
        envs = [marker_env(e) for e in ("", *extras)]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            keep.append(req)
    return keep


def classify(directory: Path, with_ray: bool) -> list[tuple[str, str, str, str]]:
    """Every requirement of the carried wheels: (requirement, wanted by, class, reason or version).

    Raises a CarryError naming each requirement in none of CARRIED, PRESENT, LEFT_OUT, and each
    carried or known present version outside the requirement's specifier."""
    pins = {_norm(p.split("==")[0]): p.split("==")[1] for p in wanted_pins(with_ray)}
    present = {_norm(k): v for k, v in deps.PRESENT.items()}
    left = {_norm(k): v for k, v in deps.LEFT_OUT.items()}
    rows, problems = [], []
    for wheel in chosen_wheels(directory, with_ray):
        extras = ["standard"] if wheel_name(wheel) == "fastapi" else []  # vllm asks for fastapi[standard]
        for req in wheel_requirements(wheel, extras):
            name = _norm(req.name)
            if name in pins:
                ok = req.specifier.contains(pins[name], prereleases=True)
                rows.append((str(req), wheel.name, "carried", pins[name]))
                if not ok:
                    problems.append(f"{req} (from {wheel.name}) but {pins[name]} is carried")
            elif name in present:
                version = present[name]
                rows.append((str(req), wheel.name, "present", version or "version unknown"))
                if version and not req.specifier.contains(version, prereleases=True):
                    problems.append(f"{req} (from {wheel.name}) but the GPU machine has {version}")
            elif name in left:
                rows.append((str(req), wheel.name, "left out", left[name]))
            else:
                problems.append(f"{req} (from {wheel.name}) is in none of CARRIED, PRESENT, LEFT_OUT")
    if problems:
        raise CarryError("requirements not accounted for: " + "; ".join(problems))
    return rows


def stub_wheel(directory: Path, name: str, version: str) -> Path:
    """An empty wheel standing for a package that will not travel (present there, or left out)."""
    import base64
    import zipfile

    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: carry stub\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: vllm_carry\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(text)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def stub_version(specifiers: Sequence[Any]) -> str:
    """A version inside every specifier set (the lowest bound they name, else 0), marked ``+stub``."""
    from packaging.version import Version

    candidates = sorted({Version(s.version.replace(".*", "")) for spec in specifiers for s in spec} | {Version("0")})
    for candidate in candidates:
        text = f"{candidate}+stub"
        if all(spec.contains(text, prereleases=True) for spec in specifiers):
            return text
    raise CarryError(f"no stub version satisfies {[str(s) for s in specifiers]}")


def resolve(directory: Path, with_ray: bool) -> list[str]:
    """``pip install --dry-run --no-index`` of the pins over the wheels plus stubs for what stays behind.

    Stubs are empty wheels: the GPU machine's packages at the versions a session saw (else a
    version the requirements accept), and the left-out packages. Returns what pip would install."""
    rows = classify(directory, with_ray)
    from packaging.requirements import Requirement

    specs: dict[str, list[Any]] = {}
    for req, _, kind, _ in rows:
        if kind != "carried":
            parsed = Requirement(req)
            specs.setdefault(_norm(parsed.name), []).append(parsed.specifier)
    stubs = directory / "stubs"
    shutil.rmtree(stubs, ignore_errors=True)
    stubs.mkdir(parents=True)
    known = {_norm(k): v for k, v in deps.PRESENT.items()}
    for name, spec in specs.items():
        stub_wheel(stubs, name, f"{known[name]}+stub" if known.get(name) else stub_version(spec))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        platform_args = [arg for p in PLATFORMS for arg in ("--platform", p)]
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
               "--find-links", str(directory / "wheels"), "--find-links", str(stubs), "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi",
               "none", *platform_args, "--target", str(Path(tmp) / "t"), "--report", str(report), "-q",
               *wanted_pins(with_ray)]
        env = {**os.environ, "PIP_CONSTRAINT": "", "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise CarryError(f"the wheel list does not resolve for Python 3.12:\n{done.stderr.strip()[-3000:]}")
        installed = json.loads(report.read_text())["install"]
    return [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in installed]


# ---- there: park, install, check (standard library only) ----

def park(call_dir: Path, parked: Path) -> str:
    """Check the part(s) that came with this call against its manifest and move them to ``parked``."""
    manifest_path = call_dir / MANIFEST
    if not manifest_path.is_file():
        raise CarryError(f"{manifest_path} not found: name the call's folder in `carry` (see `vllm_carry.py plan`)")
    manifest = json.loads(manifest_path.read_text())
    names = sorted(p.name for p in call_dir.iterdir() if p.name.startswith("part-"))
    if not names:
        raise CarryError(f"no part in {call_dir}: carry it (the path must be inside the repository)")
    check_parts(manifest, call_dir, names)
    parked.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.move(str(call_dir / name), str(parked / name))
    (parked / MANIFEST).write_text(json.dumps(manifest, indent=1))
    have = sorted(p["name"] for p in manifest["parts"] if (parked / p["name"]).is_file())
    missing = [p["name"] for p in manifest["parts"] if p["name"] not in have]
    return (f"parked {', '.join(names)} (sha256 ok) in {parked}: {len(have)}/{len(manifest['parts'])} parts there"
            + (f"; still to carry: {', '.join(missing)}" if missing else "; all parts there"))


def install(parked: Path, target: Path) -> list[Path]:
    """Join the parked parts, check every wheel's sha256 and ``pip install --no-index --no-deps`` them."""
    manifest_path = parked / MANIFEST
    if not manifest_path.is_file():
        raise CarryError(f"{manifest_path} not found: no call has parked a part on this machine yet")
    manifest = json.loads(manifest_path.read_text())
    wheels = join_parts(manifest, parked, parked.parent / "joined")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
           "--upgrade", "--target", str(target), *map(str, wheels)]
    done = subprocess.run(cmd)
    if done.returncode != 0:
        raise CarryError(f"pip could not install the joined wheels into {target} (exit {done.returncode})")
    for part in manifest["parts"]:  # the disk is small; the wheels stay in joined/ until the machine goes back
        (parked / part["name"]).unlink()
    return wheels


def check_imports(modules: Sequence[str]) -> tuple[list[str], list[str]]:
    """Import each module; (found with versions, missing with the error)."""
    import importlib
    import importlib.metadata as metadata

    found, missing = [], []
    for module in modules:
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # any failure to import is what this reports
            missing.append(f"{module} ({type(exc).__name__}: {str(exc)[:120]})")
            continue
        version = getattr(mod, "__version__", None)
        if version is None:
            try:
                version = metadata.version(module.split(".")[0])
            except metadata.PackageNotFoundError:
                version = "?"
        found.append(f"{module} {version}")
    return found, missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the carry folder (ignored by git)")
    parser.add_argument("--with-ray", action="store_true", help="carry Ray too (two more calls)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("download", help="here: download the wheels, then plan")
    sub.add_parser("classify", help="here: every declared requirement, carried/present/left out")
    sub.add_parser("resolve", help="here: pip --dry-run --no-index over the wheels for Python 3.12")
    plan = sub.add_parser("plan", help="here: cut into parts and print the calls")
    plan.add_argument("--part-mib", type=int, default=None, help="part size (default: what fits beside the tree)")
    plan.add_argument("--full", action="store_true", help="carry the wheels as published (six calls, not three)")
    park_p = sub.add_parser("park", help="there: check this call's part and park it")
    park_p.add_argument("call_dir", type=Path)
    inst = sub.add_parser("install", help="there: join, check sha256, pip install --no-index --no-deps")
    inst.add_argument("--target", type=Path, default=Path("/tmp/site"))
    sub.add_parser("check", help="there: import every module vLLM needs and print what is missing")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except CarryError as exc:
        print(f"vllm_carry {args.command}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    parked = directory / "parked"
    if args.command == "download":
        wheels = download(directory, args.with_ray)
        print(f"{len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 1e6:.1f} MB in {directory / 'wheels'}")
        args.command, args.part_mib, args.full = "plan", None, False
    if args.command == "classify":
        rows = classify(directory, args.with_ray)
        for req, by, kind, why in sorted(rows, key=lambda r: (r[2], r[0])):
            print(f"{kind:9s} {req:60s} {by.split('-')[0]:22s} {why}")
        print(f"\n{len(rows)} requirements: " + ", ".join(f"{sum(r[2] == k for r in rows)} {k}"
                                                         for k in ("carried", "present", "left out")))
    elif args.command == "resolve":
        resolved = resolve(directory, args.with_ray)
        real = [r for r in resolved if "+stub" not in r]
        print(f"resolves for Python 3.12: {len(real)} wheels from {directory / 'wheels'}, "
              f"{len(resolved) - len(real)} stubs (present there or left out)")
        print("  " + " ".join(real))
    elif args.command == "plan":
        manifest = make_plan(directory, args.with_ray, part_size=args.part_mib * MIB if args.part_mib else None,
                             full=args.full)
        for name, note in manifest["slim"].items():
            print(f"slim {name}: dropped {len(note['dropped'])} members ({', '.join(note['dropped'][:3])}...), "
                  f"{note['upstream_size'] / 1e6:.0f} MB upstream (sha256 {note['upstream_sha256'][:12]}...)")
        print(f"{len(manifest['files'])} wheels, {manifest['total'] / MIB:.1f} MiB in {len(manifest['parts'])} parts "
              f"of at most {manifest['part_size'] / MIB:.0f} MiB (tree {manifest['tree_bytes'] / MIB:.1f} MiB, "
              f"limit {CALL_LIMIT / MIB:.0f} MiB per call, margin {MARGIN / MIB:.0f} MiB)")
        print("Run these calls back to back (the parked parts survive only while the machine stays warm, "
              "about 30 s after each call):")
        print("\n".join(plan_lines(manifest, directory)))
    elif args.command == "park":
        print(park(args.call_dir, parked))
    elif args.command == "install":
        wheels = install(parked, args.target)
        print(f"installed {len(wheels)} wheels into {args.target} (sha256 ok); "
              f"export PYTHONPATH={args.target}:$PYTHONPATH VLLM_USE_FLASHINFER_SAMPLER=0")
    elif args.command == "check":
        found, missing = check_imports([*deps.IMPORTS_CARRIED, *deps.IMPORTS_PRESENT])
        print("imports: " + "; ".join(found))
        print(f"imports ok {len(found)}/{len(found) + len(missing)}" + (f"; MISSING: {'; '.join(missing)}" if missing else ""))
        return 1 if missing else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
