"""The DP mobility report: sensitivities, public structure, no raw values, budget."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privmob.data.sources import load_trip_points
from privmob.data.tessellation_input import load_tessellation
from privmob.engine import DuckDBEngine
from privmob.errors import BudgetError, ConfigError
from privmob.privacy.ledger import Ledger
from privmob.privacy.quantiles import candidate_values
from privmob.releases.base import Accountant
from privmob.releases.report import (
    ANALYSES,
    DISTRIBUTIONS,
    ReportConfig,
    Tiles,
    exact_counts,
    mobility_report,
)
from privmob.releases.report.analyses import sensitivity
from privmob.render.report_files import report_document

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "dpmr_fixture"
# a box inside the fixture's 4 Berlin tiles, and a bit outside
LAT, LNG = (52.505, 52.545), (13.28, 13.40)


@pytest.fixture(scope="module")
def gdf():
    """The fixture's tessellation (a privmob Tessellation)."""
    if not FIXTURE.exists():
        pytest.skip(f"../shared/data not found: {FIXTURE}")
    return load_tessellation(FIXTURE / "test_tessellation.geojson")


@pytest.fixture(scope="module")
def tiles(gdf):
    return Tiles.from_tessellation(gdf)


def canonical(frame: pd.DataFrame, tess) -> pd.DataFrame:
    """The canonical trip points view built directly (the loader refuses missing values,
    which the missing-values analysis must still handle)."""
    out = frame.rename(columns={"datetime": "time"}).copy()
    out["uid"] = out["uid"].astype(str)
    out["tile"] = tess.assign(out["lng"].to_numpy(float), out["lat"].to_numpy(float))
    return out


