"""The reference parts of the docs, made from the code at build time: every option of every
command and every field of the records and reports.

Why generated: an option table or a field list written by hand goes stale the day a flag or a
field is added, and nothing fails. Here the option tables are read from the argparse parsers the
commands build (``pr1_eval.cli.main.build_parser`` with the ``pr1_eval.commands`` plugins named in
pyproject.toml, ``repro.cli.main.build_parser``) and the schema tables from the typed records
(``SampleRecord``, ``RunRecord``, the report and leaderboard types), with each field's own
documentation: ``field.metadata["doc"]`` where the record carries it, else the ``#:`` comment
above the field or the ``#`` comment beside it in the source. ``docs/_gen/hooks.py`` puts them
into the pages; ``tests/test_docs.py`` checks that they list every option and field.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import re
import tokenize
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_SECTION = '[project.entry-points."pr1_eval.commands"]'


# ----- command-line options --------------------------------------------------------------------
def plugin_entries(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """The ``pr1_eval.commands`` entry points as pyproject.toml declares them (name → module:function),
    read from the file so a checkout that is not pip-installed documents its plugins too."""
    entries: dict[str, str] = {}
    inside = False
    for line in pyproject.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            inside = line.strip() == PLUGIN_SECTION
        elif inside and (match := re.match(r'\s*([\w-]+)\s*=\s*"([\w.]+:\w+)"', line)):
            entries[match[1]] = match[2]
    return entries


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise ValueError(f"{parser.prog} has no subcommands")


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, keyed ``pr1-eval run`` … ``pr1-repro nano``."""
    from pr1_eval.cli.main import build_parser
    from repro.cli.main import build_parser as build_repro

    top = build_parser()
    sub_action = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, target in plugin_entries().items():
        if name not in sub_action.choices:  # not pip-installed: register the plugin as the entry point would
            module, function = target.split(":")
            getattr(importlib.import_module(module), function)(sub_action)
    parsers = {f"pr1-eval {name}": p for name, p in _subcommands(top).items()}
    parsers.update({f"pr1-repro {name}": p for name, p in _subcommands(build_repro()).items()})
    return parsers


def _plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_|\[\]])", r"\\\1", text)


def cell(text: str) -> str:
    """Text made safe for one Markdown table cell: no HTML, no emphasis, no column break; a
    docstring's ````code````, ```code``` and ``:mod:`x``` become code."""
    text = " ".join(str(text).split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"``\1``", text)
    parts = re.split(r"``(.+?)``|`([^`]+)`", text)
    out = []
    for i, part in enumerate(parts):
        if i % 3 == 0:
            out.append(_plain(part))
        elif part is not None:
            code = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "&#124;")
            out.append(f"<code>{code}</code>")
    return "".join(out)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    params = {"default": action.default, "prog": "", "dest": action.dest}
    try:
        return text % params
    except (KeyError, TypeError, ValueError):
        return text


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(cell(c) for c in action.choices)
    metavar = action.metavar if action.metavar is not None else action.dest.upper()
    shown = metavar if isinstance(metavar, str) else " ".join(metavar)
    if action.nargs in ("+", "*"):
        shown += " …"
    elif action.nargs == "?":
        shown = f"[{shown}]"
    return cell(shown)


def _default(action: argparse.Action) -> str:
    default = action.default
    if default is None or default == argparse.SUPPRESS or action.nargs == 0 or isinstance(default, bool):
        return ""
    return cell(repr(default) if isinstance(default, str) and not default else str(default))


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str, str]]:
    """(option, value, default, help) per argument of ``parser``, positionals first, help left out."""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = ", ".join(action.option_strings) if action.option_strings else action.metavar or action.dest
        rows.append((str(name), _value(action), _default(action), cell(_help(action))))
    return rows


def options_markdown(command: str, parser: argparse.ArgumentParser) -> str:
    """The option table of one command, with its usage line and its description as ``--help`` has them."""
    usage = " ".join(parser.format_usage().split())
    usage = usage[len("usage: "):] if usage.startswith("usage: ") else usage
    lines = [f"```text\n{usage}\n```", "", "| option | value | default | what it does |", "|---|---|---|---|"]
    rows = option_rows(parser)
    lines += [f"| `{name}` | {value} | {default} | {text} |" for name, value, default, text in rows]
    if not rows:
        lines[2:] = ["No options besides `-h`/`--help`."]
    lines += ["", f"Generated from the parser of `{command}`; `{command} --help` prints the same."]
    return "\n".join(lines)


