"""Utility benchmark: how much signal each release keeps per epsilon (issue 40 items 1 and 6).

A structured synthetic city (``city_synth.py``: Zipf home and work zones over the 263 NYC taxi
zones, weekday commutes, heavy-tailed trips per user with median 6) is generated once into
benchmarks/out/. The truth is every trip, unbounded. For each epsilon and repetition (fixed
seeds, test-mode noise) it runs, through the public Python API (``privmob.Session``):

* ``od`` (one-row trips, ``-T`` max trips): total-variation distance of the flow shares,
  recall of the true top-50 flows, median relative error of the flows with >= 100 true trips,
  the TV of the borough-to-borough shares; and the same with ``hierarchy="borough"`` (the
  zones' public boroughs released too and made consistent, ``--od-hierarchy``), scored on its
  zone table and its own borough table, with the share of its top 50 flows within their margin;
* ``counts`` by origin x hour of trips (``-T`` records): TV and large-cell error;
* ``population`` (homes from the trip points): TV and large-cell error;
* ``report`` (trip points, ``-T`` max trips, all 15 analyses): per analysis the TV of its
  shares, its large cells, the OD top-50 recall, and for the seven distributions the TV of the
  histogram and the relative error of the quartiles.

Truths: od and counts are counted from the trips file here; population and the report are
privmob's own release at epsilon 1e9 with no bound that cuts anything (the report's M is the
busiest user's trips), whose noise is zero; the quartiles of travel time, jump length and trips
per user are those of the raw values (every trip), the others privmob's exact bin midpoints.

dp_mobility_report 0.2.11 (DPMR) runs on the same trip points in the same run (its virtual
environment is made by ``bench_report.install_dpmr``), with the same epsilon and M, and is
scored against the same truth where its analysis has the same definition (the count analyses,
OD flows between distinct zones, and the three raw quartiles). Its noise is not seeded.

``--parts real``: the same releases, report, truth and DPMR on real data, the Gowalla NYC
check-ins of ../shared/data (consecutive same-day check-ins of a user as trips, both ends inside
a taxi zone; :func:`write_gowalla`), over the same 263 taxi zones.

Item 6: the density release (``Session.density``) on privmob's synthetic phone-record city
(privmob.data.density_synth) at a density comparable to the Paris data of seed 004 (mean true
count per zone-hour 150 with the defaults; Paris: 91): the scheme (EFPAG, EFPA) beside naive
per-cell Laplace (LPA) at the paper's epsilon 0.3, l = 30, delta 2e-6; MRE and Pearson per zone
averaged over zones, and the relative error by hour of the week (the paper's Figure 9a).

    uv run --all-extras python benchmarks/bench_utility.py --quick   # < 1 minute, no DPMR
    uv run --all-extras python benchmarks/bench_utility.py -r 2      # docs/utility.md figures
    uv run --all-extras python benchmarks/bench_utility.py --parts real -r 1   # ~3 minutes
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import privmob as pm
import utility_metrics as um
from bench_report import install_dpmr, run
from city_synth import SHARED, TAXI_ZONES, CityConfig, CityFiles, write_city
from privmob.evaluate.density_metrics import pearson

OUT = Path(__file__).resolve().parent / "out"
FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"
TRUTH_EPSILON = 1e9
#: report analyses that are one count vector: (key columns, value column)
COUNT_ANALYSES = {
    "trips_over_time": (["bin_start"], "trips"),
    "trips_per_weekday": (["weekday"], "trips"),
    "trips_per_hour": (["end", "day_type", "hour"], "trips"),
    "visits_per_tile": (["tile_id"], "visits"),
    "visits_per_time_tile": (["tile_id", "day_type", "time_window"], "visits"),
}
COUNTS = (*COUNT_ANALYSES, "od_flows")
DISTRIBUTIONS = (
    "travel_time",
    "jump_length",
    "time_between_trips",
    "trips_per_user",
    "radius_of_gyration",
    "user_tile_count",
    "mobility_entropy",
)
RAW_QUARTILES = ("travel_time", "jump_length", "trips_per_user")

Row = dict[str, Any]


# -- the truth ---------------------------------------------------------------------------------
def raw_truth(city: CityFiles) -> dict[str, Any]:
    """Counted from the files: the OD matrix, origin x hour counts, raw quartiles, max trips."""
    trips = pd.read_parquet(city.trips)
    off = trips[trips.origin != trips.destination]
    od = off.groupby(["origin", "destination"]).size().rename("count").reset_index()
    hour = trips.start_time.dt.tz_convert("UTC").dt.hour
    counts = trips.assign(hour=hour).groupby(["origin", "hour"]).size()
    points = pd.read_parquet(city.points).sort_values(["uid", "tid", "datetime"])
    ends = points.groupby(["uid", "tid"]).agg(
        t0=("datetime", "first"),
        t1=("datetime", "last"),
        lat0=("lat", "first"),
        lat1=("lat", "last"),
        lng0=("lng", "first"),
        lng1=("lng", "last"),
    )
    minutes = (ends.t1 - ends.t0).dt.total_seconds() / 60
    km = haversine_km(ends.lat0, ends.lng0, ends.lat1, ends.lng1)
    per_user = trips.groupby("uid").size()
    return {
        "od": od,
        "counts": counts.rename("count").reset_index(),
        "quartiles": {
            "travel_time": um.quartiles_of(minutes.to_numpy()),
            "jump_length": um.quartiles_of(km),
            "trips_per_user": um.quartiles_of(per_user.to_numpy()),
        },
        "max_trips": int(per_user.max()),
    }


def haversine_km(lat0: Any, lng0: Any, lat1: Any, lng1: Any) -> np.ndarray:
    p0, p1 = np.radians(np.asarray(lat0)), np.radians(np.asarray(lat1))
    dlng = np.radians(np.asarray(lng1) - np.asarray(lng0))
    a = np.sin((p1 - p0) / 2) ** 2 + np.cos(p0) * np.cos(p1) * np.sin(dlng / 2) ** 2
    return 2 * 6371.0088 * np.arcsin(np.sqrt(a))


def period(cfg: CityConfig | RealConfig) -> pm.Period:
    start = pd.Timestamp(cfg.start)
    return pm.Period(str(start.date()), str((start + pd.Timedelta(days=cfg.days)).date()))


# -- the real data ------------------------------------------------------------------------------
GOWALLA = SHARED / "gowalla_nyc" / "gowalla_nyc_events.csv.gz"


@dataclass(frozen=True)
class RealConfig:
    """The real part's public period (fixed before reading: 104 weeks from Monday 2008-12-29;
    the check-ins run from April 2009 to October 2010) in the shape :func:`period` reads. At
    most 732 days, so privmob bins trips over time by week, from Mondays as DPMR does: the two
    tools' bins are the same weeks."""

    start: str = "2008-12-29"
    days: int = 728


