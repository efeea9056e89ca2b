"""The registry of release kinds (``privmob.releases.kinds``) and the guarantees every kind must
keep, tested by iterating the registry: a new kind cannot land without an example here
(``EXAMPLES``), and then it is checked like every other kind.

- every list of kinds derives from the registry (commands, plans, layers, programme, docs);
- every kind binds its input: the same input under a second dataset name is refused;
- every published file carries the not-for-publication stamp in test mode, and the release's
  identity (kind, version, for publication) otherwise;
- neighbouring datasets (one extra adversarial user) change nothing but noisy values;
- metadata names the input shape, the trip rule, the stay thresholds, the time zones, the
  bounds, the unit, the noise and the period;
- test mode runs every noise and unit combination from the command line;
- the header the ledger records is the same on neighbouring datasets;
- a kind declared as data: one user more changes its exact cells by at most the sensitivity it
  states, and its noise is calibrated to that sensitivity.

The registry iterated is :func:`~privmob.releases.kinds.every_kind`: privmob's kinds and those
registered from outside (``tests/releases/user_kinds.py``, a user's kind, registered through
the public point; ``$PRIVMOB_TEST_KINDS`` names more modules to import first:
``test_user_kinds.py`` runs these tests so on deliberately broken kinds, which must fail).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
import typing
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import typer
from tests.helpers import run_cli
from tests.releases.golden_cases import CASES, COMMON, INPUTS, capture

import privmob
from privmob.privacy.ledger import Ledger
from privmob.releases.kinds import BY_ANY_NAME, BY_NAME, KINDS, every_kind
from privmob.releases.stamp import read_stamp

REPO = Path(__file__).resolve().parents[2]

#: the kinds declared outside privmob, registered before the registry is iterated: a user's
#: kind (tests/releases/user_kinds.py) and the modules $PRIVMOB_TEST_KINDS names
for _module in ("tests.releases.user_kinds", *os.environ.get("PRIVMOB_TEST_KINDS", "").split()):
    importlib.import_module(_module)
#: every registered kind: privmob's (KINDS) and the user's
ALL = every_kind()

#: one small example per kind: the golden case it runs (tests/releases/golden_cases.py), or
#: its command line; a kind of the count template has one made from what it counts
EXAMPLES: dict[str, str | list[str]] = {
    "od": "od_trips",
    "population": "population",
    "report": "report",
    "density": "density",
    "series-counts": "series_counts",
    "series": "series",
    # the dimensions with declared edges and values: trip distance and a categorical column
    "counts": ["counts", "{in}/trips_mode.csv", "-t", "{in}/grid.geojson", "-e", "1", "-T", "3",
               "--by", "origin,distance:0,1,2,5,mode:bike,car"],
}  # fmt: skip
COUNT_INPUTS = {"trips": "trips.csv", "trip-points": "points.csv", "events": "events.csv"}


def example(kind: Any) -> list[str]:
    """The command line of ``kind``'s example, with ``{in}`` for the inputs folder."""
    ex = EXAMPLES.get(kind.name)
    if ex is None and kind.counts is not None:
        data = "{in}/" + COUNT_INPUTS[kind.counts.records]
        return [kind.name, data, "-t", "{in}/grid.geojson", "-e", "1", "-T", "3"]
    assert ex is not None, f"kind {kind.name} has no example in tests/releases/test_kinds.py"
    return list(CASES[ex]) if isinstance(ex, str) else ex


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_every_kind_has_an_example(kind: Any) -> None:
    assert example(kind)[0] == kind.name  # the example runs the kind's own command


# -- every list of kinds derives from the registry ---------------------------------------------
def _command(kind: Any) -> Any:
    sub = typer.Typer()
    importlib.import_module(kind.cli_module).register(sub)
    return typer.main.get_group(sub).commands[kind.name]


