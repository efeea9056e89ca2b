"""The releases of the benchmark suite (benchmarks/run.py): input, floor, privmob run.

For every release there are three pieces, all on the same synthetic file:

* ``data``: the input kind (``events`` + cells table, one-row ``trips``, trip ``points``);
* the **floor**: a bare SQL query written by hand doing the same bounded work as the
  release (same bounding rule, same group-by, same tile assignment) and nothing else: no
  validation, no dense public domain, no noise, no ledger, no output files. One text for
  both engines (the dialect's keyed hash and epoch seconds): on DuckDB in its own process, on
  Spark in the same session as the privmob run;
* the **privmob** run: the release through its Python API (validation, tiles, bounding, dense
  counts, secure noise, ledger charge, output files), on DuckDB or Spark local.

What each floor computes (``FLOORS`` below):

* od-trips: T trips per user (keyed hash), GROUP BY origin, destination;
* od-daily-events: tiles of the cells, consecutive-event trips (LEAD), T trips per user,
  GROUP BY day, origin, destination;
* population: the most frequent night tile per user (20:00-06:00, ties to the smaller tile),
  users without a night event as "unknown", GROUP BY home cell;
* series-counts: hourly bins over the 28 days (+ one out-of-period bin), at most 1 event per
  user and bin (keyed hash), GROUP BY tile, bin;
* density: the pre-sampling (one tower per user and hour by keyed hash, at most l = 30 hourly
  visits per user and week by keyed hash), GROUP BY tower, hour; and the out-of-domain cell
  (SPEC 1: nothing is dropped), the hourly visits outside the week, at most l per user. privmob
  also counts the one-visit totals and the number of visits (on DuckDB two small queries over
  the materialised visits, on Spark in the same pass as the sampled cells): they are not in the
  floor;
* report: the floor is the bounded trips table (trip ends per (uid, tid), M trips per user by
  keyed hash) and three of the report's count group-bys over it: OD flows, visits per tile and
  trips per day. The report runs 16 count vectors (histograms, per-user statistics with a
  radius of gyration, ...): this floor is a lower bound on its relational work, not all of it;
* report-complete: the same report run, against the floor of its whole relational work
  (:func:`floor_report_complete`): the bounded trips with their end coordinates, the trip
  ends, the per-user table and all 16 count vectors.

A floor that reads a CSV in two queries (coordinate trips, the report) loads it once into a
table first (:func:`_scan`): the faster way for a bare DuckDB script. On DuckDB the floors of
od-trips and the report order a user's trips by (keyed hash, trip id), as privmob bounds
(:func:`_by_trip`): faster there than the hash alone.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

T = 10  # trips per user (OD, report)
DAYS = 28
START, END = "2024-01-01", f"2024-01-{DAYS + 1:02d}"
WEEK_END = "2024-01-08"  # density: the released week, from START
L_VISITS = 30  # density: hourly visits per user and week
EPSILON = 1.0
KEY = 12345  # floors: a fixed key (the bounding cost does not depend on it)

RELEASES = (
    "od-daily-events",
    "od-trips",
    "population",
    "series-counts",
    "density",
    "report",
    "report-complete",  # the report again, against floor_report_complete
)
DATA = {
    "od-daily-events": "events",
    "od-trips": "trips",
    "population": "events",
    "series-counts": "events",
    "density": "events",
    "report": "points",
    "report-complete": "points",
}
SPARK = set(RELEASES)  # every release runs on Spark through the Python API
#: The real polygons of the suite's taxi-zone runs (``--tessellation taxi-zones``).
TAXI_ZONES = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nyc_taxi_zones"
TAXI_ZONES = TAXI_ZONES / "taxi_zones.geojson"
#: The real San Francisco neighbourhoods (117 polygons; ``--tessellation sf-neighbourhoods``).
SF_NEIGHBOURHOODS = TAXI_ZONES.parents[1] / "sf_neighborhoods" / "sf_neighborhoods.geojson"
#: Every polygon tessellation the suite can run on: its file (None: generated in the output
#: folder by :func:`polygon_file`) and the prefix of the inputs drawn inside it.
POLYGONS: dict[str, tuple[Path | None, str]] = {
    "taxi-zones": (TAXI_ZONES, "taxi_"),
    "sf-neighbourhoods": (SF_NEIGHBOURHOODS, "sf_"),
    "voronoi-2000": (None, "voronoi2000_"),
}
TESSELLATIONS = ("grid", *POLYGONS)


def polygon_file(name: str, out: Path) -> Path:
    """The polygon file of tessellation ``name`` (:data:`POLYGONS`); ``voronoi-2000`` is 2,000
    irregular Voronoi cells over New York's bounding box (seeded points), written once."""
    path, _ = POLYGONS[name]
    if path is not None:
        if not path.exists():
            raise SystemExit(f"{path} not found (the {name} benchmarks need it)")
        return path
    path = out / "voronoi2000.geojson"
    if not path.exists():
        import geopandas as gpd
        import numpy as np
        import shapely

        rng = np.random.default_rng(0)
        lo, hi = np.array([-74.26, 40.49]), np.array([-73.70, 40.92])
        xy = lo + rng.random((2000, 2)) * (hi - lo)
        frame = shapely.box(*lo, *hi)
        cells = shapely.voronoi_polygons(shapely.multipoints(xy), extend_to=frame)
        polygons = [shapely.intersection(c, frame) for c in shapely.get_parts(cells)]
        gdf = gpd.GeoDataFrame({"tile_id": range(len(polygons))}, geometry=polygons, crs=4326)
        gdf.to_file(path, driver="GeoJSON")
    return path