def write_gowalla(
    folder: Path, events: Path = GOWALLA, zones: Path = TAXI_ZONES, users: int | None = None
) -> CityFiles:
    """The Gowalla NYC check-ins (../shared/data/gowalla_nyc) as the city's two files: each pair
    of consecutive same-day check-ins of a user is a trip (``trip_points_from_checkins``, as
    tests/releases/test_report_gowalla.py), kept when both ends fall inside a taxi zone (a
    public filter, like the source's bounding box), as one row with its zones (``od``,
    ``counts``) and as two trip points (report, population). ``users``: only the first that
    many user ids (a slice for tests)."""
    import geopandas as gpd

    from privmob.releases.report import trip_points_from_checkins

    ev = pd.read_csv(events, sep="\t", header=None, names=["uid", "datetime", "lat", "lng", "loc"])
    if users is not None:
        ev = ev[ev.uid.isin(np.sort(ev.uid.unique())[:users])]
    points = trip_points_from_checkins(ev)
    tess = gpd.read_file(zones)[["LocationID", "geometry"]]
    where = gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points.lng, points.lat), crs=4326)
    tile = gpd.sjoin(where, tess.to_crs(4326), how="left", predicate="within")
    tile = tile[~tile.index.duplicated()].LocationID  # a point on a shared edge: its first zone
    points = points.assign(zone=tile.reindex(points.index))
    inside = points.groupby("tid").zone.transform(lambda z: z.notna().all())
    points = points[inside].sort_values(["uid", "tid", "datetime"], kind="stable")
    points["tid"] = pd.factorize(points.tid)[0].astype("int64")
    points["datetime"] = points.datetime.dt.tz_localize("UTC")
    ends = points.groupby("tid", sort=False).agg(
        uid=("uid", "first"),
        start_time=("datetime", "first"),
        end_time=("datetime", "last"),
        origin=("zone", "first"),
        destination=("zone", "last"),
    )
    trips = ends.reset_index()[["uid", "tid", "start_time", "end_time", "origin", "destination"]]
    trips = trips.astype({"origin": "int64", "destination": "int64"})
    folder.mkdir(parents=True, exist_ok=True)
    files = CityFiles(
        folder / "trips.parquet", folder / "trip_points.parquet", len(trips), trips.uid.nunique()
    )
    trips.to_parquet(files.trips, index=False)
    points.drop(columns="zone").to_parquet(files.points, index=False)
    return files


# -- privmob's releases ------------------------------------------------------------------------
def session(path: Path, seed: int, delta: float = 0.0) -> pm.Session:
    budget = pm.ApproxDP(1e12, 0.5) if delta else pm.PureDP(1e12)
    return pm.Session(str(path), tessellation=str(TAXI_ZONES), budget=budget, seed=seed)


def od_rows(est: pd.DataFrame, truth: pd.DataFrame, key: tuple[str, str], value: str) -> Row:
    """TV, top-50 recall and large-flow error over the ordered pairs of distinct zones."""
    o, d = key
    est = est[(est[o].astype(str) != "outliers") & (est[o].astype(str) != est[d].astype(str))]
    e = est.assign(origin=est[o].astype(int), destination=est[d].astype(int))
    t, x = um.aligned(truth, e.rename(columns={value: "count"}), ["origin", "destination"], "count")
    mre, n_large = um.large_cell_error(t, x)
    borough = boroughs()
    pairs = (
        t.index.get_level_values(0).map(borough) + " -> " + t.index.get_level_values(1).map(borough)
    )
    return {
        "tv": um.tv_distance(t, x),
        "top50_recall": um.top_k_recall(t, x),
        "large_rel_err": mre,
        "large_cells": n_large,
        "borough_tv": um.grouped_tv(t, x, pairs),
    }


