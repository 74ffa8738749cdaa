"""``pr1-eval tiny-model``: build a tiny offline Qwen3 with the six tags, for trying the pipeline without a GPU.

The model code is a test fixture (:mod:`pr1_eval.testing.tiny_model`): it loads only when the
command runs, so nothing else on the evaluation path reaches it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pr1_eval.cli.help import add_command
from pr1_eval.cli.numbers import seed_int
from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.prompts import DEFAULT_TEMPLATE

SUMMARY = "build a tiny offline Qwen3 model with the six tags"
DESCRIPTION = ("Build a tiny offline Qwen3 model with the six parallel-thinking tags (random weights, or "
               "--trained on parallel-format traces), for trying the pipeline without a GPU.")
EXAMPLES = "  pr1-eval tiny-model /tmp/tiny --trained"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "tiny-model", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("dir", metavar="DIR", help="folder the model is written to")
    p.add_argument("--trained", action="store_true", help="fit it to parallel-format traces (< 1 min on one core)")
    p.add_argument("--structured", action="store_true",
                   help="with --trained: train under the structured (Unseen) mask, for --decoding structured")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even when it holds other files or another tiny model (same-named files are "
                        "replaced)")
    p.add_argument("--seed", type=seed_int, default=0, help="weight initialisation seed")
    p.add_argument("--prompt", default=None, metavar="NAME|FILE",
                   help=f"template mixed into training (default {DEFAULT_TEMPLATE})")
    p.set_defaults(func=_cmd_tiny_model)


#: The file every tiny model folder holds (:data:`pr1_eval.testing.tiny_model.MANIFEST`, which
#: imports torch; tests/pr1_eval/testing/test_tiny_model.py checks the two agree).
TINY_MANIFEST = "tiny_model.json"


def check_destination(folder: Path, force: bool, kind: str | None = None, seed: int | None = None) -> None:
    """DIR must be a folder that is new, empty or the same tiny model already (``--force`` for
    anything else): the model's files replace same-named ones, so a trained checkpoint's weights in
    DIR would be silently overwritten with random ones, and a tiny model of another kind or seed
    with this one (a run that resumes on that folder is then refused by its fingerprint, but the
    old weights are gone). ``kind``/``seed`` None: any tiny model is accepted. Checked before torch loads."""
    if folder.exists() and not folder.is_dir():
        raise Pr1EvalError(f"tiny-model {folder}: is a file; pass a folder (new or empty) for the model")
    if force or not folder.is_dir():
        return
    if (folder / TINY_MANIFEST).is_file():
        manifest = _manifest(folder)
        other = {name: (manifest.get(name), want) for name, want in (("kind", kind), ("seed", seed))
                 if want is not None and manifest.get(name) != want}
        if other:
            what = ", ".join(f"{name} {old} (this command: {new})" for name, (old, new) in other.items())
            raise Pr1EvalError(f"tiny-model {folder}: the folder holds another tiny model ({what}) and would be "
                               "overwritten; pass a new or empty folder, or add --force to replace it")
        return
    held = sorted(p.name for p in folder.iterdir())
    if held:
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        raise Pr1EvalError(f"tiny-model {folder}: the folder is not empty ({shown}) and its files would be "
                           "overwritten; pass a new or empty folder, or add --force to write into it anyway")


def _manifest(folder: Path) -> dict[str, object]:
    """The folder's tiny-model manifest, or {} when it cannot be read (then it is no tiny model we know)."""
    try:
        data = json.loads((folder / TINY_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    if args.structured and not args.trained:
        raise Pr1EvalError("--structured chooses how the tiny model is trained; add --trained")
    kind = "trained-structured" if args.structured else "trained" if args.trained else "random"
    check_destination(Path(args.dir).expanduser(), args.force, kind, args.seed)
    from pr1_eval.testing.tiny_model import cache_path, tiny_model_into

    print(f"tiny model ({kind}, seed {args.seed}): shared cache {cache_path(kind, seed=args.seed, prompt=args.prompt)}")
    path, reused = tiny_model_into(args.dir, kind, seed=args.seed, prompt=args.prompt)
    print(f"{'reused the cached model' if reused else 'built it'}; written to {path}")
    return 0
