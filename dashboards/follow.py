"""Following a running job: the app notices new or changed runs without a restart or a click.

Why a fragment: a Streamlit page reruns only when a reader acts. ``pr1-eval dashboard --follow``
starts the app with ``--follow SECONDS``; the app then renders :func:`watch` in the sidebar, a
fragment Streamlit reruns every ``SECONDS`` on its own. Each time it computes the runs'
signature (:func:`analysis.runs.index.runs_signature`: a scan of the folders and a stat of every
run file, no sample read) and, when it differs from the one the page was drawn from, reruns the
whole app, which reads only the runs that changed (:func:`dashboards.data.load`). So a step that
lands shows within ``SECONDS`` plus its own read, and an idle job costs a scan per period.
"""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from analysis.runs.index import runs_signature
from dashboards.components import md_escape

#: How often a followed folder is scanned unless ``--poll`` says otherwise (seconds).
DEFAULT_POLL_S = 30.0


def _scan(paths: tuple[str, ...], drawn: Any) -> tuple[bool, int]:
    """Whether the runs under ``paths`` differ from the signature ``drawn``, and how many there are."""
    signature = runs_signature(paths)
    return signature != drawn, sum(1 for _, s in signature if not isinstance(s, str))


def watch(paths: tuple[str, ...], drawn: Any, every: float) -> None:
    """The sidebar's follow status, rescanning every ``every`` seconds (reruns the app on a change)."""

    @st.fragment(run_every=every)
    def status() -> None:
        changed, n_runs = _scan(paths, drawn)
        if changed and st.session_state.get("pr1_follow_drawn") is drawn:
            st.rerun(scope="app")
        st.session_state["pr1_follow_drawn"] = drawn
        st.caption(f"Following {md_escape(', '.join(paths))}: {n_runs} run(s), checked "
                   f"{time.strftime('%H:%M:%S')}, every {every:g} s.")

    status()