def hierarchy_row(
    trips: pm.Session, eps: float, max_trips: int, weights: str, truth: pd.DataFrame
) -> Row:
    """``od`` with ``hierarchy="borough"`` (issue 40 item 5): ``weights`` ``default`` or
    ``borough=1,tile=4``. The zone measures of the consistent zone table, the borough TV of its
    own borough table (equal to the zone cells' sums: the levels are consistent), and the
    share of the published top 50 zone flows whose true count lies within their margin."""
    given = (
        None
        if weights == "default"
        else dict((k, float(v)) for k, v in (w.split("=") for w in weights.split(",")))
    )
    rel = trips.od(epsilon=eps, max_trips=max_trips, hierarchy="borough", hierarchy_weights=given)
    row = od_rows(rel.tables["od"], truth, ("origin", "destination"), "count")
    b = rel.tables["od_borough"].rename(columns={"count": "est"})
    borough = boroughs()
    t = (
        truth.assign(origin=truth.origin.map(borough), destination=truth.destination.map(borough))
        .groupby(["origin", "destination"])["count"]
        .sum()
    )
    t = t.reindex(pd.MultiIndex.from_frame(b[["origin", "destination"]]), fill_value=0)
    row["borough_tv"] = um.tv_distance(t.to_numpy(), b["est"].to_numpy())
    top = rel.top_flows(um.TOP_K)
    true = truth.set_index(["origin", "destination"])["count"]
    at = true.reindex(pd.MultiIndex.from_frame(top[["origin", "destination"]].astype(int)))
    row["top50_covered"] = float(
        np.mean(np.abs(top["count"].to_numpy() - at.fillna(0).to_numpy()) <= top["margin_95"])
    )
    shares = {lv["level"]: lv["share"] for lv in rel.release.params["hierarchy"]["levels"]}
    label = ", ".join(f"{k} {v:g}" for k, v in shares.items())
    ls = rel.tables["od"].drop(columns="count").rename(columns={"least_squares": "count"})
    ls_row = od_rows(ls, truth, ("origin", "destination"), "count")
    unclamped = {f"{k}_least_squares": ls_row[k] for k in ("tv", "top50_recall", "large_rel_err")}
    return {"release": "od", "analysis": f"od + borough level ({label})"} | row | unclamped


@cache
def boroughs() -> dict[int, str]:
    """Taxi zone id -> borough (a public property of the tessellation)."""
    zones = json.loads(TAXI_ZONES.read_text())["features"]
    return {f["properties"]["LocationID"]: f["properties"]["borough"] for f in zones}


def vector_rows(t: pd.Series, x: pd.Series) -> Row:
    mre, n_large = um.large_cell_error(t, x)
    return {"tv": um.tv_distance(t, x), "large_rel_err": mre, "large_cells": n_large}


def report_analyses(rel: pm.ReleaseResult) -> dict[str, Any]:
    return dict(rel.release.metadata()["analyses"])


def five_quartiles(doc: dict[str, Any]) -> dict[str, float]:
    five = doc["five_number_summary"]
    return {"q1": five["q25"], "median": five["median"], "q3": five["q75"]}


def score_report(
    rel: pm.ReleaseResult, truth_rel: pm.ReleaseResult, raw: dict[str, Any]
) -> dict[str, Row]:
    """Every analysis of a privmob report against the exact report and the raw quartiles."""
    est, tru = rel.tables, truth_rel.tables
    docs, true_docs = report_analyses(rel), report_analyses(truth_rel)
    out: dict[str, Row] = {}
    stats_t = tru["dataset_statistics"].set_index("statistic")["value"]
    stats_e = est["dataset_statistics"].set_index("statistic")["value"]
    errs = um.relative_errors(
        {k: float(stats_t[k]) for k in ("users", "trips")},
        {k: float(stats_e[k]) for k in ("users", "trips")},
    )
    out["dataset_statistics"] = {f"{k}_rel_err": v for k, v in errs.items()}
    for name, (keys, value) in COUNT_ANALYSES.items():
        t_tab, e_tab = (x.fillna({k: "" for k in keys}) for x in (tru[name], est[name]))
        out[name] = vector_rows(*um.aligned(t_tab, e_tab, keys, value))
    out["od_flows"] = od_rows(est["od_flows"], raw["od"], ("origin", "destination"), "trips")
    for name in DISTRIBUTIONS:
        row: Row = {"tv": um.tv_distance(*um.folded_histogram(tru[name], est[name]))}
        true_q = raw["quartiles"].get(name) or five_quartiles(true_docs[name])
        row |= quartile_row(true_q, five_quartiles(docs[name]))
        row["quartile_truth"] = "raw" if name in RAW_QUARTILES else "exact report"
        out[name] = row
    return out


def quartile_row(truth: dict[str, float], estimate: dict[str, float]) -> Row:
    errs = um.relative_errors(truth, estimate)
    return {
        "median_rel_err": errs["median"],
        "quartile_rel_err": float(np.nanmean(list(errs.values()))),
    }