# ----- records and reports ---------------------------------------------------------------------
def source_comments(cls: type) -> dict[str, str]:
    """Field name → the ``#:`` comment block above it, else the ``#`` comment on its line."""
    source = inspect.getsource(cls)
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    out: dict[str, str] = {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while comments.get(line, "").startswith("#:"):
            above.insert(0, comments[line][2:].strip())
            line -= 1
        beside = next((comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                       if n in comments), "")
        out[node.target.id] = " ".join(above) if above else beside.lstrip("#").strip()
    return out


def record_fields(cls: type) -> list[tuple[str, str, str, str]]:
    """(name, type, default, documentation) of every field of a dataclass or TypedDict, in order."""
    comments = source_comments(cls)
    annotations: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        annotations.update(getattr(klass, "__annotations__", {}))
    rows = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            doc = f.metadata.get("doc") or comments.get(f.name, "")
            if f.default is not dataclasses.MISSING:
                default = repr(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = repr(f.default_factory())
            else:
                default = "required"
            rows.append((f.name, str(annotations.get(f.name, f.type)), default, doc))
    else:  # a TypedDict: every key is required
        for name, kind in annotations.items():
            shown = getattr(kind, "__forward_arg__", None) or getattr(kind, "__name__", None) or str(kind)
            rows.append((name, kind if isinstance(kind, str) else shown, "",
                         comments.get(name, "")))
    return rows


def record_markdown(cls: type, *, with_default: bool = True) -> str:
    """One table of the fields of ``cls``, headed by its docstring's first paragraph."""
    doc = inspect.getdoc(cls) or ""
    intro = " ".join(doc.split("\n\n")[0].split()) if doc and not doc.startswith(cls.__name__ + "(") else ""
    lines = [f"**`{cls.__module__}.{cls.__name__}`**" + (f": {cell(intro)}" if intro else ""), ""]
    if with_default:
        lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{n}` | {cell(t)} | {cell(d)} | {cell(doc)} |" for n, t, d, doc in record_fields(cls)]
    else:
        lines += ["| key | type | meaning |", "|---|---|---|"]
        lines += [f"| `{n}` | {cell(t)} | {cell(doc)} |" for n, t, _, doc in record_fields(cls)]
    return "\n".join(lines)


def nested_records(cls: type) -> list[type]:
    """``cls`` and the dataclasses of its own module that its fields name, depth first, each once."""
    module = importlib.import_module(cls.__module__)
    seen: list[type] = []

    def visit(klass: type) -> None:
        if klass in seen:
            return
        seen.append(klass)
        for _, kind, _, _ in record_fields(klass):
            for word in re.findall(r"[A-Za-z_]\w*", kind):
                other = getattr(module, word, None)
                if isinstance(other, type) and dataclasses.is_dataclass(other):
                    visit(other)

    visit(cls)
    return seen


def sample_markdown() -> str:
    from pr1_eval.records.sample import SampleRecord

    return record_markdown(SampleRecord)


def run_record_markdown() -> str:
    from pr1_eval.records.run import RUN_RECORD_VERSION, RunRecord

    parts = [f"`record_version` written today: **{RUN_RECORD_VERSION}**."]
    parts += [record_markdown(cls) for cls in nested_records(RunRecord)]
    return "\n\n".join(parts)


def report_markdown() -> str:
    """The ``report --json`` keys as :func:`pr1_eval.report.schema.json_schema` gives them, K standing
    for the task's k, then the types they come from."""
    from pr1_eval.report.schema import AtK, MeanVariance, RunReport, TaskMetrics, TaskReport, json_schema

    schema = json_schema()
    parts = [f"Report schema version: **{schema['schema_version']}** (not written into the document)."]
    for section, title in (("run", "The run (top level)"), ("task", "Each task (`tasks.TASK`)"),
                           ("metrics", "A complete task's numbers (beside the task keys; K is the task's k)"),
                           ("variance", "`variance`: the split of Var(mean@K) (a task's numbers)"),
                           ("at", "Each entry of `at` (`report --at`; K is the entry's k)")):
        rows = [f"| `{key}` | {cell(doc)} |" for key, doc in schema[section].items()]
        parts.append("\n".join([f"**{title}**", "", "| key | meaning |", "|---|---|", *rows]))
    parts.append(f"**`partial`** (an incomplete task, instead of the numbers): {cell(schema['partial'])}")
    parts += [record_markdown(cls) for cls in (RunReport, TaskReport, TaskMetrics, MeanVariance, AtK)]
    return "\n\n".join(parts)


def leaderboard_markdown() -> str:
    from analysis.leaderboard import schema

    names = ("LeaderboardDocument", "RunRow", "Comparison", "Excluded", "TaskCell", "RunAverage", "Averages")
    parts = [f"Leaderboard schema version: **{schema.SCHEMA_VERSION}** (written as `schema_version`)."]
    parts += [record_markdown(getattr(schema, name), with_default=False) for name in names]
    return "\n\n".join(parts)


SCHEMAS = {"sample": sample_markdown, "run": run_record_markdown, "report": report_markdown,
           "leaderboard": leaderboard_markdown}
