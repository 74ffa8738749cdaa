"""The Streamlit dashboard: leaderboard, training dynamics, behaviour, diversity and roles, a trace
viewer and a run comparison, in the browser.

``pr1-eval dashboard [RUNS…]`` (registered by :mod:`dashboards.command`) starts it; so does
``streamlit run dashboards/app.py -- RUNS…``. It reads runs only through :mod:`analysis`
(loader, stats, drift, diversity, roles, leaderboard) and never parses raw files itself.
"""