# -- data ---------------------------------------------------------------------------------------


def data_for(
    release: str, n: int, out: Path, tessellation: str = "grid", fmt: str = "parquet"
) -> tuple[Path, Path | None, Path]:
    """Synthetic input with about ``n`` records (rows), cached in ``out``.

    ``tessellation``: ``grid`` (263 square cells over New York, tile ids in the trips) or one of
    :data:`POLYGONS` (the 263 NYC taxi-zone polygons, the SF neighbourhoods, 2,000 Voronoi
    cells; the places drawn inside them; one-row trips carry coordinates only, so every release
    assigns tiles by point in polygon). ``fmt``:
    ``parquet`` or ``csv`` (the main input written as CSV; a cells table stays Parquet).

    Trips and trip points of 1B rows and more are the 100M file repeated with disjoint user ids
    (:func:`replicate`): generating them from scratch takes hours on two cores, and a copy has
    the same per-user shape. The 1B events file is generated in full.
    """
    from privmob.data.synth import default_tessellation, synth_events, synth_trips

    out.mkdir(exist_ok=True)
    if tessellation in POLYGONS:
        tess_path, prefix = polygon_file(tessellation, out), POLYGONS[tessellation][1]
    else:
        tess_path, prefix = out / "grid263.geojson", ""
        if not tess_path.exists():
            default_tessellation(263).gdf.to_file(tess_path, driver="GeoJSON")
    t0 = time.perf_counter()
    kind = DATA[release]
    cells = None
    base = REPLICATE_FROM if kind != "events" and n > REPLICATE_FROM else 0
    path = out / (prefix + FILE_NAMES.get(kind, "events_{n}.parquet").format(n=n))
    if base and n % base == 0:
        if not path.exists():
            source, _, _ = data_for(release, base, out, tessellation)
            replicate(source, path, n // base)
    elif kind == "trips":
        if not path.exists():
            tess = default_tessellation(263) if not prefix else str(tess_path)
            if prefix:  # coordinates only: the release must assign the tiles
                raw = path.with_suffix(".ids.parquet")
                synth_trips(
                    raw, n_users=max(1, n // 20), days=DAYS, tessellation=tess, seed=1,
                    coordinates=True,
                )  # fmt: skip
                _copy(f"SELECT * EXCLUDE (origin, destination) FROM '{raw}'", path, "parquet")
                raw.unlink()
            else:
                synth_trips(path, n_users=max(1, n // 20), days=DAYS, tessellation=tess, seed=1)
    elif kind == "points":  # n rows: n / 20 users, 10 trips each, two points per trip
        if not path.exists():
            synth_report_points(path, n_users=max(1, n // 20), tessellation=tess_path)
    else:
        cells = out / f"{prefix}events_{n}.cells.parquet"
        if not path.exists():
            tess = default_tessellation(263) if not prefix else str(tess_path)
            synth_events(
                path, cells, n_users=max(1, n // (5 * DAYS)), days=DAYS, tessellation=tess, seed=1
            )
    if fmt == "csv":
        csv = path.with_suffix(".csv")
        if not csv.exists():
            _copy(f"SELECT * FROM '{path}'", csv, "csv")
        path = csv
    if time.perf_counter() - t0 > 1:
        print(f"  generated {path.name} in {time.perf_counter() - t0:.0f}s", flush=True)
    return path, cells, tess_path


def _copy(select: str, path: Path, fmt: str) -> None:
    import duckdb

    partial = path.with_suffix(".partial")
    options = "FORMAT csv, HEADER" if fmt == "csv" else "FORMAT parquet"
    duckdb.sql(f"COPY ({select}) TO '{partial}' ({options})")
    partial.replace(path)


def synth_report_points(path: Path, n_users: int, tessellation: Path | None = None) -> None:
    """Trip points for the report benchmarks (here and benchmarks/bench_report.py): 10 trips
    per user, two points per trip, over the DAYS from START, on the 263-tile grid (or inside
    the polygons of ``tessellation``)."""
    from privmob.data.synth import default_tessellation, synth_trip_points

    grid = tessellation is None or tessellation.name == "grid263.geojson"
    synth_trip_points(
        path,
        n_users=n_users,
        mean_trips_per_user=10.0,
        trips_sigma=0.0,
        extra_points_per_trip=0.0,
        days=DAYS,
        start=START,
        tessellation=default_tessellation(263) if grid else str(tessellation),
        seed=1,
    )


#: Trips and trip points above this many rows are copies of the file of this size.
REPLICATE_FROM = 100_000_000
#: Input file names by kind. The report's points are named apart from
#: benchmarks/bench_report.py's ``trip_points_<trips>.parquet``, which counts trips, not rows.
FILE_NAMES = {"trips": "trips_{n}.parquet", "points": "report_points_{n}.parquet"}


def replicate(source: Path, path: Path, copies: int) -> None:
    """``path`` = ``copies`` copies of ``source`` with disjoint user ids (uid + k * (max + 1))."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    src = f"read_parquet('{source}')"
    (step,) = con.execute(f"SELECT max(uid) + 1 FROM {src}").fetchone()  # type: ignore[misc]
    partial = path.with_suffix(".partial")
    con.execute(
        f"COPY (SELECT * REPLACE (uid + k * {int(step)} AS uid) FROM range({copies}) r(k), {src})"
        f" TO '{partial}' (FORMAT parquet, ROW_GROUP_SIZE 500000)"
    )
    partial.replace(path)


# -- floors -------------------------------------------------------------------------------------


def _cell_tiles(eng: Any, cells: str, tess_path: str, sites: bool = False) -> Any:
    """cell_id -> tile index (point in polygon, as privmob does), or -> site index (density)."""
    import numpy as np
    import pyarrow as pa

    ct = eng.fetch(f"SELECT cell_id, lat, lng FROM read_parquet('{cells}')")
    if sites:  # every distinct tower position is a site (privmob's SiteIndex)
        key = ct["lng"].round(7).astype(str) + ":" + ct["lat"].round(7).astype(str)
        tile = key.map({k: i for i, k in enumerate(dict.fromkeys(key))}).to_numpy(np.int32)
    else:
        from privmob.data.tessellation_input import load_tessellation

        tile = load_tessellation(tess_path).assign(ct["lng"].to_numpy(), ct["lat"].to_numpy())
    return pa.table({"cell_id": ct["cell_id"].to_numpy(), "tile": np.asarray(tile, np.int32)})


def _scan(eng: Any, path: str, twice: bool = False) -> str:
    """The input file as a relation: Parquet as is; CSV with the engine's own type detection
    (DuckDB's sniffer; Spark's schema inference, in a view of the same session).

    ``twice``: the floor reads the input in two queries (the distinct coordinates, then the
    counts). On DuckDB a CSV is then loaded once into a table, which both read: 0.7-4 s faster
    at 10M rows than parsing the CSV twice (od-trips 7.8-8.1 s against 9.9-12.5 s, the report
    6.0 s against 6.9 s, its complete floor 10.9 s against 11.6 s), so the floor stays the
    fastest plain code. On Spark a CSV is read in each query (with its schema inference): a
    cache would outlive the floor's run in the session it shares with privmob's alternating
    runs, so Spark's CSV floors are the looser ones; the Spark targets are on Parquet."""
    if not path.endswith(".csv"):
        return f"read_parquet('{path}')"
    if eng.dialect.name == "duckdb":
        if twice:
            eng.materialize("csv_once", f"SELECT * FROM read_csv('{path}')")
            return "csv_once"
        return f"read_csv('{path}')"
    name = f"csv_{abs(hash(path))}"
    eng.spark.read.options(header=True, inferSchema=True).csv(path).createOrReplaceTempView(name)
    return name


def _events(eng: Any, path: str) -> str:
    return (
        f"SELECT e.uid, CAST(e.datetime AS TIMESTAMP) AS time, c.tile "
        f"FROM {_scan(eng, path)} e JOIN tiles c ON e.cell_id = c.cell_id"
    )


def _since_start(eng: Any, ts: str, seconds: int) -> str:
    """Whole ``seconds``-long steps (hours: 3600, days: 86400) from START to ``ts``."""
    d = eng.dialect
    start = d.epoch_seconds(f"TIMESTAMP '{START}'")
    return f"CAST(floor(({d.epoch_seconds(ts)} - {start}) / {seconds}) AS BIGINT)"


def floor_od_trips(eng: Any, path: str, cells: str, tess_path: str) -> str:
    src = _scan(eng, path)
    if "origin_lat" in eng.fetch(f"SELECT * FROM {src} LIMIT 0").columns:
        src = _scan(eng, path, twice=True)
        # coordinate trips: tiles of the distinct ends by point in polygon, joined back
        eng.register("ends", _coordinate_tiles(eng, tess_path, f"""
            SELECT origin_lng AS lng, origin_lat AS lat FROM {src}
            UNION SELECT destination_lng, destination_lat FROM {src}"""))  # fmt: skip
        src = f"""(SELECT t.uid, t.tid, o.tile AS origin, d.tile AS destination FROM {src} t
            JOIN ends o ON t.origin_lng = o.lng AND t.origin_lat = o.lat
            JOIN ends d ON t.destination_lng = d.lng AND t.destination_lat = d.lat) AS s_"""
    return f"""
        SELECT origin, destination, count(*) AS n FROM (
          SELECT origin, destination, row_number() OVER (
              PARTITION BY uid ORDER BY {_by_trip(eng)}) AS r
          FROM {src}) AS b_ WHERE r <= {T} GROUP BY origin, destination"""


def _by_trip(eng: Any) -> str:
    """The keyed hash of (uid, tid) as a sort key, with the trip id after it on DuckDB, as
    privmob bounds. On DuckDB 2 a lone sort key lets the optimizer turn the window into a
    top-M aggregate of whole rows, which was slower at 10M: the od-trips floor 1.46-1.70 s
    against 1.26-1.27 s on grid Parquet (equal on the taxi CSV), the report's floors 6.0 s and
    10.0 s against 5.1 s and 8.1 s on the taxi CSV. Spark has no such rewrite: one key."""
    tie = ", tid" if eng.dialect.name == "duckdb" else ""
    return eng.dialect.keyed_hash(KEY, "uid", "tid") + tie


def _coordinate_tiles(eng: Any, tess_path: str, pairs_sql: str) -> Any:
    """(lng, lat, tile) of the distinct pairs: privmob's point in polygon (its sweep is
    faster than shapely's STRtree query: benchmarks/bench_tile_assignment.py)."""
    import numpy as np
    import pyarrow as pa

    from privmob.data.tessellation_input import load_tessellation

    xy = eng.fetch(f"SELECT DISTINCT lng, lat FROM ({pairs_sql}) AS p_")
    tile = load_tessellation(tess_path).assign(xy["lng"].to_numpy(), xy["lat"].to_numpy())
    return pa.table({"lng": xy["lng"], "lat": xy["lat"], "tile": np.asarray(tile, np.int32)})


def floor_od_daily_events(eng: Any, path: str, cells: str, tess_path: str) -> str:
    eng.register("tiles", _cell_tiles(eng, cells, tess_path))
    return f"""
        WITH ev AS ({_events(eng, path)}),
        tr AS (SELECT uid, time, tile, lead(tile) OVER w AS nt, row_number() OVER w AS seq
               FROM ev WINDOW w AS (PARTITION BY uid ORDER BY time, tile)),
        b AS (SELECT time, tile, nt, row_number() OVER (
                  PARTITION BY uid ORDER BY {eng.dialect.keyed_hash(KEY, "uid", "seq")}) AS r
              FROM tr WHERE nt IS NOT NULL AND nt <> tile)
        SELECT CAST(time AS DATE) AS d, tile, nt, count(*) AS n FROM b WHERE r <= {T}
        GROUP BY CAST(time AS DATE), tile, nt"""


def floor_population(eng: Any, path: str, cells: str, tess_path: str) -> str:
    eng.register("tiles", _cell_tiles(eng, cells, tess_path))
    return f"""
        WITH ev AS ({_events(eng, path)}),
        nc AS (SELECT uid, tile, count(*) AS n FROM ev
               WHERE hour(time) >= 20 OR hour(time) < 6 GROUP BY uid, tile),
        h AS (SELECT uid, tile FROM (SELECT uid, tile, row_number() OVER (
                  PARTITION BY uid ORDER BY n DESC, tile) AS r FROM nc) AS r_ WHERE r = 1),
        u AS (SELECT DISTINCT uid FROM ev)
        SELECT coalesce(h.tile, -2) AS home, count(*) AS n FROM u LEFT JOIN h ON u.uid = h.uid
        GROUP BY coalesce(h.tile, -2)"""


def floor_series_counts(eng: Any, path: str, cells: str, tess_path: str) -> str:
    eng.register("tiles", _cell_tiles(eng, cells, tess_path))
    bins = DAYS * 24
    return f"""
        WITH ev AS ({_events(eng, path)}),
        b AS (SELECT uid, time, tile, CASE WHEN time >= TIMESTAMP '{START}'
                  AND time < TIMESTAMP '{END}' THEN {_since_start(eng, "time", 3600)}
                  ELSE {bins} END AS bin
              FROM ev),
        r AS (SELECT tile, bin, row_number() OVER (PARTITION BY uid, bin
                  ORDER BY {eng.dialect.keyed_hash(KEY, "uid", "time", "tile")}) AS r FROM b)
        SELECT tile, bin, count(*) AS n FROM r WHERE r <= 1 GROUP BY tile, bin"""


def floor_density(eng: Any, path: str, cells: str, tess_path: str) -> str:
    eng.register("tiles", _cell_tiles(eng, cells, tess_path, sites=True))
    d = eng.dialect
    week = f"time >= TIMESTAMP '{START}' AND time < TIMESTAMP '{WEEK_END}'"
    return f"""
        WITH ev AS ({_events(eng, path)}),
        w AS (SELECT DISTINCT uid, CAST({_since_start(eng, "time", 3600)} AS INT) AS hour,
                  tile AS tower FROM ev WHERE {week}),
        h AS (SELECT uid, hour, tower FROM (SELECT w.*, row_number() OVER (
                  PARTITION BY uid, hour ORDER BY {d.keyed_hash(KEY, "uid", "hour", "tower")})
                  AS p FROM w) AS p_ WHERE p = 1),
        s AS (SELECT tower, hour, row_number() OVER (
                  PARTITION BY uid ORDER BY {d.keyed_hash(KEY + 1, "uid", "hour")}) AS rnk
              FROM h)
        SELECT tower, hour, count(*) AS n FROM s WHERE rnk <= {L_VISITS} GROUP BY tower, hour
        UNION ALL  -- the out-of-domain cell: hourly visits outside the week, <= l per user
        SELECT -1, -1, sum(least(h, {L_VISITS})) FROM (
          SELECT uid, count(DISTINCT {_since_start(eng, "time", 3600)}) AS h FROM ev
          WHERE NOT ({week}) GROUP BY uid) AS o_"""


def floor_report(eng: Any, path: str, cells: str, tess_path: str) -> str:
    src = _scan(eng, path, twice=True)
    eng.register("coords", _coordinate_tiles(eng, tess_path, f"SELECT lng, lat FROM {src}"))
    eng.materialize(
        "tr",
        f"""SELECT * FROM (
          SELECT *, row_number() OVER (
              PARTITION BY uid ORDER BY {_by_trip(eng)}) AS r
          FROM (SELECT p.uid, p.tid, min(CAST(p.datetime AS TIMESTAMP)) AS st,
                  arg_min(c.tile, p.datetime) AS o, arg_max(c.tile, p.datetime) AS d
                FROM {src} p JOIN coords c ON p.lng = c.lng AND p.lat = c.lat
                GROUP BY p.uid, p.tid) AS t_) AS b_ WHERE r <= {T}""",
    )
    day = f"CAST({_since_start(eng, 'st', 86400)} AS INT)"
    return f"""
        SELECT 0 AS q, o AS a, d AS b, count(*) AS n FROM tr GROUP BY o, d
        UNION ALL SELECT 1, o, 0, count(*) FROM (SELECT o FROM tr UNION ALL SELECT d FROM tr)
            AS e_ GROUP BY o
        UNION ALL SELECT 2, {day}, 0, count(*) FROM tr GROUP BY {day}"""


def _bin(expr: str, width: float, bins: int) -> str:
    """Equal-width histogram bin of ``expr``, the last bin open-ended."""
    return f"least(CAST(floor(({expr}) / {width}) AS INT), {bins - 1})"


def floor_report_complete(eng: Any, path: str, cells: str, tess_path: str) -> str:
    """The report's whole relational work, written by hand: the bounded trips as in
    :func:`floor_report` (and their end coordinates, point counts and end times), the trip
    ends, a per-user table (visits, distinct tiles, entropy, radius of gyration about the
    user's centre) and all 16 count vectors of the report as plain group-bys (histograms with
    equal-width bins). What privmob adds beyond it: validation, the dense public domains,
    noise, the ledger and the output files. The great-circle distance is privmob's formula
    (:func:`privmob.releases.dimensions.haversine_km`), SQL text only."""
    from privmob.releases.dimensions import haversine_km

    src = _scan(eng, path, twice=True)
    eng.register("coords", _coordinate_tiles(eng, tess_path, f"SELECT lng, lat FROM {src}"))
    d = eng.dialect
    ts = "CAST(p.datetime AS TIMESTAMP)"
    in_period = f"st >= TIMESTAMP '{START}' AND st < TIMESTAMP '{END}'"
    eng.materialize(
        "trc",
        f"""SELECT *, CASE WHEN {in_period} THEN 1 ELSE 0 END AS ip FROM (
          SELECT *, row_number() OVER (
              PARTITION BY uid ORDER BY {_by_trip(eng)}) AS r
          FROM (SELECT p.uid, p.tid, count(*) AS np, min({ts}) AS st, max({ts}) AS et,
                  min_by(c.tile, {ts}) AS o, max_by(c.tile, {ts}) AS d,
                  min_by(p.lat, {ts}) AS olat, min_by(p.lng, {ts}) AS olng,
                  max_by(p.lat, {ts}) AS dlat, max_by(p.lng, {ts}) AS dlng
                FROM {src} p JOIN coords c ON p.lng = c.lng AND p.lat = c.lat
                GROUP BY p.uid, p.tid) AS t_) AS b_ WHERE r <= {T}""",
    )
    eng.create_view(
        "enc",
        """SELECT uid, st AS t, o AS tile, olat AS lat, olng AS lng, 0 AS ie FROM trc WHERE ip = 1
        UNION ALL
        SELECT uid, et, d, dlat, dlng, 1 FROM trc WHERE ip = 1 AND np >= 2""",
    )
    eng.materialize(
        "usc",
        f"""WITH tc AS (SELECT uid, tile, count(*) AS n FROM enc GROUP BY uid, tile),
        u AS (SELECT uid, sum(n) AS nv, count(*) AS nt, sum(n * ln(n)) AS nl FROM tc GROUP BY uid),
        c AS (SELECT uid, avg(lat) AS clat, avg(lng) AS clng FROM enc GROUP BY uid),
        g AS (SELECT e.uid, sqrt(avg(pow({haversine_km("e.lat", "e.lng", "c.clat", "c.clng")}, 2)))
                  AS rog FROM enc e JOIN c ON e.uid = c.uid GROUP BY e.uid)
        SELECT u.uid, nt, rog, CASE WHEN nv > 1 THEN (ln(nv) - nl / nv) / ln(nv) ELSE 0 END
            AS ent FROM u JOIN g ON u.uid = g.uid""",
    )
    weekend = f"CASE WHEN {d.weekday('t')} >= 5 THEN 1 ELSE 0 END"
    window = f"CASE WHEN {d.hour('t')} < 6 THEN 0 WHEN {d.hour('t')} < 12 THEN 1 ELSE 2 END"
    minutes = f"({d.epoch_seconds('et')} - {d.epoch_seconds('st')}) / 60.0"
    jump = haversine_km("olat", "olng", "dlat", "dlng")
    gap = f"({d.epoch_seconds('st')} - {d.epoch_seconds('pe')}) / 3600.0"
    complete = "ip = 1 AND np >= 2 AND et > st"
    per_user = "(SELECT uid, count(*) AS k FROM trc WHERE ip = 1 GROUP BY uid) AS pu_"
    groups = [  # (a, b, source [WHERE ...]) of each count vector, grouped by a, b
        ("0", "0", per_user),
        ("CASE WHEN np >= 2 AND et > st THEN 0 ELSE 1 END", "0", "trc WHERE ip = 1"),
        ("CASE WHEN olat IS NULL THEN 0 ELSE 1 END", "0", "trc"),
        (_since_start(eng, "st", 86400), "0", "trc"),
        (d.weekday("st"), "0", "trc WHERE ip = 1"),
        (f"ie * 48 + {weekend} * 24 + {d.hour('t')}", "0", "enc"),
        ("tile", "0", "enc"),
        (f"tile * 2 + {weekend}", window, "enc"),
        ("o", "d", f"trc WHERE {complete}"),
        (_bin(minutes, 5, 24), "0", f"trc WHERE {complete}"),
        (_bin(jump, 1, 30), "0", f"trc WHERE {complete}"),
        ("k", "0", per_user),
        (
            _bin(gap, 6, 28),
            "0",
            """(SELECT st, lag(et) OVER (PARTITION BY uid ORDER BY st, tid) AS pe
                FROM trc WHERE ip = 1) AS g_ WHERE pe IS NOT NULL""",
        ),
        (_bin("rog", 1, 30), "0", "usc"),
        ("nt", "0", "usc"),
        (_bin("ent", 0.1, 10), "0", "usc"),
    ]
    return "\nUNION ALL ".join(
        f"SELECT {q} AS q, {a} AS a, {b} AS b, count(*) AS n FROM {s}"
        + (" GROUP BY " + ", ".join(x for x in (a, b) if x != "0") if (a, b) != ("0", "0") else "")
        for q, (a, b, s) in enumerate(groups)
    )


FLOORS: dict[str, Callable[[Any, str, str, str], str]] = {
    "od-trips": floor_od_trips,
    "od-daily-events": floor_od_daily_events,
    "population": floor_population,
    "series-counts": floor_series_counts,
    "density": floor_density,
    "report": floor_report,
    "report-complete": floor_report_complete,
}


def timed_floor(release: str, path: str, cells: str, tess_path: str, eng: Any) -> float:
    """Seconds for the floor of ``release`` on privmob's engine ``eng`` (the same SQL on DuckDB
    and on Spark: the dialect's keyed hash and epoch seconds). Every group's count is computed
    and summed (not sent to Python): with the number of groups alone, Spark's optimizer drops
    the work of counts nobody reads (the density floor's out-of-week branch became a bare
    scan, without its per-user distinct hours)."""
    t0 = time.perf_counter()
    sql = FLOORS[release](eng, path, cells, tess_path)
    eng.fetch(f"SELECT count(*) AS groups, sum(n) AS total FROM ({sql}) AS g_")
    return time.perf_counter() - t0


def run_floor(
    release: str, path: str, cells: str, tess_path: str, duckdb_limit: str = ""
) -> dict[str, float]:
    """Time the floor on a bare DuckDB connection (privmob's DuckDB engine: UTC, insertion
    order not kept): tile assignment and query (importing duckdb, pandas and geopandas is
    not timed, as for privmob). ``duckdb_limit``: DuckDB's own ``memory_limit`` (it spills
    above it), to keep a 100M floor within the machine's share; default DuckDB's (80% of RAM)."""
    from privmob.engine import DuckDBEngine

    eng = DuckDBEngine()
    if duckdb_limit:
        eng.con.execute(f"SET memory_limit = '{duckdb_limit}'")
    return {"seconds": timed_floor(release, path, cells, tess_path, eng)}


# -- privmob ------------------------------------------------------------------------------------


def make_engine_for(engine_name: str, memory_limit: str) -> Any:
    from privmob.engine import make_engine

    options: dict[str, object] = {}
    if engine_name == "spark":
        # local[2] with 8 shuffle partitions unless $PRIVMOB_SPARK_MASTER names another master
        # (a cluster: then its settings come from $PRIVMOB_SPARK_CONF, see docs/scale.md)
        master = os.environ.get("PRIVMOB_SPARK_MASTER", "local[2]")
        local = master.startswith("local")
        options = {"master": master}
        if local:
            options["conf"] = {"spark.sql.shuffle.partitions": "8"}
    if memory_limit:
        options["memory_limit"] = memory_limit
    return make_engine(engine_name, **options)


def run_privmob(
    release: str, path: str, cells: str, tess_path: str, eng: Any, tmp: Path
) -> dict[str, Any]:
    """The whole release through its Python API; returns the number of published cells."""
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant, write_release

    acct = Accountant(Ledger(tmp / "l.sqlite"), "bench", budget=1e6)
    if release == "density":
        return _density(path, cells, tess_path, eng, acct, tmp)
    if release in ("report", "report-complete"):
        return _report(path, tess_path, eng, acct, tmp)
    from privmob.data.tessellation_input import load_tessellation

    tess = load_tessellation(tess_path)
    if release.startswith("od-"):
        from privmob.domain import Period
        from privmob.prepare.inputs import load_trips_any
        from privmob.releases.od import od_matrix

        if release == "od-trips":
            trips = load_trips_any(path, engine=eng, tessellation=tess, shape="trips")
            period = Period()
        else:
            trips = load_trips_any(path, engine=eng, tessellation=tess, shape="events", cells=cells)
            period = Period.parse("day", START, END)
        rel = od_matrix(
            trips, tessellation=tess, epsilon=EPSILON, accountant=acct, max_trips=T, period=period
        )
    else:
        from privmob.data import load_events

        events = load_events(path, engine=eng, tessellation=tess, cells=cells)
        if release == "population":
            from privmob.releases.population import population_counts

            rel = population_counts(events, tessellation=tess, epsilon=EPSILON, accountant=acct)
        else:  # series-counts, as `privmob series-counts` (hourly bins, 1 event per bin)
            from privmob.domain import time_grid
            from privmob.releases.base import Accountant
            from privmob.releases.landmark import SCHEME_UNIT, Scheme
            from privmob.releases.landmark_counts import publish_zone_counts

            led = acct.ledger
            led.set_budget("series", 1e6, 0.0, SCHEME_UNIT[Scheme.UNIFORM])
            acct = Accountant(led, "series")
            rel = publish_zone_counts(
                events,
                tile_ids=tess.tile_ids,
                grid=time_grid(START, END, "1h"),
                max_per_bin=1,
                landmarks=[],
                epsilon=EPSILON,
                scheme="uniform",
                accountant=acct,
            )
    write_release(rel, tmp / "out")
    return {"cells": int(sum(len(t) for t in rel.tables.values()))}


def _density(path: str, cells: str, tess_path: str, eng: Any, acct: Any, tmp: Path) -> dict:
    """As `privmob density` (EFPA, l = 30, minimum cover), the week starting on day 1: the
    command's own input step (privmob.releases.density_inputs.load_density_inputs) on ``eng``."""
    from privmob.releases.base import write_release
    from privmob.releases.density import DensityConfig, density_release
    from privmob.releases.density_inputs import load_density_inputs

    inputs = load_density_inputs(
        path,
        cells,
        Path(tess_path),
        zone_id=None,
        week=START,
        cover=True,
        timezone="UTC",
        columns=None,
        step=lambda _: None,
        engine=eng,
    )
    config = DensityConfig(EPSILON, max_visits=L_VISITS)
    rel = density_release(eng, inputs.loaded, inputs.geometry, config, inputs.week_start, acct)
    write_release(rel, tmp / "out")
    return {"cells": int(sum(len(t) for t in rel.tables.values()))}


def _report(path: str, tess_path: str, eng: Any, acct: Any, tmp: Path) -> dict:
    """As `privmob report` (all analyses, M = T, the 28 days), HTML + JSON + Parquet out."""
    from privmob.data.sources import load_trip_points
    from privmob.data.tessellation_input import load_tessellation
    from privmob.releases.report import ReportConfig, Tiles, mobility_report
    from privmob.render.report_files import write_report

    tess = load_tessellation(tess_path)
    points = load_trip_points(path, engine=eng, tessellation=tess)  # Loaded: user buckets
    cfg = ReportConfig.build(epsilon=EPSILON, max_trips=T, period=(START, END))
    rel = mobility_report(eng, points, Tiles.from_tessellation(tess), cfg, acct)
    write_report(rel, tmp / "report.html")
    return {"cells": int(sum(len(t) for t in rel.tables.values()))}


def timed_privmob(
    release: str, path: str, cells: str, tess_path: str, engine_name: str, memory_limit: str
) -> dict[str, Any]:
    """Engine start, then the release. Not timed, as for the floor: importing duckdb, pandas
    and geopandas (privmob.data.tessellation_input), which both sides need; privmob's own modules
    and everything the release imports beyond those are timed.

    On Spark, the floor and the release both run twice in the same session, alternating
    (floor, release, floor, release), and each one's faster run is kept: the first query of a
    session pays the JVM's warm-up, and each side's first run compiles its own query shapes
    (a long-lived session, as on a cluster, pays that once). ``first_seconds`` is the release's
    first run, whose ratio to the floor is printed too."""
    import privmob.data.tessellation_input  # noqa: F401

    eng = make_engine_for(engine_name, memory_limit)
    rounds = 2 if engine_name == "spark" else 1
    floors, runs = [], []
    for _ in range(rounds):
        if engine_name == "spark":
            floors.append(timed_floor(release, path, cells, tess_path, eng))
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            res = run_privmob(release, path, cells, tess_path, eng, Path(tmp))
        runs.append(time.perf_counter() - t0)
    if floors:
        res["floor_seconds"] = min(floors)
        res["first_seconds"] = runs[0]
    return {"seconds": min(runs), **res}
