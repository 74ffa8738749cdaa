"""Prompt templates and rendering through the model's chat template.

Templates: ``parallel_r1_v3`` (the paper's) and ``sequential_baseline`` (the paper's GRPO
baseline), both packaged with pr1-eval (``pr1_eval/data/prompts``, sha256-checked) and
overridable by a folder in ``$PR1_PROMPTS_DIR`` or a ``prompts/`` folder beside an explicit data
folder; ``boxed`` (a plain ``\\boxed{}`` instruction, built in); or any file given with
``--prompt FILE``. ``{problem}`` is replaced by plain string replacement: problems contain
braces, so ``str.format`` would break.
The user message goes through the tokenizer's chat template with no system message; a
tokenizer without a chat template gets the bare message.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import PACKAGED_PREFIX, packaged_prompts_dir, resolve_prompts_dir, verified_packaged_file
from pr1_eval.protocol.paper_settings import PAPER_PROMPT

PLACEHOLDER = "{problem}"
BOXED_TEMPLATE = "{problem}\nPlease reason step by step, and put your final answer within \\boxed{}."
SHARED_TEMPLATES = {"parallel_r1_v3": "parallel_r1_v3.txt", "sequential_baseline": "sequential_baseline.txt"}
DEFAULT_TEMPLATE = PAPER_PROMPT


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    text: str
    source: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def render(self, problem: str) -> str:
        """The user message for ``problem``."""
        return self.text.replace(PLACEHOLDER, problem)


def _named_template(name: str, folder: Path) -> PromptTemplate:
    """A named template from ``folder``; the packaged folder's files are checked against their sha256."""
    filename = SHARED_TEMPLATES[name]
    if folder == packaged_prompts_dir():
        path = verified_packaged_file(f"prompts/{filename}")
        return PromptTemplate(name, path.read_text(encoding="utf-8"), PACKAGED_PREFIX + f"prompts/{filename}")
    path = folder / filename
    if not path.is_file():
        raise Pr1EvalError(
            f"prompt template {name!r} not found: {path} does not exist; put {filename} there or pass "
            "--prompt FILE (without PR1_PROMPTS_DIR or a prompts/ folder beside --data-dir the packaged one is used)"
        )
    return PromptTemplate(name, path.read_text(encoding="utf-8"), str(path))


def load_template(name_or_path: str = DEFAULT_TEMPLATE, data_dir: Path | None = None) -> PromptTemplate:
    """A named template or a file; errors say where templates were looked for."""
    if name_or_path == "boxed":
        return PromptTemplate("boxed", BOXED_TEMPLATE, "builtin")
    if name_or_path in SHARED_TEMPLATES:
        return _named_template(name_or_path, resolve_prompts_dir(data_dir))
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        known = ", ".join(["boxed", *SHARED_TEMPLATES])
        raise Pr1EvalError(f"--prompt {name_or_path!r} is neither a known template ({known}) nor an existing file")
    text = path.read_text(encoding="utf-8")
    if PLACEHOLDER not in text:
        raise Pr1EvalError(f"prompt file {path} has no {PLACEHOLDER} placeholder; add one where the problem goes")
    return PromptTemplate(path.stem, text, str(path))


def apply_chat(tokenizer: Any, user_message: str) -> str:
    """The full prompt text: chat template (no system message) when the tokenizer has one."""
    if getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": user_message}], tokenize=False, add_generation_prompt=True
        )
        return str(rendered)
    return user_message


def prompt_hash(prompt_text: str) -> str:
    """Short, stable id of an exact prompt (stored per sample)."""
    return hashlib.sha256(prompt_text.encode()).hexdigest()[:16]
