"""The dashboard in Streamlit's test harness (``AppTest``): open it on runs and a page, read a
text table as a reader sees it, pick one row. Shared by the page tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboards.components import md_unescape
from dashboards.launch import app_path
from tests.support.deadlines import scaled


def open_app(monkeypatch: pytest.MonkeyPatch, paths: list[Path], page: str | None = None,
             params: dict[str, str] | None = None) -> AppTest:
    """The app on ``paths`` (as after ``--``), on ``page``, with no uncaught exception."""
    monkeypatch.setattr(sys, "argv", ["app.py", *map(str, paths)])
    app = AppTest.from_file(str(app_path()), default_timeout=scaled(180)).run()
    if page is not None:
        app.query_params.update(params or {})
        app.switch_page(f"views/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def shown_table(app: AppTest, index: int = 0) -> pd.DataFrame:
    """A text table as a reader sees it (cells un-escaped)."""
    return app.table[index].value.map(md_unescape)


def row(frame: pd.DataFrame, **where: Any) -> pd.Series:
    match = frame
    for column, value in where.items():
        match = match[match[column] == value]
    assert len(match) == 1, (where, frame)
    return match.iloc[0]
