"""The dashboard's entry script: ``streamlit run dashboards/app.py -- RUNS…`` (or ``pr1-eval dashboard``).

It loads the runs named after ``--`` (``./runs`` when none), renders the sidebar filters every
page shares (:func:`dashboards.data.build_context`), and hands over to the chosen page. With
``--follow SECONDS`` among them it also watches the folders for new runs (:mod:`dashboards.follow`).
"""

from __future__ import annotations

import sys

import streamlit as st

from dashboards.data import build_context
from dashboards.follow import watch

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: (file, title, url path) of every page, in the sidebar's order; the first is the home page.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("views/leaderboard.py", "Leaderboard", "leaderboard"),
    ("views/training.py", "Training dynamics", "training"),
    ("views/behaviour.py", "Behaviour", "behaviour"),
    ("views/diversity.py", "Diversity and roles", "diversity"),
    ("views/efficiency.py", "Efficiency", "efficiency"),
    ("views/trace_viewer.py", "Trace viewer", "trace"),
    ("views/compare.py", "Compare", "compare"),
)
#: Streamlit serves the default page at the root URL only, so ``/leaderboard`` (what the sidebar's
#: name suggests and what people type or bookmark) would be "Page not found". A hidden second page
#: runs the same script there; the home page gets a distinct internal path, because Streamlit keys
#: pages by their declared path even when the page is served at the root.
HOME_INTERNAL_PATH = "home"


def _pages() -> list[st.Page]:
    """Every page in the sidebar's order, then the hidden alias of the home page at its own name."""
    (home_path, home_title, home_url), *others = PAGES
    pages = [st.Page(home_path, title=home_title, url_path=HOME_INTERNAL_PATH, default=True)]
    pages += [st.Page(path, title=title, url_path=url) for path, title, url in others]
    pages.append(st.Page(home_path, title=home_title, url_path=home_url, visibility="hidden"))
    return pages


def main() -> None:
    st.set_page_config(page_title="pr1-eval dashboard", layout="wide")
    navigation = st.navigation(_pages())
    context = build_context(sys.argv[1:])
    if context.follow is not None:
        with st.sidebar:
            watch(context.paths, context.signature, context.follow)
    training_page = navigation.url_path == "training"
    if context.loaded.samples.empty and context.training and training_page:
        navigation.run()  # a job's steps too many to load in full: the Training page reads their summaries
        return
    if context.loaded.samples.empty:
        if context.training:
            st.info(f"{len(context.training)} training-step run(s), shown on the Training dynamics page from their "
                    "summaries; they hold too many samples to load here.")
        elif context.follow is not None:
            st.info("No run yet in the followed folder(s); this page shows the runs as soon as they are written.")
        else:
            st.error("No run could be loaded. Start the dashboard with run directories or folders holding them, "
                     "e.g. `pr1-eval dashboard pr1-demo`; the sidebar lists what was tried and why it failed.")
        st.stop()
    if (not context.runs or not context.tasks) and not (training_page and context.training):
        st.info("Select at least one run and one task in the sidebar.")
        st.stop()
    address = str(st.get_option("server.address") or "")
    if address not in LOOPBACK:
        st.sidebar.caption(f"Served on {address or 'every address'}: anyone who can reach this machine can read "
                           "these runs.")
    navigation.run()


main()
