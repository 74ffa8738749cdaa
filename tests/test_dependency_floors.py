"""The dependency floors in pyproject.toml stay at the releases checked to have what the code calls.

The floors were read off the releases' own source (see the comments in pyproject.toml): Streamlit
1.56 is the first with every Streamlit API the dashboards call (``bench/check_streamlit_floor.py``
over the 1.36–1.67 wheels), pandas 2.1 added ``DataFrame.map``, pyarrow 15 the Parquet page
checksums, plotly 5.18 and Ray 2.40 have every call made. A floor edited back below those fails
here. So does a new Streamlit call or keyword in dashboards/ that the floor was not checked for:
re-run the checker over the wheels, raise the floor if needed, and add the call below.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
CHECKED_FLOORS = {"streamlit": "1.56", "pandas": "2.1", "pyarrow": "15", "plotly": "5.18", "ray": "2.40"}
CHECKED_STREAMLIT_CALLS = {
    "Page(default,title,url_path)", "Page(default,title,url_path,visibility)", "button(args,key,on_click,width)", "caption()", "code(language,wrap_lines)",
    "columns()", "container(border)", "dataframe(height,hide_index,width)", "error()", "expander(expanded)",
    "from_dict()", "get()", "get_option()", "info()", "markdown()", "metric()",
    "multiselect(default,format_func,help,key)", "navigation()", "number_input(key,min_value,step,value)",
    "page_link(label,query_params)", "plotly_chart(key)", "progress(text)", "radio(format_func,horizontal,key)",
    "selectbox(index,key)", "set_page_config(layout,page_title)", "spinner()", "stop()", "subheader()", "success()",
    "table(hide_index)", "text()", "title()", "toggle(help,key,value)", "warning()",
    # the Training page and --follow; bench/check_streamlit_floor.py on 1.55.0 and 1.56.0: 1.56.0 has all
    # (Page's visibility, for the hidden /leaderboard alias: checked on 1.56.0, all present)
    "fragment(run_every)", "header()", "rerun(scope)", "text_input(help,key,value)",
    # the trace viewer's Rendered / As stored tabs: bench/check_streamlit_floor.py on 1.56.0, all present
    "tabs()",
}
STRING_METHODS = {"startswith()", "endswith()"}  # str methods on a variable named like a container


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lists = [project["dependencies"], *project.get("optional-dependencies", {}).values()]
    return [Requirement(text) for group in lists for text in group]


def _floor(req: Requirement) -> Version | None:
    floors = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=", ">")]
    return max(floors) if floors else None


@pytest.mark.parametrize(("name", "checked"), sorted(CHECKED_FLOORS.items()))
def test_every_mention_of_a_package_has_at_least_the_checked_floor(name: str, checked: str) -> None:
    mentions = [r for r in _requirements() if r.name == name]
    assert mentions, f"{name} is no longer a dependency: drop it from CHECKED_FLOORS"
    for req in mentions:
        floor = _floor(req)
        assert floor is not None and floor >= Version(checked), f"{req} allows releases below {checked}"


def test_the_streamlit_calls_are_the_ones_the_floor_was_checked_for() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from check_streamlit_floor import used_calls
    finally:
        sys.path.remove(str(ROOT / "bench"))
    found = {f"{name}({','.join(sorted(kws))})" for name, kws in used_calls().items()} - STRING_METHODS
    assert found - CHECKED_STREAMLIT_CALLS == set(), "new Streamlit calls: re-run bench/check_streamlit_floor.py"


def test_the_installed_streamlit_meets_the_floor() -> None:
    import streamlit

    assert Version(streamlit.__version__) >= Version(CHECKED_FLOORS["streamlit"])
