"""Trace viewer: one response at a time — the main line as text, each block's paths side by side,
the summary under them, the final answer and where it came from, each path's own conclusion.

The response is split by :func:`analysis.runs.trace.response_segments` (the parse behind the
blocks frame); block positions, tokens and path answers are the blocks frame's. Every piece of
model text goes through ``st.text``/``st.code``: nothing in a response is ever interpreted; the
names in the header and the finish reason are Markdown-escaped with autolinks broken
(:func:`dashboards.components.md_escape`).
The URL's query parameters (run, task, problem, sample) reopen the same trace; they only
select among the loaded runs' names.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from analysis.runs.trace import TraceSegment, response_segments
from analysis.structure.conclusions import path_conclusion
from dashboards.components import fmt, latex_markdown, md_escape, path_length, widget_default
from dashboards.data import Context, context
from dashboards.tables import OUTCOMES, outcome, trace_index

PARAMS = ("run", "task", "problem", "sample")
#: Finish reasons longer than this are also shown whole under the metrics.
FINISH_SHOWN = 16
_WRITTEN = "tv_written"


def apply_deep_link(ctx: Context) -> None:
    """Copy valid query parameters into the widgets, unless they are the ones this page wrote."""
    wanted = {name: st.query_params.get(name) for name in PARAMS}
    if not wanted["run"] or wanted == st.session_state.get(_WRITTEN):
        return
    samples = ctx.loaded.samples
    if wanted["run"] not in ctx.all_runs:
        st.warning("The link names a run that is not loaded; showing the first trace instead.")
        return
    st.session_state["tv_run"] = wanted["run"]
    in_run = samples[samples["run"] == wanted["run"]]
    if wanted["task"] in set(in_run["task"]):
        st.session_state["tv_task"] = wanted["task"]
        in_task = in_run[in_run["task"] == wanted["task"]]
        if wanted["problem"] in set(in_task["problem_id"].astype(str)):
            st.session_state["tv_problem"] = wanted["problem"]
            if wanted["sample"] and wanted["sample"].isdigit():
                st.session_state["tv_sample"] = int(wanted["sample"])
    st.session_state["tv_outcomes"] = list(OUTCOMES)
    st.session_state["tv_has_block"] = st.session_state["tv_format_ok"] = "any"


def _step(keys: list[tuple[str, int]], offset: int) -> None:
    """Button callback: move to the previous/next trace of the filtered list."""
    current = (st.session_state.get("tv_problem"), st.session_state.get("tv_sample"))
    position = keys.index(current) if current in keys else 0
    problem, sample = keys[(position + offset) % len(keys)]
    st.session_state["tv_problem"], st.session_state["tv_sample"] = problem, sample


def _valid(key: str, options: list[Any]) -> None:
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]


def choose_sample(ctx: Context) -> pd.Series | None:
    """Sidebar: run, task, filters, problem, sample, previous/next; returns the chosen sample."""
    samples = ctx.loaded.samples
    runs = ctx.runs + [r for r in [st.session_state.get("tv_run")] if r in ctx.all_runs and r not in ctx.runs]
    with st.sidebar:
        st.subheader("Trace")
        _valid("tv_run", runs)
        run = st.selectbox("Run", runs, key="tv_run")
        in_run = samples[samples["run"] == run]
        tasks = [t for t in dict.fromkeys(in_run["task"].astype(str)) if t in ctx.tasks or t == st.session_state.get("tv_task")]
        _valid("tv_task", tasks)
        task = st.selectbox("Task", tasks, key="tv_task")
        chosen = st.multiselect("Outcome", list(OUTCOMES), default=widget_default("tv_outcomes", list(OUTCOMES)),
                                key="tv_outcomes")
        has_block = st.radio("Has a block", ["any", "yes", "no"], horizontal=True, key="tv_has_block")
        format_ok = st.radio("Format ok", ["any", "yes", "no"], horizontal=True, key="tv_format_ok")
        index = trace_index(in_run[in_run["task"] == task], chosen, has_block, format_ok)
        if index.empty:
            st.info("No trace matches these filters.")
            return None
        keys = list(zip(index["problem_id"].astype(str), index["sample_idx"].astype(int), strict=True))
        problems = list(dict.fromkeys(p for p, _ in keys))
        _valid("tv_problem", problems)
        problem = st.selectbox("Problem", problems, key="tv_problem")
        sample_ids = [s for p, s in keys if p == problem]
        _valid("tv_sample", sample_ids)
        sample = st.selectbox("Sample", sample_ids, key="tv_sample")
        left, right = st.columns(2)
        left.button("◀ previous", on_click=_step, args=(keys, -1), key="tv_prev", width="stretch")
        right.button("next ▶", on_click=_step, args=(keys, 1), key="tv_next", width="stretch")
        st.caption(f"{len(keys)} trace(s) match; this is number {keys.index((problem, sample)) + 1}.")
    written = {"run": str(run), "task": str(task), "problem": str(problem), "sample": str(sample)}
    st.query_params.from_dict(written)
    st.session_state[_WRITTEN] = written
    match = index[(index["problem_id"].astype(str) == problem) & (index["sample_idx"] == sample)]
    return match.iloc[0]


def path_conclusions(segment: TraceSegment) -> tuple[list[Any], list[str]]:
    """What each path concludes, by :func:`analysis.structure.conclusions.path_conclusion`: the reading block
    roles use, so the viewer shows the values the behaviour pages compare."""
    found = [path_conclusion(text) for text in segment.paths]
    return [c.text for c in found], [c.source for c in found]


def render_block(segment: TraceSegment, info: dict[str, Any] | None) -> None:
    """One block: header with positions, paths side by side with their conclusions, the summary."""
    with st.container(border=True):
        n = len(segment.paths)
        header = f"Block {int(segment.block_idx or 0) + 1} · {n} path(s)"
        if info is not None:
            tokens = ("tokens " + f"{info['token_start']}–{info['token_end']}" if info["token_start"] is not None
                      else f"characters {info['char_start']}–{info['char_end']}")
            header += f" · {tokens} · relative position {fmt(info['rel_start'], 3)} ({info['position_unit']})"
        if not segment.closed:
            header += " · never closed"
        st.markdown(f"**{md_escape(header)}**")
        answers, sources = path_conclusions(segment)
        for column, (j, text) in zip(st.columns(max(n, 1)), enumerate(segment.paths), strict=False):
            with column:
                st.caption(f"Path {j + 1} · {path_length(info, j, text)}")
                st.text(text or "(empty)")
                if answers[j] is not None:
                    st.caption(f"conclusion ({md_escape(sources[j])})")
                    st.code(answers[j], language=None, wrap_lines=True)
                else:
                    st.caption("no conclusion of its own")
        st.caption("Summary")
        st.text(segment.summary if segment.summary is not None else "(no summary)")


def render_trace(ctx: Context, sample: pd.Series) -> None:
    verdict = outcome(sample["correct"], sample["grade_status"])
    st.markdown(f"**{md_escape(sample['run'])}** · {md_escape(sample['task'])} · problem "
                f"{md_escape(sample['problem_id'])} · sample {int(sample['sample_idx'])}")
    cells = st.columns(5)
    cells[0].metric("Outcome", verdict)
    cells[1].metric("Blocks", int(sample["n_blocks"] or 0))
    cells[2].metric("Format ok", "yes" if sample["format_ok"] else "no")
    tokens = sample["n_response_tokens"]
    cells[3].metric("Response tokens", "—" if pd.isna(tokens) else int(tokens))
    cells[4].metric("Finish", md_escape(sample["finish_reason"]))
    if len(str(sample["finish_reason"])) > FINISH_SHOWN:  # a metric cuts long values: the whole reason, literally
        st.text(f"finish reason: {sample['finish_reason']}")
    with st.expander("Problem", expanded=True):
        if sample["problem"]:
            rendered, stored = st.tabs(["Rendered", "As stored"])  # formulas typeset; the text as it is
            rendered.markdown(latex_markdown(sample["problem"]))
            stored.text(sample["problem"])
        else:
            st.text("(no problem text stored)")
        st.caption("Gold answer")
        st.code(str(sample["gold"]), language=None, wrap_lines=True)
    answer_box(sample, verdict)
    if isinstance(sample["format_error"], str) and sample["format_error"]:
        st.caption("Format check")
        st.text(sample["format_error"])
    st.subheader("Response")
    blocks = ctx.loaded.blocks
    mine = blocks[(blocks["run"] == sample["run"]) & (blocks["task"] == sample["task"])
                  & (blocks["problem_id"] == sample["problem_id"]) & (blocks["sample_idx"] == sample["sample_idx"])]
    by_index = {int(row["block_idx"]): row for row in mine.to_dict("records")}
    for segment in response_segments(sample["response"]):
        if segment.kind == "main":
            st.text(segment.text)
        else:
            render_block(segment, by_index.get(int(segment.block_idx or 0)))
    with st.expander("Raw response (tags kept)"):
        st.code(sample["response"], language=None, wrap_lines=True)


def answer_box(sample: pd.Series, verdict: str) -> None:
    """The extracted final answer, highlighted, with where it came from."""
    source = {"final_answer": "the last 'Final Answer:' line outside every path",
              "boxed": "the last \\boxed{} outside every path",
              "sentence": "the value of the last sentence that states one (answer policy lenient)"}.get(str(sample["answer_source"]), "nowhere")
    answer = sample["extracted_answer"]
    box = st.success if verdict == "correct" else st.error if verdict in ("wrong", "no answer") else st.warning
    box(f"Final answer ({verdict}) — taken from {md_escape(source)}")
    st.code(answer if isinstance(answer, str) else "(no answer found)", language=None, wrap_lines=True)


def render() -> None:
    ctx = context()
    st.title("Trace viewer")
    apply_deep_link(ctx)
    sample = choose_sample(ctx)
    if sample is not None:
        render_trace(ctx, sample)


render()
