"""docs/tutorial.md runs as a notebook in a real Jupyter kernel (ipykernel, driven by nbclient),
in an environment WITHOUT ipywidgets, as a data scientist's plain kernel is; and every release
kind of the Session, and its plans, show a rich display (``_repr_html_``) there.

Before the fix, every release failed in such a kernel: DuckDB refuses ``SET
enable_progress_bar`` in Jupyter without ipywidgets (``privmob.engine.duckdb``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from privmob.releases.kinds import KINDS
from tests.conftest import shared_data_dir
from tests.docs.test_docs_blocks import ROOT, python_blocks

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIAL = ROOT / "docs" / "tutorial.md"

#: the first cell: the kernel is a plain one (no ipywidgets), working where the docs run
SETUP = """\
import importlib.util, os
assert importlib.util.find_spec("ipywidgets") is None, "this kernel must not have ipywidgets"
os.chdir({work!r})
os.environ["PRIVMOB_LEDGER"] = {ledger!r}
"""

#: each release kind of the Session (a method with a ``plan_`` twin) shown as a cell's value,
#: with its plan; the tutorial's session makes od, report and population
DISPLAYS = {
    "od": ("od", "plan"),
    "report": ("report", "s2.plan_report(epsilon=1, max_trips=5, period=week)"),
    "population": ("pop", "s2.plan_population(epsilon=0.5)"),
    "series_counts": ("zs", "zs_plan"),
    "density": ("dens", "dens_plan"),
    "series": ("agg", "agg_plan"),
    "counts": ("cnt", "cnt_plan"),
}

#: the kinds the tutorial does not make, on small made-up data (tests/test_session.py's)
OTHER_KINDS = """\
import numpy as np
import pandas as pd
import privmob as pm
from privmob.data.density_synth import synthetic_city

week = pm.Period("2020-12-13", "2020-12-20")
s2 = pm.Session(points, tessellation=f"{data}/test_tessellation.geojson", budget=pm.PureDP(5),
                dataset="berlin-again")
lm = pm.Session(points, tessellation=f"{data}/test_tessellation.geojson", budget=pm.PureDP(5),
                dataset="berlin-landmarks", unit=pm.PrivacyUnit.LANDMARK)
day = pm.Period("2020-12-14", "2020-12-15")
zs_plan = lm.plan_series_counts(epsilon=1, period=day, max_per_bin=pm.MaxVisitsPerHour(2))
zs = lm.series_counts(epsilon=1, period=day, max_per_bin=pm.MaxVisitsPerHour(2))
cnt_plan = s2.plan_counts(epsilon=1, by=["origin", "weekday"], max_records=3, period=week)
cnt = s2.counts(epsilon=1, by=["origin", "weekday"], max_records=3, period=week)
stamps = pd.date_range("2020-12-14", periods=24, freq="1h")
pd.DataFrame({"time": stamps, "value": range(24)}).to_csv("series.csv", index=False)
agg_plan = lm.plan_series(epsilon=1, sensitivity=1, period=day, freq="1h", landmarks=[3])
agg = lm.series("series.csv", epsilon=1, sensitivity=1, period=day, freq="1h", landmarks=[3])
city = synthetic_city(2000, 20, 4, seed=3)
city.events[["uid", "time", "cell_id"]].rename(columns={"time": "datetime"}).to_csv(
    "events.csv", index=False)
city.towers.to_csv("cells.csv", index=False)
ds = pm.Session("events.csv", tessellation=city.zones, budget=pm.PureDP(3), cells="cells.csv")
dens_plan = ds.plan_density(epsilon=1, week=city.week_start.date().isoformat(), max_visits=10)
dens = ds.density(epsilon=1, week=city.week_start.date().isoformat(), max_visits=10)
"""

#: every kind declared as data (the count template's rows, privmob.releases.kinds) is shown
#: from its declaration: its method, and its plan
for _k in KINDS:
    if _k.counts is not None:
        DISPLAYS[_k.method] = (_k.method, f"{_k.method}_plan")
        OTHER_KINDS += (
            f"{_k.method}_plan = s2.plan_{_k.method}(epsilon=0.5, max_records=3, period=week)\n"
            f"{_k.method} = s2.{_k.method}(epsilon=0.5, max_records=3, period=week)\n"
        )


def session_kinds() -> set[str]:
    """The Session method of every release kind of privmob (``privmob.releases.kinds``)."""
    return {k.method for k in KINDS}


def html_of(cell: dict) -> str:
    """The ``text/html`` of a cell's value; the cell's error, if it raised, as a failure."""
    for out in cell["outputs"]:
        if out["output_type"] == "error":
            pytest.fail(f"cell raised {out['ename']}: {out['evalue']}\n{cell['source']}")
        if out["output_type"] == "execute_result" and "text/html" in out["data"]:
            return str(out["data"]["text/html"])
    pytest.fail(f"no rich display (text/html) for:\n{cell['source']}")


def test_every_release_kind_is_displayed() -> None:
    assert set(DISPLAYS) == session_kinds(), "a new release kind needs its display checked here"


def test_tutorial_runs_in_a_plain_jupyter_kernel(tmp_path: Path) -> None:
    data = shared_data_dir()
    if not data.is_dir():
        pytest.skip(f"the tutorial uses ../shared/data, which is absent ({data})")
    work = tmp_path / "repo"
    work.mkdir()
    (tmp_path / "shared").mkdir()
    os.symlink(data, tmp_path / "shared" / "data")
    ledger = str(tmp_path / "default-ledger.sqlite")
    v4 = nbformat.v4
    cells = [v4.new_code_cell(SETUP.format(work=str(work), ledger=ledger))]
    cells += [v4.new_code_cell(code) for code in python_blocks(TUTORIAL)]
    cells.append(v4.new_code_cell(OTHER_KINDS))
    shown: dict[str, int] = {}
    for kind, (release, plan) in DISPLAYS.items():
        shown[kind] = len(cells)
        cells += [v4.new_code_cell(release), v4.new_code_cell(plan)]
    nb = v4.new_notebook(cells=cells)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, allow_errors=True, resources={"metadata": {}}
    )
    client.execute(cwd=str(work))
    for cell in nb.cells[: shown["od"]]:  # every cell of the tutorial ran
        for out in cell["outputs"]:
            if out["output_type"] == "error":
                pytest.fail(f"cell raised {out['ename']}: {out['evalue']}\n{cell['source']}")
    for kind, at in shown.items():
        release, plan = html_of(nb.cells[at]), html_of(nb.cells[at + 1])
        # the release's settings: its kind, what it cost, its margin; then its table
        assert re.search(r"<th>cost</th><td>epsilon=", release), (kind, release[:300])
        assert "<th>privacy unit</th>" in release and "<table" in release, kind
        # a picture of the kind (a map or a chart) and the summary rows filled, in a kernel
        assert "<svg" in release, kind
        for row in ("bounds", "95% margin of error"):
            assert not re.search(rf"<th>{row}</th><td>\s*</td>", release), (kind, row)
        assert "privacy cost</th><td>epsilon=" in plan and "noisy cells" in plan, (kind, plan)
