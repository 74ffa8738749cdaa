"""Two imported runs whose every untrusted field carries attacks, for the text-safety tests.

Made the way users make runs (JSON Lines through :func:`pr1_eval.ingest.importer.import_jsonl`,
graded by the real grader). The run names (folder names), the task name, the problem ids, the
model path (hence the model family), the finish reasons, the problem texts and the responses
(main line, both paths, the summary, a final answer) each hold :func:`payload`: a Markdown link
and image, a ``javascript:`` link, a bare ``https://`` URL, a ``www.`` URL, an e-mail address
(GFM autolinks it as ``mailto:``), ``<a href>``, ``<img onerror>``, ``<script>`` (so the ids hold
``</script>``) and LaTeX ``\\href``. Every link target is on ``evil.example`` and names its field,
so a leak says where it came from; every script sets ``window.__pwned`` if it ever runs.

The two runs are two checkpoints of one hostile family, share the task and its problems (so
the leaderboard can compare them, and Compare opens them by default: the family begins with
``!``, which sorts before every other fixture's), and flip: run A solves problem 0 only, run
B problem 1 only. Sibling paths are identical, so their BLEU is 1 and the Diversity page lists
them first among the most similar pairs.
"""

from __future__ import annotations

import json
from pathlib import Path

import lxml.html

from pr1_eval.ingest.importer import import_jsonl

MARKER = "evil.example"
#: Folder names cannot hold '/', so the run names carry the attacks that need none.
RUN_ATTACK = (f"www.{MARKER} [md-run](https:{MARKER}) <img src=x onerror=\"window.__pwned='run'\"> "
              f"run@{MARKER} :red[red-run]")
HOSTILE_RUNS = (f"hostile-A {RUN_ATTACK}", f"hostile-B {RUN_ATTACK}")
STEPS = (100, 200)
K = 2


def payload(field: str) -> str:
    """Every attack, each pointing at ``evil.example/<field>/…``."""
    site = f"https://{MARKER}/{field}"
    return (f"[md-{field}]({site}/md) ![img-{field}]({site}/img.png) [js-{field}](javascript:window.__pwned='{field}') "
            f"{site}/bare www.{MARKER}/{field} {field}@{MARKER} <a href=\"{site}/a\">a-{field}</a> "
            f"<img src=x onerror=\"window.__pwned='{field}'\"> <script>window.__pwned='{field}'</script> "
            f"$\\href{{{site}/tex}}{{tex-{field}}}$")


TASK = f"aime24 {payload('task')}"
PROBLEM_IDS = tuple(f"p{i} {payload('id')}" for i in range(2))


def model_path(step: int) -> str:
    """A model path whose family (``global_step_*``) keeps every attack and sorts first."""
    return f"![img-model](https://{MARKER}/model/img.png) {payload('model')} /ck/global_step_{step}"


def response(correct: bool, block: bool, answer_attack: bool = False) -> str:
    """A response with the payload in its main line and, with ``block``, in both paths and the summary."""
    path = f"Same path {payload('path')} so 4\nFinal Answer: 4"
    text = f"Let me think. {payload('response')}\n\n"
    if block:
        text += (f"<Parallel>\n<Path>\n{path}\n</Path>\n<Path>\n{path}\n</Path>\n</Parallel>\n"
                 f"<Summary>\n{payload('summary')}\n</Summary>\n\n")
    final = "4" if correct else ("5 " + payload("answer") if answer_attack else "5")
    return text + f"Final Answer: {final}"


def hostile_rows(run: int) -> list[dict[str, object]]:
    """Run ``run`` (0 = A, 1 = B): problem ``run`` right in every sample, the other wrong."""
    rows = []
    for p, pid in enumerate(PROBLEM_IDS):
        for i in range(K):
            correct = p == run
            rows.append({"task": TASK, "problem_id": pid, "sample_idx": i, "gold": "4",
                         "response": response(correct, block=i == 0, answer_attack=not correct and i == 1),
                         "problem": f"What is 2 + 2? {payload('problem')}", "model": model_path(STEPS[run]),
                         "step": STEPS[run], "finish_reason": f"stop {payload('finish')}"})
    return rows


def build_hostile_runs(root: Path) -> dict[str, Path]:
    """The two hostile runs under ``root`` (a folder of their own), by name."""
    runs = {}
    for index, name in enumerate(HOSTILE_RUNS):
        source = root / f"hostile-{index}.jsonl"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("".join(json.dumps(row) + "\n" for row in hostile_rows(index)), encoding="utf-8")
        runs[name] = import_jsonl(source, root / name, workers=1)
    return runs


def assert_inert_page(page: str, where: str) -> lxml.html.HtmlElement:
    """No element from data in a page: every anchor, image and script is counted."""
    tree = lxml.html.fromstring(page)
    assert tree.xpath("//a | //img | //iframe | //object | //embed") == [], where
    for script in tree.xpath("//script"):
        text = script.text_content()
        assert "__pwned='" not in text or "Plotly.newPlot" in text, (where, text[:300])
        assert "</script" not in text.lower(), where
    return tree