def synth(n_users: int, seed: int, max_trips: int = 12, uid0: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(uid0, uid0 + n_users):
        for t in range(int(rng.integers(1, max_trips + 1))):
            start = pd.Timestamp("2020-12-01") + pd.Timedelta(minutes=int(rng.integers(0, 44000)))
            dur = pd.Timedelta(minutes=int(rng.integers(1, 200)))
            for j, ts in enumerate((start, start + dur / 2, start + dur)):
                if j == 1 and rng.random() < 0.5:
                    continue
                rows.append((u, f"{u}-{t}", ts, rng.uniform(*LAT), rng.uniform(*LNG)))
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def heavy_user(uid: int, n_trips: int, missing: bool = False) -> pd.DataFrame:
    """Worst case: every trip the same, both ends in one tile, one hour, one day; with
    ``missing`` each trip also has a row without time and coordinates."""
    rows = []
    for t in range(n_trips):
        for ts in ("2020-12-05 08:10", "2020-12-05 08:40"):
            rows.append((uid, f"h{t}", pd.Timestamp(ts), 52.52, 13.33))
        if missing:
            rows.append((uid, f"h{t}", pd.NaT, np.nan, np.nan))
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def counts_of(frame, gdf, tiles, cfg, key=12345):
    eng = DuckDBEngine()
    eng.register("pm_points", canonical(frame, gdf))
    return exact_counts(eng, "pm_points", cfg, tiles, key)


def delta_of(name: str, cfg: ReportConfig) -> int:
    if name == "users":
        return sensitivity("dataset_statistics", cfg, "users")
    if name == "trip_kinds":
        return sensitivity("dataset_statistics", cfg, "trips")
    return sensitivity(name, cfg)


def test_one_union_query_gives_each_querys_dense_vector(gdf, tiles):
    # exact_counts runs the 16 count queries as one UNION ALL (one engine job): it must give,
    # vector by vector, what one dense_counts per query gives on the same bounded tables
    from privmob.engine import dense_counts
    from privmob.releases.report.build import time_bins
    from privmob.releases.report.sql import queries

    frame = pd.concat([synth(40, seed=11), heavy_user(999, 30, missing=True)])
    cfg = ReportConfig.build(epsilon=1.0, max_trips=5, period=("2020-12-01", "2021-01-01"))
    eng = DuckDBEngine()
    eng.register("pm_points", canonical(frame, gdf))
    got = exact_counts(eng, "pm_points", cfg, tiles, 12345)  # leaves pm_trips etc. in eng
    qs = queries(cfg, tiles.k, len(time_bins(cfg)), eng.dialect)
    assert list(got) == list(qs)
    for name, (sql, size) in qs.items():
        want = dense_counts(eng, sql, (size,))
        assert got[name].shape == (size,) and got[name].dtype == np.int64
        assert np.array_equal(got[name], want), name
    assert sum(int(v.sum()) for v in got.values()) > 0


@pytest.mark.parametrize("unit", ["user", "trip"])
def test_one_unit_changes_each_exact_output_by_at_most_its_sensitivity(gdf, tiles, unit):
    m = 4
    cfg = ReportConfig.build(epsilon=1, max_trips=m, period=("2020-12-01", "2021-01-01"), unit=unit)
    base = synth(25, seed=3)
    before = counts_of(base, gdf, tiles, cfg)
    if unit == "user":
        neighbours = [
            pd.concat([base, heavy_user(999, 3 * m)]),
            pd.concat([base, heavy_user(998, 3 * m, missing=True)]),
            pd.concat([base, synth(1, seed=11, max_trips=30, uid0=500)]),
            base[base["uid"] != 0],
        ]
    else:  # one trip more, of an existing user, between two of their trips
        extra = heavy_user(0, 1).assign(datetime=lambda d: d["datetime"] + pd.Timedelta("3D"))
        neighbours = [pd.concat([base, extra]), base[base["tid"] != "1-0"]]
    for nb in neighbours:
        after = counts_of(nb, gdf, tiles, cfg)
        for name, vec in before.items():
            diff = int(np.abs(after[name] - vec).sum())
            assert diff <= delta_of(name, cfg), (unit, name, diff)


def test_both_trip_ends_need_sensitivity_2m(gdf, tiles):
    # dp_mobility_report uses M for trips per hour; one user moves it by 2M
    m = 5
    cfg = ReportConfig.build(epsilon=1, max_trips=m, period=("2020-12-01", "2021-01-01"))
    base = synth(10, seed=4)
    before = counts_of(base, gdf, tiles, cfg)
    after = counts_of(pd.concat([base, heavy_user(999, 20)]), gdf, tiles, cfg)
    for name in ("trips_per_hour", "visits_per_tile", "visits_per_time_tile"):
        # all 2M ends of the user's M kept trips land in one cell each
        assert int(np.abs(after[name] - before[name]).sum()) == 2 * m == sensitivity(name, cfg)
    # the heavy user's trips stay within one tile: in no OD cell by the same-tile rule (od's)
    assert int(np.abs(after["od_flows"] - before["od_flows"]).sum()) == 0
    cfg = ReportConfig.build(
        epsilon=1, max_trips=m, period=("2020-12-01", "2021-01-01"), same_tile="include"
    )
    before = counts_of(base, gdf, tiles, cfg)
    after = counts_of(pd.concat([base, heavy_user(999, 20)]), gdf, tiles, cfg)
    assert int(np.abs(after["od_flows"] - before["od_flows"]).sum()) == m


def _skeleton(obj, path=""):
    """Everything except the numbers: keys, list lengths, strings."""
    if isinstance(obj, dict):
        return {k: _skeleton(v, f"{path}.{k}") for k, v in obj.items()}
    if isinstance(obj, list):
        return [_skeleton(v, path) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    return "number"


def _report(frame, gdf, tiles, cfg, seed=5, dataset="d"):
    eng = DuckDBEngine()
    points = load_trip_points(frame, engine=eng, tessellation=gdf)
    acc = Accountant(_ledger(), dataset, budget=100)
    return mobility_report(eng, points.view, tiles, cfg, acc, rng=seed)


def _ledger():
    import tempfile

    return Ledger(Path(tempfile.mkdtemp()) / "ledger.sqlite")


def test_neighbouring_datasets_give_identical_structure(gdf, tiles):
    cfg = ReportConfig.build(epsilon=2, max_trips=5, period=("2020-12-01", "2021-01-01"))
    base = synth(30, seed=8)
    small = base[base["uid"] != 0]  # also drops a whole day for some tiles
    empty_ish = base[base["uid"] == 1]  # one user: many analyses would be empty
    docs = [report_document(_report(f, gdf, tiles, cfg)) for f in (base, small, empty_ish)]
    for d in docs:
        d.pop("created_at")
        d["ledger_entry"] = None
        d.pop("ledger_entries", None)
        d.pop("ledger", None)  # each report was charged to a ledger of its own (random id)
        # the signal check reads the noisy values (post-processing), so its words may
        # change with them as the numbers do; its keys may not
        assert set(d.pop("signal")) == {"analyses", "warning"}
    sk = [_skeleton(d) for d in docs]
    assert sk[0] == sk[1] == sk[2]
    assert set(docs[0]["analyses"]) == set(ANALYSES)
    rels = [_report(f, gdf, tiles, cfg) for f in (base, empty_ish)]
    for name in ANALYSES:
        a, b = rels[0].tables[name], rels[1].tables[name]
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        text_cols = [c for c in a.columns if a[c].dtype == object]
        pd.testing.assert_frame_equal(a[text_cols], b[text_cols])


def test_no_raw_values_in_output(gdf, tiles):
    frame = synth(40, seed=9)
    frame.loc[0, "datetime"] = pd.Timestamp("2020-12-02 03:04:05")
    cfg = ReportConfig.build(epsilon=1, max_trips=6, period=("2020-11-15", "2021-01-10"))
    rel = _report(frame, gdf, tiles, cfg)
    doc = report_document(rel)
    text = json.dumps(doc)
    # first/last data timestamps, and raw trip durations/coordinates, never appear
    for ts in (frame["datetime"].min(), frame["datetime"].max()):
        assert ts.isoformat() not in text and str(ts) not in text
    assert "2020-11-15" in text  # the declared period does
    for name in DISTRIBUTIONS:
        grid = set(candidate_values(cfg.bins(name)).tolist())
        five = doc["analyses"][name]["five_number_summary"]
        assert set(five.values()) <= grid, name
        assert doc["analyses"][name]["edges"] == cfg.bins(name).edges.tolist()
    raw = set(np.round(frame["lat"], 6)) | set(np.round(frame["lng"], 6))
    nums = [v for a in doc["analyses"].values() for v in _numbers(a)]
    assert not raw & {round(float(v), 6) for v in nums}
    # every count is an integer (discrete noise); every analysis states eps, sensitivity, MoE
    for name, a in doc["analyses"].items():
        assert a["epsilon"] == pytest.approx(1 / 15)
        assert all(v > 0 for v in a["margin_of_error_95"].values()), name


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def test_noise_scales_follow_sensitivity_and_weights(gdf, tiles):
    cfg = ReportConfig.build(
        epsilon=3,
        max_trips=7,
        period=("2020-12-01", "2021-01-01"),
        analyses=["visits_per_tile", "trips_per_hour", "od_flows"],
        weights={"od_flows": 2},
    )
    rel = _report(synth(10, seed=1), gdf, tiles, cfg)
    a = rel.extra["analyses"]
    assert set(a) == {"visits_per_tile", "trips_per_hour", "od_flows"}
    assert a["od_flows"]["epsilon"] == pytest.approx(1.5)
    assert a["od_flows"]["noise"]["counts"]["scale"] == pytest.approx(7 / 1.5)
    assert a["trips_per_hour"]["noise"]["counts"]["scale"] == pytest.approx(14 / 0.75)
    assert rel.cost.epsilon == pytest.approx(3)
    assert rel.ledger_entry is not None and rel.for_publication is False


def test_budget_refused_before_reading_data(tiles):
    cfg = ReportConfig.build(epsilon=1, max_trips=3, period=("2020-12-01", "2021-01-01"))
    acc = Accountant(_ledger(), "tiny", budget=0.5)
    with pytest.raises(BudgetError):
        mobility_report(DuckDBEngine(), "no_such_table", tiles, cfg, acc, rng=1)


def test_config_refuses_data_dependent_or_bad_parameters():
    with pytest.raises(ConfigError):
        ReportConfig.build(epsilon=1, max_trips=0, period=("2020-12-01", "2021-01-01"))
    with pytest.raises(ConfigError):
        ReportConfig.build(epsilon=1, max_trips=3, period=("2021-01-01", "2020-12-01"))
    with pytest.raises(ConfigError):
        ReportConfig.build(
            epsilon=1, max_trips=3, period=("2020-12-01", "2021-01-01"), analyses=["nope"]
        )
    cfg = ReportConfig.build(epsilon=1, max_trips=3, period=("2020-01-01", "2021-01-01"))
    assert cfg.time_resolution == "week"


def test_signal_warning_and_below_margin_display(gdf, tiles) -> None:
    """One user at a small epsilon: the JSON keeps every noisy value, the signal check
    (noisy values and public margins only) warns, and the HTML shows counts within their
    margin as "below the margin" instead of negative numbers."""
    from privmob.render.report_html import render_report_html

    cfg = ReportConfig.build(epsilon=0.1, max_trips=5, period=("2020-12-01", "2021-01-01"))
    frame = synth(30, seed=8)
    doc = report_document(_report(frame[frame["uid"] == 1], gdf, tiles, cfg))
    sig = doc["signal"]
    assert sig["warning"] and "too few users" in sig["warning"]
    assert all("share_below_margin" in s for s in sig["analyses"].values())
    html = render_report_html(doc)
    assert "too few users" in html and "below the margin" in html
    stats = doc["analyses"]["dataset_statistics"]
    assert isinstance(stats["incomplete_trips"], int)  # the JSON keeps the noisy value
    # with 30 users at epsilon 50 the visits per tile carry signal: no warning for them
    rich = report_document(
        _report(
            frame,
            gdf,
            tiles,
            ReportConfig.build(epsilon=50, max_trips=5, period=("2020-12-01", "2021-01-01")),
        )
    )
    assert rich["signal"]["analyses"]["visits_per_tile"]["warning"] is None