def keywords(method: Any) -> set[str]:
    """The keywords ``method`` takes: its parameters and the keys of a ``**options:
    Unpack[TypedDict]`` (as an editor reads them)."""
    try:
        parameters = inspect.signature(method, eval_str=True).parameters
    except NameError:  # a type imported for type checkers only: the parameters as written
        parameters = inspect.signature(method).parameters
    typed = [
        typing.get_args(p.annotation)[0]
        for p in parameters.values()
        if p.kind is inspect.Parameter.VAR_KEYWORD and typing.get_args(p.annotation)
    ]
    return {*parameters, *(key for t in typed for key in typing.get_type_hints(t))}


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_the_kind_is_one_name_everywhere(kind: Any) -> None:
    from privmob.cli.lazy import LAZY_COMMANDS
    from privmob.cli.plan import PLANNED
    from privmob.evaluate.programme import KINDS as PROGRAMME_KINDS
    from privmob.privacy.programme_ledger import LEDGER_KINDS
    from privmob.render.layers import LAYER_TABLES
    from privmob.session import Session

    assert LAZY_COMMANDS[kind.name].module == kind.cli_module
    assert _command(kind).name == kind.name  # the command the module registers
    assert (kind.name in PLANNED) == kind.plannable
    assert callable(getattr(Session, kind.method))
    assert callable(getattr(Session, f"plan_{kind.method}"))
    spec_kind = kind.spec_type.__dataclass_fields__["kind"].default
    assert spec_kind == kind.name or kind.counts is not None  # the ledger's and metadata's kind
    assert (kind.name in PROGRAMME_KINDS) == kind.programme
    if kind.programme:  # the programme ledger counts the kind's releases under every name
        assert {kind.name, *kind.old_kinds} <= set(LEDGER_KINDS[kind.name])
    for name in (kind.name, *kind.old_kinds):
        assert (name in LAYER_TABLES) == (kind.layer is not None)
        assert BY_ANY_NAME[name] is kind
    if kind.bound is not None:  # one spelling of the bound: Session keyword and command flags
        assert "per_user" in keywords(getattr(Session, kind.method))  # pm.PerUser(n, unit)
        assert kind.bound.keyword in keywords(getattr(Session, kind.method))  # its earlier one
        flags = {f for p in _command(kind).params for f in (*p.opts, *p.secondary_opts)}
        assert set(kind.bound.flags) <= flags
        for typed in kind.bound.typed:  # each typed bound is named by the kind's keyword
            assert getattr(privmob, typed).name == kind.bound.keyword, typed


def test_the_docs_tables_list_every_kind() -> None:
    # privmob's own kinds (KINDS): a kind registered from outside is its author's to document
    readme = (REPO / "README.md").read_text()
    api = (REPO / "docs" / "api.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `privmob ")]
    for kind in KINDS:
        assert any(re.search(rf"`privmob {kind.name}[` ]", r) for r in rows), kind.name
    # docs/api.md: a row per method; the count template's kinds are Session.counts' presets
    own = {k.method for k in KINDS if k.counts is None}
    listed = {m for m in re.findall(r"^\| `(\w+)\(", api, re.M)}
    assert listed == own  # and no kind the registry does not know
    assert "Every kind of the count template" in api
    plan_line = next(r for r in rows if r.startswith("| `privmob plan od"))
    assert plan_line.split("`")[1] == "privmob plan " + "\\|".join(
        k.name for k in KINDS if k.plannable
    )


def test_earlier_method_names_still_work_and_warn(tmp_path: Path) -> None:
    from tests.helpers import box_grid

    s = privmob.Session(str(INPUTS / "trips.csv"), tessellation=box_grid(3), budget=10, dataset="d")
    three = privmob.PerUser(3, "trips")
    with s, pytest.warns(DeprecationWarning, match="Session.plan_od"):
        old = s.plan_od_matrix(epsilon=1, per_user=three)
    assert old == s.plan_od(epsilon=1, per_user=three)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.plan_od(epsilon=1, per_user=three)  # the one name does not warn
    for kind in KINDS:  # every earlier name of every kind, and its plan
        for old_name in kind.old_methods:
            for name in (old_name, f"plan_{old_name}"):
                assert "Deprecated" in (getattr(privmob.Session, name).__doc__ or ""), name