def bound_variants(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """The bounds of od and counts (issue 40 item 4): the fixed M, and with ``--bounds``
    chosen privately (``auto``: the DP ``--bound-quantile`` of trips per user, 10% of epsilon)
    and rescaled (``auto+rescale``: 5% more for the noisy kept and cut totals)."""
    out: list[tuple[str, dict[str, Any]]] = []
    q = getattr(args, "bound_quantile", 0.9)
    for b in getattr(args, "bounds", ["fixed"]):
        if b == "fixed":
            out.append(("", {"bound": args.max_trips}))
        elif b == "auto":
            out.append((f" (T auto q{q:g})", {"bound": "auto", "bound_quantile": q}))
        else:
            extra = {"bound_quantile": q, "rescale": True}
            out.append((f" (T auto q{q:g}, rescaled)", {"bound": "auto", **extra}))
    return out


def bound_keywords(variant: dict[str, Any], name: str) -> dict[str, Any]:
    """A variant of :func:`bound_variants` as the keywords of od (``max_trips``) or counts
    (``max_records``)."""
    rest = {k: v for k, v in variant.items() if k != "bound"}
    return {name: variant["bound"], **rest}


def privmob_runs(
    city: CityFiles, cfg: CityConfig | RealConfig, raw: dict[str, Any], args: argparse.Namespace
) -> list[Row]:
    rows: list[Row] = []
    points = session(city.points, seed=7)
    truth_report = points.report(
        epsilon=TRUTH_EPSILON, max_trips=raw["max_trips"], period=period(cfg)
    )
    truth_pop = points.population(epsilon=TRUTH_EPSILON).to_pandas()
    points.close()
    for rep in range(args.repetitions):
        trips, points = session(city.trips, seed=100 + rep), session(city.points, seed=200 + rep)
        for eps in args.epsilons:
            t0 = time.perf_counter()
            base = {"tool": "privmob", "epsilon": eps, "repetition": rep}
            for suffix, bound in bound_variants(args):
                od = trips.od(epsilon=eps, **bound_keywords(bound, "max_trips")).to_pandas()
                rows.append(
                    base
                    | {"release": "od", "analysis": "od" + suffix}
                    | od_rows(od, raw["od"], ("origin", "destination"), "count")
                )
                counts = trips.counts(
                    epsilon=eps, by=["origin", "hour"], **bound_keywords(bound, "max_records")
                )
                t, x = um.aligned(raw["counts"], counts.to_pandas(), ["origin", "hour"], "count")
                rows.append(
                    base
                    | {"release": "counts", "analysis": "origin x hour" + suffix}
                    | vector_rows(t, x)
                )
            for weights in args.od_hierarchy:
                rows.append(base | hierarchy_row(trips, eps, args.max_trips, weights, raw["od"]))
            pop = points.population(epsilon=eps).to_pandas()
            t, x = um.aligned(truth_pop, pop, ["zone"], "count")
            rows.append(base | {"release": "population", "analysis": "homes"} | vector_rows(t, x))
            rel = points.report(epsilon=eps, max_trips=args.max_trips, period=period(cfg))
            for name, row in score_report(rel, truth_report, raw).items():
                rows.append(base | {"release": "report", "analysis": name} | row)
            for weights in getattr(args, "report_hierarchy", []):  # od_flows over boroughs
                given = (
                    None
                    if weights == "default"
                    else {k: float(v) for k, v in (w.split("=") for w in weights.split(","))}
                )
                rel = points.report(
                    epsilon=eps, max_trips=args.max_trips, period=period(cfg),
                    hierarchy="borough", hierarchy_weights=given,
                )  # fmt: skip
                tool = {"tool": f"privmob --hierarchy borough ({weights})"}
                for name, row in score_report(rel, truth_report, raw).items():
                    rows.append(base | tool | {"release": "report", "analysis": name} | row)
            chosen = {
                "per_user": pm.PerUser("auto", "trips"),
                "bound_quantile": args.bound_quantile,
            }
            if getattr(args, "report_auto", False):  # M chosen privately (item 4)
                rel = points.report(epsilon=eps, period=period(cfg), **chosen)
                tool = {"tool": "privmob -T auto"}
                for name, row in score_report(rel, truth_report, raw).items():
                    rows.append(base | tool | {"release": "report", "analysis": name} | row)
            for delta in getattr(args, "report_deltas", []):  # zCDP composition (item 2)
                if getattr(args, "report_auto", False):
                    z = session(city.points, seed=400 + rep, delta=delta)
                    rel = z.report(epsilon=eps, period=period(cfg), delta=delta, **chosen)
                    z.close()
                    tool = {"tool": f"privmob zCDP δ={delta:g}, -T auto"}
                    for name, row in score_report(rel, truth_report, raw).items():
                        rows.append(base | tool | {"release": "report", "analysis": name} | row)
                for cap in [None, *getattr(args, "report_od_cell_caps", [])]:
                    z = session(city.points, seed=300 + rep, delta=delta)
                    rel = z.report(
                        epsilon=eps, max_trips=args.max_trips, period=period(cfg), delta=delta,
                        **({} if cap is None else {"od_cell_cap": cap}),
                    )  # fmt: skip
                    z.close()
                    capped = "" if cap is None else f", OD cell cap {cap}"
                    tool = {"tool": f"privmob zCDP δ={delta:g}{capped}"}
                    for name, row in score_report(rel, truth_report, raw).items():
                        rows.append(base | tool | {"release": "report", "analysis": name} | row)
            print(
                f"privmob epsilon={eps} repetition {rep}: {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
        trips.close()
        points.close()
    return rows


# -- dp_mobility_report ------------------------------------------------------------------------
DPMR_CHILD = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import geopandas as gpd, pandas as pd
from dp_mobility_report import DpMobilityReport
data, tess_path, m, out, *epsilons = sys.argv[1:]
df = pd.read_parquet(data)
df["datetime"] = pd.to_datetime(df["datetime"], utc=True).dt.tz_localize(None)
tess = gpd.read_file(tess_path).rename(columns={"LocationID": "tile_id", "zone": "tile_name"})
tess["tile_id"] = tess["tile_id"].astype(str)
runs, t0 = {}, time.perf_counter()
for eps in epsilons:
    rep = DpMobilityReport(df, tess, privacy_budget=float(eps), user_privacy=True,
                           max_trips_per_user=int(m), disable_progress_bar=True).report
    stats = rep["ds_statistics"].data
    tot = rep["trips_over_time"].data
    hours = rep["trips_per_hour"].data
    vtt = rep["visits_per_time_tile"].data.stack([0, 1]).rename("visits").reset_index()
    q = {n: rep[n].quartiles for n in ("travel_time", "jump_length", "trips_per_user")}
    runs[eps] = {
        "users": float(stats["n_users"]), "trips": float(stats["n_trips"]),
        "trips_over_time": dict(zip(tot["datetime"].astype(str).str[:10], tot["trip_count"])),
        "trips_per_weekday": rep["trips_per_weekday"].data.to_dict(),
        "trips_per_hour": [[c, int(h), p] for h, c, p in hours[["hour", "time category", "perc"]]
                           .itertuples(index=False)],
        "visits_per_tile": dict(zip(rep["visits_per_tile"].data["tile_id"],
                                    rep["visits_per_tile"].data["visits"])),
        "visits_per_time_tile": vtt.astype(str).values.tolist(),
        "od_flows": rep["od_flows"].data[["origin", "destination", "flow"]].values.tolist(),
        "quartiles": {n: {"q1": float(v["25%"]), "median": float(v["50%"]),
                          "q3": float(v["75%"])} for n, v in q.items()},
    }
json.dump(runs, open(out, "w"), default=float)
print(json.dumps({"wall_s": time.perf_counter() - t0}))
"""


def dpmr_runs(
    city: CityFiles,
    truth_report: dict[str, pd.DataFrame],
    raw: dict[str, Any],
    args: argparse.Namespace,
) -> list[Row]:
    """DPMR at ``--dpmr-epsilons`` on the same trip points, scored against the same truth."""
    python = install_dpmr()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repetitions):
            out = Path(tmp) / f"dpmr{rep}.json"
            eps_args = [str(e) for e in args.dpmr_epsilons]
            res = run(
                str(python),
                DPMR_CHILD,
                str(city.points),
                str(TAXI_ZONES),
                str(args.max_trips),
                str(out),
                *eps_args,
                timeout=3600,
            )
            print(f"DPMR repetition {rep}: {res['wall_s']:.1f}s", flush=True)
            for eps, doc in json.loads(out.read_text()).items():
                base = {"tool": "DPMR", "epsilon": float(eps), "repetition": rep}
                for name, row in score_dpmr(doc, truth_report, raw).items():
                    rows.append(base | {"release": "report", "analysis": name} | row)
    return rows


def score_dpmr(
    doc: dict[str, Any], tru: dict[str, pd.DataFrame], raw: dict[str, Any]
) -> dict[str, Row]:
    """DPMR's analyses that count the same things as privmob's, against privmob's truth."""
    stats = tru["dataset_statistics"].set_index("statistic")["value"]
    errs = um.relative_errors(
        {k: float(stats[k]) for k in ("users", "trips")}, {k: doc[k] for k in ("users", "trips")}
    )
    out: dict[str, Row] = {"dataset_statistics": {f"{k}_rel_err": v for k, v in errs.items()}}

    def keyed(name: str, keys: list[str], value: str, est: pd.DataFrame) -> Row:
        t_tab = tru[name].fillna({k: "" for k in keys})
        t_tab = t_tab[t_tab[keys[0]].astype(str) != "outliers"]
        t_tab = t_tab[~t_tab[keys[0]].astype(str).str.startswith("outside")]
        row = vector_rows(*um.aligned(t_tab, est.rename(columns={"v": value}), keys, value))
        # DPMR publishes weekdays and hours as percentages: only their shares compare
        return {"tv": row["tv"]} if name in ("trips_per_weekday", "trips_per_hour") else row

    days = doc["trips_over_time"]
    out["trips_over_time"] = keyed(
        "trips_over_time",
        ["bin_start"],
        "trips",
        pd.DataFrame({"bin_start": list(days), "v": list(days.values())}),
    )
    wd = doc["trips_per_weekday"]
    out["trips_per_weekday"] = keyed(
        "trips_per_weekday",
        ["weekday"],
        "trips",
        pd.DataFrame({"weekday": list(wd), "v": list(wd.values())}),
    )
    hours = pd.DataFrame(doc["trips_per_hour"], columns=["category", "hour", "v"])
    hours[["day_type", "end"]] = hours.category.str.split(" ", expand=True)
    out["trips_per_hour"] = keyed("trips_per_hour", ["end", "day_type", "hour"], "trips", hours)
    tiles = doc["visits_per_tile"]
    out["visits_per_tile"] = keyed(
        "visits_per_tile",
        ["tile_id"],
        "visits",
        pd.DataFrame({"tile_id": list(tiles), "v": list(tiles.values())}),
    )
    vtt = pd.DataFrame(doc["visits_per_time_tile"], columns=["tile_id", "day_type", "w", "v"])
    vtt["time_window"] = vtt.w.map(window_label)
    vtt["v"] = vtt.v.astype(float)
    out["visits_per_time_tile"] = keyed(
        "visits_per_time_tile", ["tile_id", "day_type", "time_window"], "visits", vtt
    )
    od = pd.DataFrame(doc["od_flows"], columns=["origin", "destination", "trips"])
    out["od_flows"] = od_rows(od, raw["od"], ("origin", "destination"), "trips")
    for name, q in doc["quartiles"].items():
        out[name] = quartile_row(raw["quartiles"][name], q)
    return out


def window_label(dpmr: str) -> str:
    """DPMR's time window ``"1: 2-6"`` as privmob's ``"02-06"``."""
    lo, hi = dpmr.split(": ")[1].split("-")
    return f"{int(lo):02d}-{int(hi):02d}"


# -- item 6: the density scheme against per-cell Laplace ---------------------------------------
#: seed 004's settings: l = 30 visits per user and week; EFPAG with delta 2e-6
DENSITY_METHODS: dict[str, dict[str, Any]] = {
    "EFPAG": {"delta": 2e-6},
    "EFPA": {},
    "LPA (per-cell Laplace)": {"method": "lpa"},
}


def density_files(folder: Path, args: argparse.Namespace) -> tuple[dict[str, Path], str]:
    """privmob's synthetic phone-record city (privmob.data.density_synth) written as files."""
    from privmob.data.density_synth import synthetic_city

    city = synthetic_city(
        args.density_users,
        args.density_towers,
        args.density_grid,
        seed=1,
        commute_spread_h=args.density_commute_spread,
    )
    files = {n: folder / n for n in ("events.parquet", "cells.csv", "zones.geojson")}
    events = city.events.rename(columns={"time": "datetime"})[["uid", "datetime", "cell_id"]]
    events.to_parquet(files["events.parquet"])
    city.towers.to_csv(files["cells.csv"], index=False)
    city.zones.to_file(files["zones.geojson"])
    return files, str(pd.Timestamp(city.week_start).date())


def zone_hours(rel: pm.ReleaseResult) -> np.ndarray:
    table = rel.tables["density"].pivot(index="zone", columns="hour", values="count")
    return table.sort_index().to_numpy(dtype=np.float64)


def density_rows(
    args: argparse.Namespace,
) -> tuple[list[Row], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The scheme (EFPAG, EFPA) and LPA at seed 004's settings through ``Session.density``,
    against the exact hourly counts (LPA at epsilon 1e9 with l = 168: nothing cut, no noise).
    Returns the rows (MRE and Pearson of each zone's 168 hours, averaged over zones, as the
    paper), each method's relative error by hour of the week averaged over zones (the paper's
    Figure 9a) and its Pearson correlation over zones at each hour (the spatial one)."""
    rows: list[Row] = []
    by_hour: dict[str, list[np.ndarray]] = {}
    pc_by_hour: dict[str, list[np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        files, week = density_files(Path(tmp), args)

        def open_session(seed: int) -> pm.Session:
            return pm.Session(
                str(files["events.parquet"]),
                tessellation=str(files["zones.geojson"]),
                tile_id="zone_id",
                cells=str(files["cells.csv"]),
                budget=pm.ApproxDP(1e12, 0.5),
                dataset="density-city",
                seed=seed,
            )

        with open_session(7) as s:
            exact = s.density(epsilon=TRUTH_EPSILON, method="lpa", max_visits=168, week=week)
        truth = zone_hours(exact)
        for rep in range(args.repetitions):
            with open_session(300 + rep) as s:
                for eps in args.density_epsilons:
                    for name, options in DENSITY_METHODS.items():
                        if options.get("delta") and eps / 4 >= 1:
                            continue  # EFPAG's Gaussian step needs epsilon / 4 < 1
                        rel = s.density(epsilon=eps, max_visits=30, week=week, **options)
                        est = zone_hours(rel)
                        errors = um.density_relative_errors(truth, est)
                        if eps == args.density_epsilons[0]:
                            by_hour.setdefault(name, []).append(errors.mean(axis=0))
                            pc_by_hour.setdefault(name, []).append(pearson(truth.T, est.T))
                        rows.append(
                            {
                                "tool": "privmob",
                                "release": "density",
                                "analysis": name,
                                "epsilon": eps,
                                "repetition": rep,
                                "mre": float(errors.mean()),
                                "pearson": float(np.nanmean(pearson(truth, est))),
                                "clusters": (rel.metadata.params.get("signal") or {}).get(
                                    "clusters"
                                ),
                            }
                        )
        print(
            f"density: {truth.shape[0]} zones, mean true count per zone-hour "
            f"{truth.mean():.1f} ({time.perf_counter() - t0:.1f}s)",
            flush=True,
        )
    mean = {name: np.mean(v, axis=0) for name, v in by_hour.items()}
    return rows, mean, {name: np.mean(v, axis=0) for name, v in pc_by_hour.items()}


def density_hour_table(by_hour: dict[str, np.ndarray], pc_by_hour: dict[str, np.ndarray]) -> str:
    """MRE (relative error averaged over zones) and spatial Pearson by hour of the day, each
    the mean over the week's 7 days and over 4-hour blocks, and over the whole week."""
    names = list(by_hour)
    head = " | ".join(f"{n} MRE / PC" for n in names)
    lines = [f"| hours | {head} |", "|---|" + "---:|" * len(names)]
    blocks = [(h, h + 4) for h in range(0, 24, 4)] + [(0, 24)]
    for lo, hi in blocks:
        hours = np.array([d * 24 + h for d in range(7) for h in range(lo, hi)])
        cells = [
            f"{by_hour[n][hours].mean():.3f} / {np.nanmean(pc_by_hour[n][hours]):.3f}"
            for n in names
        ]
        label = "whole week" if (lo, hi) == (0, 24) else f"{lo:02d}-{hi:02d}"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_density(by_hour: dict[str, np.ndarray], path: Path, epsilon: float) -> Path:
    """Relative error by hour of the week, averaged over zones (seed 004's Figure 9a)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 3.8))
    for name, errors in by_hour.items():
        ax.plot(np.arange(len(errors)), errors, label=f"{name} (mean {errors.mean():.2f})")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(0, 168, 24), ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"])
    ax.set_xlabel("hour of the week")
    ax.set_ylabel("relative error, mean over zones")
    ax.set_title(f"density at epsilon {epsilon:g}, l = 30: the scheme against per-cell Laplace")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- output ------------------------------------------------------------------------------------
MEASURES = (
    "tv",
    "top50_recall",
    "borough_tv",
    "top50_covered",
    "large_rel_err",
    "tv_least_squares",
    "top50_recall_least_squares",
    "large_rel_err_least_squares",
    "median_rel_err",
    "quartile_rel_err",
    "users_rel_err",
    "trips_rel_err",
    "mre",
    "pearson",
    "clusters",
)


def table(rows: list[Row]) -> pd.DataFrame:
    """Mean over repetitions: one row per (release, analysis, measure), one column per
    (tool, epsilon)."""
    df = pd.DataFrame(rows)
    long = df.melt(
        id_vars=["tool", "release", "analysis", "epsilon", "repetition"],
        value_vars=[m for m in MEASURES if m in df],
        var_name="measure",
    ).dropna(subset=["value"])
    long["value"] = long.value.astype(float)
    wide = long.pivot_table(
        index=["release", "analysis", "measure"],
        columns=["tool", "epsilon"],
        values="value",
        aggfunc="mean",
        sort=False,
    )
    return wide


def markdown(wide: pd.DataFrame) -> str:
    cols = [f"{tool} ε={eps:g}" for tool, eps in wide.columns]
    lines = [
        "| release | analysis | measure | " + " | ".join(cols) + " |",
        "|---|---|---|" + "---:|" * len(cols),
    ]
    for (release, analysis, measure), vals in wide.iterrows():
        cells = ["–" if math.isnan(v) else f"{v:.3f}" for v in vals]
        lines.append(f"| {release} | {analysis} | {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(wide: pd.DataFrame, path: Path) -> Path:
    """Error versus epsilon: report TVs, OD measures, quartile errors; DPMR as crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    od_like = ("od", "od_flows")
    panels = [
        ("report: TV of shares", lambda r, a, m: r == "report" and m == "tv" and a in COUNTS),
        ("report: TV of histograms", lambda r, a, m: m == "tv" and a in DISTRIBUTIONS),
        ("report: quartiles' mean relative error", lambda r, a, m: m == "quartile_rel_err"),
        (
            "OD: TV (zones, boroughs) and top-50 recall",
            lambda r, a, m: a in od_like and m != "large_cells" and m != "large_rel_err",
        ),
        (
            "relative error of cells with >= 100 true records",
            lambda r, a, m: m == "large_rel_err" and (a in od_like or r != "report"),
        ),
        ("population (homes): TV", lambda r, a, m: r == "population" and m == "tv"),
    ]
    wide = wide.drop(index="density", level="release", errors="ignore").dropna(axis=1, how="all")
    eps = sorted({e for _, e in wide.columns})
    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    for ax, (title, keep) in zip(axes.flat, panels, strict=True):
        for (release, analysis, measure), vals in wide.iterrows():
            if not keep(release, analysis, measure):
                continue
            label = analysis if "report:" in title else f"{release}: {analysis} {measure}"
            pm_vals = vals.get("privmob")
            if pm_vals is not None and pm_vals.notna().any():
                (line,) = ax.plot(pm_vals.index, pm_vals.to_numpy(), "o-", label=label)
                dp = vals.get("DPMR")
                if dp is not None and dp.notna().any():
                    ax.plot(dp.index, dp.to_numpy(), "x", ms=10, mew=2, color=line.get_color())
        ax.set_xscale("log")
        ax.set_xticks(eps, [f"{e:g}" for e in eps])
        ax.minorticks_off()
        ax.set_xlabel("epsilon (per user)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("privmob (lines) and dp_mobility_report 0.2.11 (crosses): error vs epsilon")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=20_000)
    ap.add_argument("--days", type=int, default=28)
    ap.add_argument("--seed", type=int, default=1, help="the city's seed")
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--max-trips", "-T", type=int, default=10)
    ap.add_argument("--repetitions", "-r", type=int, default=1)
    ap.add_argument(
        "--od-hierarchy",
        nargs="*",
        default=["default", "borough=1,tile=4"],
        help="od with hierarchy='borough': the budget weights of each run (default: the "
        "release's own split); none: no such run",
    )
    ap.add_argument(
        "--bounds",
        nargs="+",
        choices=("fixed", "auto", "auto+rescale"),
        default=["fixed", "auto", "auto+rescale"],
        help="od and counts: the fixed -T, the bound chosen privately, and rescaled too",
    )
    ap.add_argument("--bound-quantile", type=float, default=0.9, help="with auto")
    ap.add_argument(
        "--dpmr-epsilons",
        type=_epsilon_or_none,
        nargs="*",
        default=[1.0],
        help="DPMR's epsilons (none, or the option alone: no DPMR)",
    )
    ap.add_argument(
        "--parts",
        nargs="+",
        choices=("city", "real", "density"),
        default=["city", "density"],
        help="city: item 1 (releases and report, DPMR); real: item 1 on the Gowalla NYC "
        "check-ins of ../shared/data; density: item 6",
    )
    ap.add_argument("--density-users", type=int, default=200_000)
    ap.add_argument("--density-grid", type=int, default=10, help="grid x grid zones")
    ap.add_argument("--density-towers", type=int, default=300)
    ap.add_argument("--density-epsilons", type=float, nargs="*", default=[0.3])
    ap.add_argument(
        "--density-commute-spread",
        type=float,
        default=0.0,
        help="hours: spread of each user's office hours (0: everyone 9:00-18:00)",
    )
    ap.add_argument(
        "--report-deltas",
        type=float,
        nargs="*",
        default=[],
        help="also the report under zCDP composition at these deltas (a tool column each)",
    )
    ap.add_argument(
        "--report-od-cell-caps",
        type=int,
        nargs="*",
        default=[],
        help="with --report-deltas: also each zCDP report with od_cell_cap at these caps",
    )
    ap.add_argument(
        "--report-auto",
        action="store_true",
        help="also the report with -T auto (M chosen privately), pure and at each "
        "--report-deltas (a tool column each)",
    )
    ap.add_argument(
        "--report-hierarchy",
        nargs="*",
        default=[],
        help="also the report with hierarchy='borough' (od_flows' epsilon split between the "
        "zones and their public boroughs, consistent estimates), once per weights given: "
        "default (the release's own split) or e.g. borough=1,tile=1 (a tool column each)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="2,000 users, epsilon 1, no DPMR, no density (< 1 minute)",
    )
    ap.add_argument(
        "--figure",
        type=Path,
        default=None,
        help="the plot (default docs/figures/utility.png; --quick: benchmarks/out)",
    )
    args = ap.parse_args()
    args.od_hierarchy = [w for w in args.od_hierarchy if w != "none"]
    args.dpmr_epsilons = [e for e in args.dpmr_epsilons if e is not None]
    if args.quick:
        args.users, args.epsilons, args.dpmr_epsilons, args.parts = 2_000, [1.0], [], ["city"]
    if args.figure is None:
        args.figure = (OUT if args.quick else FIGURES) / "utility.png"
    return args


def dpmr_beside(
    files: CityFiles, cfg: CityConfig | RealConfig, raw: dict[str, Any], args: argparse.Namespace
) -> list[Row]:
    """DPMR's rows at ``--dpmr-epsilons`` (none when empty), scored against privmob's exact
    report of every trip (its histograms' truth)."""
    if not args.dpmr_epsilons:
        return []
    points = session(files.points, seed=7)
    truth = points.report(
        epsilon=TRUTH_EPSILON, max_trips=raw["max_trips"], period=period(cfg)
    ).tables
    points.close()
    return dpmr_runs(files, truth, raw, args)


def city_part(args: argparse.Namespace) -> tuple[list[Row], str]:
    """Item 1: the city, its truth, privmob's releases and the report, DPMR beside them."""
    cfg = CityConfig(users=args.users, days=args.days, seed=args.seed)
    t0 = time.perf_counter()
    city = write_city(OUT / f"utility_city_{cfg.users}_{cfg.days}_{cfg.seed}", cfg)
    raw = raw_truth(city)
    print(
        f"city: {city.n_users:,} users, {city.n_trips:,} trips, busiest user "
        f"{raw['max_trips']} trips ({time.perf_counter() - t0:.1f}s)",
        flush=True,
    )
    rows = privmob_runs(city, cfg, raw, args) + dpmr_beside(city, cfg, raw, args)
    about = f"{city.n_users:,} users, {city.n_trips:,} trips, {cfg.days} days, M = {args.max_trips}"
    return rows, about


def real_part(
    args: argparse.Namespace, users: int | None = None, out: Path = OUT
) -> tuple[list[Row], str]:
    """Item 1 on real data: the Gowalla NYC check-ins over the 263 taxi zones (see
    :func:`write_gowalla`), the same truth (every trip, unbounded, no noise), the same releases
    and report at the same epsilons, DPMR beside them; releases labelled ``gowalla <release>``."""
    cfg = RealConfig()
    t0 = time.perf_counter()
    name = "utility_gowalla" + (f"_{users}" if users else "")
    files = write_gowalla(out / name, users=users)
    raw = raw_truth(files)
    print(
        f"gowalla: {files.n_users:,} users, {files.n_trips:,} trips, busiest user "
        f"{raw['max_trips']} trips ({time.perf_counter() - t0:.1f}s)",
        flush=True,
    )
    rows = privmob_runs(files, cfg, raw, args) + dpmr_beside(files, cfg, raw, args)
    for row in rows:
        row["release"] = f"gowalla {row['release']}"
    about = (
        f"Gowalla NYC: {files.n_users:,} users, {files.n_trips:,} trips inside the taxi zones, "
        f"M = {args.max_trips}"
    )
    return rows, about


def _epsilon_or_none(text: str) -> float | None:
    """An epsilon, or ``none`` (dropped: ``--dpmr-epsilons none`` runs no DPMR)."""
    return None if text.lower() == "none" else float(text)


def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    rows: list[Row] = []
    about, plots = [], []
    if "city" in args.parts:
        city_rows, city_about = city_part(args)
        rows += city_rows
        about.append(city_about)
    if "real" in args.parts:
        real_rows, real_about = real_part(args)
        rows += real_rows
        about.append(real_about)
    if "density" in args.parts:
        density, by_hour, pc_by_hour = density_rows(args)
        rows += density
        about.append(f"density city of {args.density_users:,} users")
        path = args.figure.with_name(args.figure.stem + "-density.png")
        plots.append(plot_density(by_hour, path, args.density_epsilons[0]))
        print(f"\ndensity by hour of the day, epsilon {args.density_epsilons[0]:g}:")
        print(density_hour_table(by_hour, pc_by_hour), flush=True)
    wide = table(rows)
    if "city" in args.parts:
        plots.append(plot(wide, args.figure))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\nRun of {stamp}: {'; '.join(about)}; mean of {args.repetitions} repetition(s)\n")
    print(markdown(wide))
    OUT.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(OUT / "utility_rows.csv", index=False)
    print(f"\nrows: {OUT / 'utility_rows.csv'}; plots: {', '.join(map(str, plots))}")
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
