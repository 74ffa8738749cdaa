"""The dashboard's entry script: ``streamlit run dashboards/app.py -- RUNS…`` (or ``pr1-eval dashboard``).

It loads the runs named after ``--`` (``./runs`` when none), renders the sidebar filters every
page shares (:func:`dashboards.data.build_context`), and hands over to the chosen page.
"""

from __future__ import annotations

import sys

import streamlit as st

from dashboards.data import build_context

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: (file, title, url path) of every page, in the sidebar's order; the first is the home page.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("views/leaderboard.py", "Leaderboard", "leaderboard"),
    ("views/training.py", "Training dynamics", "training"),
    ("views/behaviour.py", "Behaviour", "behaviour"),
    ("views/diversity.py", "Diversity and roles", "diversity"),
    ("views/trace_viewer.py", "Trace viewer", "trace"),
    ("views/compare.py", "Compare", "compare"),
)


def main() -> None:
    st.set_page_config(page_title="pr1-eval dashboard", layout="wide")
    pages = [st.Page(path, title=title, url_path=url, default=i == 0) for i, (path, title, url) in enumerate(PAGES)]
    navigation = st.navigation(pages)
    context = build_context(sys.argv[1:])
    if context.loaded.samples.empty:
        st.error("No run could be loaded. Start the dashboard with run directories or folders holding them, e.g. "
                 "`pr1-eval dashboard pr1-demo`; the sidebar lists what was tried and why it failed.")
        st.stop()
    if not context.runs or not context.tasks:
        st.info("Select at least one run and one task in the sidebar.")
        st.stop()
    address = str(st.get_option("server.address") or "")
    if address not in LOOPBACK:
        st.sidebar.caption(f"Served on {address or 'every address'}: anyone who can reach this machine can read "
                           "these runs.")
    navigation.run()


main()