# -- helpers: run a kind's example on a copy of the inputs -------------------------------------
def _inputs(tmp: Path, neighbour: bool = False) -> Path:
    """A copy of the golden inputs; ``neighbour``: one adversarial user added to every input
    (many records at the busiest places and times), and the series file changed by its
    sensitivity at one timestamp (a series' neighbour)."""
    d = tmp / ("inputs-neighbour" if neighbour else "inputs")
    shutil.copytree(INPUTS, d)
    trips = pd.read_csv(d / "trips.csv")
    modes = trips.assign(mode=[("bike", "car", "walk")[i % 3] for i in range(len(trips))])
    if not neighbour:
        modes.to_csv(d / "trips_mode.csv", index=False)  # a categorical column
        return d
    extra = trips.head(40).assign(uid=9999, tid=range(10_000, 10_040))
    pd.concat([trips, extra]).to_csv(d / "trips.csv", index=False)
    # the adversary's trips: in declared values and in one that is not
    extra_modes = extra.assign(mode=["car", "not-declared"] * 20)
    pd.concat([modes, extra_modes]).to_csv(d / "trips_mode.csv", index=False)
    for name in ("points.csv", "events.csv", "cell_events.csv"):
        df = pd.read_csv(d / name)
        add = df.head(60).assign(uid=9999)
        pd.concat([df, add]).to_csv(d / name, index=False)
    series = pd.read_csv(d / "series.csv")
    series.loc[5, "v"] += 2  # --sensitivity 2
    series.to_csv(d / "series.csv", index=False)
    return d


def _argv(kind: Any, inputs: Path, out: Path, *extra: str, test_mode: bool = True) -> list[str]:
    args = [a.replace("{in}", str(inputs)) for a in example(kind)]
    args = [a for a in args if a != "--format" and not a.startswith("csv")]  # layers below
    target = out / "report.html" if kind.name == "report" else out / "o"
    common = COMMON if test_mode else COMMON[COMMON.index("--budget") :]
    return [*args, "-o", str(target), *common, *extra]


def _layer(kind: Any) -> Any:
    """The kind's map layer in its example (a count table's: from the example's ``--by``)."""
    args = example(kind)
    by = args[args.index("--by") + 1].split(",") if "--by" in args else ()
    return kind.layer_of(by)


def test_a_count_tables_example_has_a_layer() -> None:
    # counts' layer follows its dimensions: its example (by origin) is a polygon layer, so the
    # guarantees below run on it too
    assert _layer(BY_NAME["counts"]).stem == "counts_tiles"


def _layers(kind: Any) -> tuple[str, ...]:
    """Every layer format, for a kind with a layer whose command writes layers (OD lines: every
    non-zero cell, ``--all-flows``, so that a layer of noise-only flows is not empty)."""
    names = {p.name for p in _command(kind).params}
    if not (_layer(kind) and "output_format" in names):
        return ()
    every = ("--all-flows",) if "all_flows" in names else ()
    return ("--format", "parquet,geoparquet,geojson,csv", *every)


# -- every kind binds its input ------------------------------------------------------------------
@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_every_kind_binds_its_input_and_refuses_a_second_dataset(kind: Any, tmp_path: Path) -> None:
    inputs, ledger = _inputs(tmp_path), tmp_path / "ledger.sqlite"
    case = kind
    first = _argv(case, inputs, tmp_path / "a", "--ledger", str(ledger), test_mode=False)
    assert run_cli(first) == 0
    led = Ledger(ledger)
    assert led.entries("golden")[0].provenance["input_fingerprint"]  # the input is recorded
    second = [*first[: first.index("-o")], "-o", str(tmp_path / "b" / "o")]
    second += ["--budget", "100", "--dataset", "other", "--quiet", "--ledger", str(ledger)]
    if kind.name == "report":
        second[second.index("-o") + 1] = str(tmp_path / "b" / "report.html")
    assert run_cli(second) == 3  # the same content under another dataset's budget
    assert Ledger(ledger).entries("other") == []
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").rglob("*"))


# -- every published file is stamped -------------------------------------------------------------
def _stamps(folder: Path) -> dict[str, dict[str, Any]]:
    """The stamp of every file published in ``folder``, by file name."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        suffix = path.suffix
        if suffix in (".parquet", ".geoparquet"):
            st = read_stamp(path)
            out[path.name] = {
                "for_publication": st.get("privmob.for_publication") == "true",
                "kind": st.get("privmob.kind"),
                "version": st.get("privmob.version"),
                "warning": st.get("privmob.warning", ""),
            }
        elif suffix == ".csv":
            df = pd.read_csv(path, dtype=str)
            assert df["privmob_for_publication"].nunique() == 1, path.name  # on every row
            row = df.iloc[0]
            out[path.name] = {
                "for_publication": row["privmob_for_publication"] == "true",
                "kind": row.get("privmob_kind"),
                "version": row.get("privmob_version"),
                "warning": str(row.get("privmob_warning", "")),
            }
        elif suffix in (".geojson", ".json"):
            doc = json.loads(path.read_text())
            st = doc["privmob"] if suffix == ".geojson" else doc
            out[path.name] = {
                "for_publication": st["for_publication"],
                "kind": st["kind"],
                "version": st.get("version", st.get("software", {}).get("version")),
                "warning": st.get("warning", ""),
            }
        elif suffix == ".qml":  # a layer's QGIS style: the stamp in its <privmob> element
            st = ET.parse(path).getroot().find("privmob")
            assert st is not None, path.name
            out[path.name] = {
                "for_publication": st.get("for_publication") == "true",
                "kind": st.get("kind"),
                "version": st.get("version"),
                "warning": st.get("warning", ""),
            }
        elif suffix == ".html":
            html = path.read_text()
            body = html[html.index("<body>") :]
            out[path.name] = {
                "for_publication": "NOT FOR PUBLICATION" not in body,
                "kind": "report" if "report" in path.name else None,
                "version": privmob.__version__ if privmob.__version__ in html else None,
                "warning": "NOT FOR PUBLICATION" if "NOT FOR PUBLICATION" in body else "",
            }
        else:
            raise AssertionError(f"{path.name}: a published file type the stamp test does not know")
    return out


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_every_published_file_carries_its_stamp(kind: Any, tmp_path: Path) -> None:
    inputs, case = _inputs(tmp_path), kind
    folder = {"report": ""}.get(kind.name, "o")
    assert run_cli(_argv(case, inputs, tmp_path / "test", *_layers(kind))) == 0
    stamps = _stamps(tmp_path / "test" / folder)
    assert len(stamps) >= len(kind.tables) + 1
    if _layers(kind):  # every layer format was written
        stem = _layer(kind).stem
        assert {f"{stem}{s}" for s in (".geoparquet", ".geojson", ".csv")} <= set(stamps)
    for name, st in stamps.items():
        assert st["for_publication"] is False, name
        assert "NOT FOR PUBLICATION" in st["warning"], name
    ledger = ["--ledger", str(tmp_path / "l.sqlite")]
    assert (
        run_cli(_argv(case, inputs, tmp_path / "real", *_layers(kind), *ledger, test_mode=False))
        == 0
    )
    for name, st in _stamps(tmp_path / "real" / folder).items():
        assert st["for_publication"] is True and not st["warning"], name
        assert st["kind"] in (kind.name, None) and st["version"] == privmob.__version__, name
        if not name.endswith(".html"):
            assert st["kind"] == kind.name, name


# -- neighbouring datasets change nothing but noisy values -------------------------------------
#: metadata computed from noisy values only (post-processing): may differ between neighbours
NOISY_METADATA = re.compile(
    r"(^|\.)(signal|warning|warnings|tau|noisy_total|kept_coefficients|clusters)(\.|$)"
)


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_neighbouring_datasets_change_only_noisy_values(kind: Any, tmp_path: Path) -> None:
    case = kind
    runs = []
    for neighbour in (False, True):
        out = tmp_path / ("d2" if neighbour else "d1")
        assert run_cli(_argv(case, _inputs(tmp_path, neighbour), out, *_layers(kind))) == 0
        runs.append(capture(kind.name, out))
    a, b = runs
    assert sorted(a["tables"]) == sorted(b["tables"])  # the same files
    for name in a["tables"]:
        ta, tb = a["tables"][name], b["tables"][name]
        assert ta["columns"] == tb["columns"] and len(ta["rows"]) == len(tb["rows"]), name
        # the public keys of each row are the same; only value columns may differ
        for i, col in enumerate(ta["columns"]):
            if col in PUBLIC_KEYS:
                assert [r[i] for r in ta["rows"]] == [r[i] for r in tb["rows"]], (name, col)
    ma, mb = a["metadata"], b["metadata"]
    keys = {k for k in ma.keys() | mb.keys() if not NOISY_METADATA.search(k)}
    kind_keys = {k for k in keys if not k.startswith("analyses.")}  # the report's noisy values
    differ = {k: (ma.get(k), mb.get(k)) for k in kind_keys if ma.get(k) != mb.get(k)}
    assert not differ, f"neighbours differ beyond noisy values: {differ}"


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_the_header_charged_is_the_same_on_neighbours(kind: Any, tmp_path: Path) -> None:
    """What the ledger records of a release (its kind, description, cost and parameters: the
    header charged before the noise) is fixed before the data: the same with one more user."""
    recorded = []
    for neighbour in (False, True):
        ledger, out = tmp_path / f"l{neighbour}.sqlite", tmp_path / f"o{neighbour}"
        inputs = _inputs(tmp_path, neighbour)
        argv = _argv(kind, inputs, out, "--ledger", str(ledger), test_mode=False)
        assert run_cli(argv) == 0
        entries = Ledger(ledger).entries("golden")
        recorded.append([(e.kind, e.description, e.cost, e.params) for e in entries])
    assert recorded[0] and recorded[0] == recorded[1]


def _timed(path: Path, records: str, out: Path) -> Path:
    """The records of ``path``; trips with an end time (a duration to sum), the adversary's
    (uid 9999) two days long, far above any clamp."""
    df = pd.read_csv(path)
    if records == "trips":
        start = pd.to_datetime(df["start_time"])
        minutes = pd.to_timedelta((df["tid"] * 37) % 200, unit="min")
        df["end_time"] = (start + minutes).where(df["uid"] != 9999, start + pd.Timedelta(days=2))
    df.to_csv(out, index=False)
    return out


DECLARED = [k for k in ALL if k.counts is not None]


@pytest.mark.parametrize("kind", DECLARED, ids=lambda k: k.name)
def test_one_user_changes_a_declared_kind_by_at_most_its_stated_sensitivity(
    kind: Any, tmp_path: Path
) -> None:
    """A kind declared as data (the count template's): one user more (the adversary of
    :func:`_inputs`: 40 trips, or 60 points or events, far above the bound of 3) changes its
    exact cells by at most the L1 sensitivity its header states (the counts', and the centred
    sums' with a value), and its noise has the scale of that sensitivity over its epsilon
    (Laplace: sensitivity / epsilon, half the epsilon each with a value). A kind that states
    less than one user changes (and calibrates its noise to it) fails."""
    import numpy as np

    from privmob.privacy.samplers import resolve
    from privmob.releases.counts import MeanCells, exact_cells

    declared, bound, epsilon = kind.counts, 3, 1.0
    exact, stated = [], []
    for neighbour in (False, True):
        inputs = _inputs(tmp_path, neighbour)
        data = _timed(inputs / COUNT_INPUTS[declared.records], declared.records, inputs / "t.csv")
        grid = str(inputs / "grid.geojson")
        with privmob.Session(str(data), tessellation=grid, seed=1, budget=privmob.PureDP(5)) as s:
            spec = kind.spec_type(
                s.tessellation, epsilon, declared.records, declared.by, bound, kind=kind.name,
                value=declared.mean,
            )  # fmt: skip
            loaded = s.load_counted(declared.records, declared.by, declared.mean)
            per_user, domain = spec.per_user(None), spec.count_domain()
            # one key in D and D': the users of D keep the same records in both
            cells = exact_cells(loaded, spec, domain, per_user, resolve(1), key=99,
                                value=declared.mean)  # fmt: skip
            exact.append(cells)
            noise, cost = spec.calibrated
            header, _ = spec.publish(None, noise, cost, resolve(1), per_user)
            stated.append(header.noise)
    assert stated[0] == stated[1]
    moved = (exact[1] - exact[0]).astype(np.float64)
    share = epsilon / 2 if declared.value else epsilon
    counts_noise = noise.counts if isinstance(noise, MeanCells) else noise
    counts_moved = np.abs(moved[0] if declared.value else moved).sum()
    assert 0 < counts_moved <= stated[0]["l1_sensitivity"], (counts_moved, stated[0])
    assert counts_noise.scale == pytest.approx(stated[0]["l1_sensitivity"] / share)
    if declared.value:
        assert isinstance(noise, MeanCells)
        sums_moved = np.abs(moved[1]).sum() / 1000  # thousandths of the value's unit
        assert 0 < sums_moved <= stated[0]["sums"]["l1_sensitivity"], (sums_moved, stated[0])
        assert noise.sums.scale == pytest.approx(stated[0]["sums"]["l1_sensitivity"] / share)


#: columns that hold the public domain (never data-dependent)
PUBLIC_KEYS = {
    "period", "origin", "destination", "zone", "hour", "t", "time", "tile_id", "day_type",
    "time_window", "cell", "bin", "label", "epsilon", "noise_scale", "published", "landmark",
    "distance", "duration", "mode", "weekday", "timestamp",
}  # fmt: skip


# -- metadata says what was counted ----------------------------------------------------------------
@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.name)
def test_metadata_names_what_was_counted(kind: Any, tmp_path: Path) -> None:
    case = kind
    assert run_cli(_argv(case, _inputs(tmp_path), tmp_path)) == 0
    folder = tmp_path if kind.name == "report" else tmp_path / "o"
    meta = json.loads(
        (folder / ("report.json" if kind.name == "report" else "metadata.json")).read_text()
    )
    defs = meta["definitions"]
    assert set(kind.definitions) | {"period"} <= set(defs)
    assert defs["period"] and any(v is not None for v in defs["period"].values())
    if "input_shape" in kind.definitions:
        assert defs["input_shape"] in kind.shapes
    if "trip_rule" in kind.definitions:
        assert defs["trip_rule"] and defs["same_tile_trips"]
    privacy = meta["privacy"]
    assert privacy["unit"] and privacy["noise"]["kind"] and privacy["cost"]
    assert kind.bound is None or privacy["bounds"][kind.bound.metadata] is not None


def test_definitions_follow_the_input_options(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path)
    args = ["od", str(inputs / "points.csv"), "-t", str(inputs / "grid.geojson"), "-e", "1",
            "-T", "3", "--input-shape", "gps", "--stay-distance", "150", "--stay-minutes", "15",
            "--timezone", "Europe/Berlin", "--input-timezone", "UTC"]  # fmt: skip
    assert run_cli([*args, "-o", str(tmp_path / "o"), *COMMON]) == 0
    defs = json.loads((tmp_path / "o" / "metadata.json").read_text())["definitions"]
    assert defs["input_shape"] == "gps"
    assert defs["stay_points"] == {"distance_m": 150.0, "minutes": 15.0}
    assert defs["timezone"] == "Europe/Berlin" and defs["input_timezone"] == "UTC"
    assert "stay points" in defs["trip_rule"]


# -- test mode runs every noise and unit ---------------------------------------------------------
COMBINATIONS: dict[str, list[tuple[str, ...]]] = {
    "od": [
        ("--noise", "discrete-gaussian", "--delta", "1e-9"),
        ("--unit", "trip", "-T", "1"),
        ("--unit", "trip", "-T", "1", "--noise", "discrete-gaussian", "--delta", "1e-9"),
    ],
    "population": [("--noise", "discrete-gaussian", "--delta", "1e-9")],
    "report": [("--unit", "trip", "-T", "1")],
    "density": [("--delta", "1e-6")],
    "series-counts": [("--scheme", "event"), ("--scheme", "user")],
    "series": [("--scheme", "event"), ("--scheme", "user")],
    "counts": [("--noise", "discrete-gaussian", "--delta", "1e-9")],
}
GAUSSIAN = ("--noise", "discrete-gaussian", "--delta", "1e-9")
TRIP_LEVEL = ("--unit", "trip", "-T", "1")
for _k in ALL:  # the count template's kinds: its noises (a mean: Laplace only) and units
    if _k.counts is not None:
        trips = _k.counts.records == "trips"
        COMBINATIONS.setdefault(
            _k.name, [GAUSSIAN] if not _k.counts.value else [TRIP_LEVEL] if trips else []
        )


def test_every_kind_has_its_combinations() -> None:
    assert set(COMBINATIONS) == {k.name for k in ALL}


@pytest.mark.parametrize(
    ("name", "extra"), [(n, e) for n, combos in COMBINATIONS.items() for e in combos]
)
def test_test_mode_runs_every_noise_and_unit(
    name: str, extra: tuple[str, ...], tmp_path: Path
) -> None:
    """``od --noise discrete-gaussian --delta 1e-9 --test-mode`` and ``od --unit trip
    --test-mode`` exited 3: the throw-away ledger had a pure, user-level budget."""
    args = _argv(BY_NAME[name], _inputs(tmp_path), tmp_path)
    if "-T" in extra and "-T" in args:  # the combination's bound replaces the example's
        i = args.index("-T")
        del args[i : i + 2]
    assert run_cli([*args, *extra]) == 0


# -- one same-tile rule in od and the report ----------------------------------------------------
@pytest.mark.parametrize("rule", ["exclude", "include"])
def test_od_and_report_follow_one_same_tile_rule(rule: str, tmp_path: Path) -> None:
    """The report's od_flows counted trips within one tile (22 -> 22 on Citi Bike) while od
    never released them; now both follow ``--same-tile`` (default: exclude)."""
    from privmob.releases.kinds import SAME_TILE_RULES

    inputs = _inputs(tmp_path)
    option = () if rule == "exclude" else ("--same-tile", "include")
    diagonal = {}
    for name in ("od", "report"):
        out = tmp_path / name
        assert run_cli(_argv(BY_NAME[name], inputs, out, *option)) == 0
        folder = out if name == "report" else out / "o"
        meta = json.loads(
            (folder / f"{'report' if name == 'report' else 'metadata'}.json").read_text()
        )
        assert meta["definitions"]["same_tile_trips"] == SAME_TILE_RULES[rule]
        table = pd.read_parquet(
            folder / ("report_tables/od_flows.parquet" if name == "report" else "od.parquet")
        )
        cells = table[table["origin"].astype(str) != "outliers"]
        diagonal[name] = int(
            (cells["origin"].astype(str) == cells["destination"].astype(str)).sum()
        )
        assert len(cells) == 9 * (9 if rule == "include" else 8)  # the public domain
    assert diagonal == {
        "od": 9 if rule == "include" else 0,
        "report": 9 if rule == "include" else 0,
    }


def test_pm_release_binds_the_input_as_the_session_does(tmp_path: Path) -> None:
    """``pm.release`` skipped the data binding: the same trips could be charged under two
    datasets."""
    from tests.helpers import box_grid

    from privmob.engine import DuckDBEngine
    from privmob.errors import BudgetError
    from privmob.prepare.inputs import load_trips_any
    from privmob.releases.base import Accountant
    from privmob.releases.specs import OdSpec, release

    led = Ledger(tmp_path / "l.sqlite")
    for name in ("a", "b"):
        led.set_budget(name, 10)
    tess, engine = box_grid(3), DuckDBEngine()
    try:
        trips = load_trips_any(str(INPUTS / "trips.csv"), engine=engine, tessellation=tess)
        spec = OdSpec(tess, 1.0, max_trips=3)
        release(trips, spec, Accountant(led, "a"), rng=1)
        assert led.entries("a")[0].provenance["input_fingerprint"] == trips.fingerprint
        with pytest.raises(BudgetError):
            release(trips, spec, Accountant(led, "b"), rng=1)
        assert led.entries("b") == []
    finally:
        engine.close()
