"""The DP mobility report (SPEC 4.2): all 15 analyses of dp_mobility_report as one release."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from privmob.engine import Engine
from privmob.engine.base import dense_counts
from privmob.engine.buckets import (
    bucket_predicate,
    bucketed_counts,
    parse_memory,
    plan_buckets,
)
from privmob.engine.relation import Loaded
from privmob.json_types import JSON, JSONObject
from privmob.lazy_imports import np, pd
from privmob.prepare.bounding import fresh_key
from privmob.privacy.bound_choice import BoundChoice, choose_bound, per_user_histogram_sql
from privmob.privacy.costs import Cost
from privmob.privacy.mechanisms import Noise
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.releases.base import Accountant
from privmob.releases.bound_choice import CHOSEN, records_per_user, total_cost
from privmob.releases.counts import count_vectors
from privmob.releases.dimensions import WEEKDAYS
from privmob.releases.gate import Draft, through_the_gate
from privmob.releases.metadata import json_list, json_object
from privmob.releases.release import Release

from . import analyses as an
from .composition import CONVERSION, CompositionPlan, plan_composition, resolved
from .config import MISSING_COLUMNS, ReportConfig
from .inputs import Tiles
from .sql import count_terms, ends_sql, queries, trips_sql, users_sql

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.privacy.mechanisms import Noise

    from .levels import OdLevels


def time_bins(cfg: ReportConfig) -> list[datetime]:
    """Start of every *trips over time* bin, from the declared period only."""
    start, end = cfg.period
    out = []
    t = start
    while t < end:
        out.append(t)
        if cfg.time_resolution == "day":
            t = t + timedelta(days=1)
        elif cfg.time_resolution == "week":
            t = t + timedelta(days=7)
        else:
            y, m = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
            t = datetime(y, m, 1)
    if cfg.time_resolution == "month" and out:
        out[0] = datetime(start.year, start.month, 1)
    return out


def report_cost(cfg: ReportConfig, plan: CompositionPlan | None = None) -> Cost:
    """The cost of the whole report: the sum of the per-analysis epsilons (= cfg.epsilon), or
    under zCDP composition its pure part plus its rho part (:mod:`.composition`); with a bound
    chosen privately, the sum of :func:`report_parts`."""
    plan = plan or composition_of(cfg)
    parts = report_parts(cfg, plan)
    if cfg.bound_choice is not None and parts:
        return total_cost(parts)
    if plan is not None:
        return plan.cost
    return Cost.pure(math.fsum(cfg.epsilon_for(a) for a in cfg.selected), cfg.unit)


def report_parts(cfg: ReportConfig, plan: CompositionPlan | None) -> list[tuple[str, Cost]] | None:
    """The ledger entries of the report (None: one): under zCDP the pure part and the rho part
    (:attr:`CompositionPlan.cost_parts`); with a bound chosen privately, the choice's epsilon
    first (:meth:`~privmob.privacy.bound_choice.BoundChoice.parts`: every part charged in one
    commit). The parts do not depend on the bound: the plan is made at its largest candidate
    and keeps its mechanisms and shares whatever bound is chosen."""
    inner = plan.cost_parts if plan is not None and plan.gaussian else None
    choice = cfg.bound_choice
    if choice is None:
        return inner
    bound = (f"the bound: DP {choice.describe_choice()}", Cost.pure(cfg.bound_epsilon, cfg.unit))
    return [bound, *(inner or [("DP mobility report", Cost.pure(cfg.epsilon, cfg.unit))])]


def composition_of(cfg: ReportConfig) -> CompositionPlan | None:
    """The zCDP composition plan of a report with a delta (None: pure epsilon, as before)."""
    if resolved(cfg)[0] == "pure":
        return None
    return plan_composition(cfg)


#: The per-trip aggregate (one group per trip, with first and last time, place and tile) is
#: the report's largest transient state. On DuckDB, from this many input rows on, the trips
#: table is built in :data:`TRIP_SLICES` user slices one after the other (each user in one
#: slice, so the table is the same). Measured (docs/benchmarks.md): peak 0.68 -> 0.51-0.53 GB
#: at 1M taxi-zone trips from CSV (2M points); 2.0 -> 1.43 GB at 10M taxi-zone points from CSV
#: at the same time; from grid Parquet at 10M the second scan costs 0.5-0.7 s (about 10%).
#: Four slices saved 0.14 GB more at 10M for +0.5 s.
TRIP_SLICE_ROWS = 1_000_000
TRIP_SLICES = 2


def trip_slices(engine: Engine, rows: int | None) -> int:
    """How many user slices the trips table of ``rows`` input rows is built in."""
    if engine.dialect.manages_own_memory or rows is None or rows < TRIP_SLICE_ROWS:
        return 1  # Spark: its own memory management; one slice would only add a job
    return TRIP_SLICES


def materialize_trips(
    engine: Engine, points: str, cfg: ReportConfig, key: int, slices: int = 1
) -> None:
    """The bounded trips table ``pm_trips`` of the trip points ``points``, built in ``slices``
    disjoint user slices (a plain hash of the user id, as the out-of-core buckets) one after
    the other: the same rows as one pass (bounding is per user, with the same key), with at
    most one slice's per-trip aggregate in memory at a time."""
    d = engine.dialect
    if slices <= 1:
        engine.materialize("pm_trips", trips_sql(points, cfg, key, d))
        return
    for i in range(slices):
        part = f"(SELECT * FROM {points} WHERE {bucket_predicate(d, slices, i)}) AS slice_"
        sql = trips_sql(part, cfg, key, d)
        if i == 0:
            engine.materialize("pm_trips", sql)
        else:
            engine.append("pm_trips", sql)


def exact_counts(
    engine: Engine,
    points: str,
    cfg: ReportConfig,
    tiles: Tiles,
    key: int,
    slices: int = 1,
) -> dict[str, npt.NDArray[np.int64]]:
    """Run the record-level SQL in the engine; return dense exact counts over public domains.
    ``slices``: build the trips table in that many user slices (:func:`materialize_trips`).

    This is the only function that touches records; its output is never released as is.
    """
    n_tb = len(time_bins(cfg))
    materialize_trips(engine, points, cfg, key, slices)
    engine.create_view("pm_ends", ends_sql("pm_trips"))  # cheaper to re-derive than to store
    engine.materialize("pm_users", users_sql("pm_ends"))
    return count_vectors(engine, count_terms(cfg, tiles.k, n_tb, engine.dialect, key))


#: The report's record-level work needs about this many times the engine memory per input row
#: that :mod:`privmob.engine.buckets` plans for (a wide per-trip aggregate, the bounded trips
#: table and the per-user tables; measured: ~150 B per trip point at 10M trips). 2.0 ran out
#: of memory at ``--memory-limit 512MB`` on 5M trip points over the 263 taxi-zone polygons
#: (DuckDB's share 131 MiB against a bucket of 1M points); 4.0 runs it at a peak of 0.78x the
#: limit (``benchmarks/bench_memory_cap.py --records 5000000 --csv-records 0 --limits 512MB
#: --releases report --tessellation taxi-zones``, 2026-12-02).
REPORT_MEMORY_FACTOR = 4.0


def report_memory(memory_limit: str | int | None) -> int | None:
    """The memory limit to plan the report's user buckets with (None: no limit)."""
    if memory_limit is None:
        return None
    limit = parse_memory(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    return max(1, int(limit / REPORT_MEMORY_FACTOR))


def bucketed_exact_counts(
    points: Loaded,
    cfg: ReportConfig,
    tiles: Tiles,
    key: int,
    n_buckets: int,
    step: Callable[[str], None] | None = None,
) -> dict[str, npt.NDArray[np.int64]]:
    """:func:`exact_counts` summed over user-hash buckets of ``points`` (out of core).

    Every analysis is a count over a public domain and every per-user quantity (bounding,
    gaps, radius, tiles, entropy, trips per user) depends on one user's records only, so the
    sum over disjoint user buckets equals the single-pass counts; the bounding key is the same
    in every bucket.
    """
    engine = points.engine
    if n_buckets <= 1:
        return exact_counts(engine, points.view, cfg, tiles, key, trip_slices(engine, points.rows))
    n_tb = len(time_bins(cfg))
    sizes = {name: size for name, (_, size) in queries(cfg, tiles.k, n_tb, engine.dialect).items()}
    names = list(sizes)

    def flat(part: Loaded) -> npt.NDArray[np.int64]:
        counts = exact_counts(engine, part.view, cfg, tiles, key)
        return np.concatenate([counts[n].astype(np.int64) for n in names])

    total = bucketed_counts(points, flat, n_buckets, step, "aggregating")
    ends = np.cumsum([sizes[n] for n in names])
    return dict(zip(names, np.split(total, ends[:-1]), strict=True))


def report_draft(
    engine: Engine,
    points: str | Loaded,
    tiles: Tiles,
    config: ReportConfig,
    accountant: Accountant,
    rng: RandomnessLike = None,
    progress: Callable[[str], None] | None = None,
    buckets: int | None = None,
    levels: OdLevels | None = None,
) -> Draft:
    """The mobility report of the trip points ``points`` (a table name, or the
    :class:`~privmob.engine.relation.Loaded` input, which can be split out of core), before
    its noise.

    Guarantee: ``config.epsilon``-DP (pure) for the declared unit of privacy — a user with at
    most ``config.max_trips`` trips (enforced by sampling) or one trip. The budget is split
    over the selected analyses by weight and charged once by the gate, before any noise is
    drawn; every selected analysis is present in the output whatever the data holds, over
    domains (tiles, tile pairs, time bins, histogram bins) built from public parameters only.

    With a bound chosen privately (``config.bound_choice``: ``-T auto``) the choice's epsilon
    is charged with the analyses' (:func:`report_parts`, one commit), the users' trips per
    user are counted exactly before the charge, and M is chosen, the trips bounded and the
    analyses counted after it (an engine pass after the charge: its failure costs the budget,
    as ``od``'s does); the header holds nothing that depends on M.

    Out of core: with a ``Loaded`` input, ``buckets`` (default: as many as the engine's memory
    limit needs, :func:`privmob.engine.buckets.plan_buckets`; 1 without a limit) splits the
    users by a hash of the user id; the summed counts equal the single-pass counts.

    ``levels`` (``config.hierarchy``, :class:`~.levels.OdLevels`, fixed from the public
    tessellation by the spec's plan): od_flows' epsilon split across the levels, each level
    noised, the consistent estimates released (the coarser levels as tables of their own);
    the cost is unchanged.
    """
    if bool(config.hierarchy) != (levels is not None):  # before the charge: a wiring error
        from privmob.errors import ConfigError

        raise ConfigError(
            "a report's hierarchy needs its levels, from the public tessellation, and levels "
            "need a hierarchy",
            hint="run it as privmob.releases.report.ReportSpec(tessellation, config), which "
            "plans them, or pass levels=OdLevels.plan(config, zone_levels(...), k)",
        )
    r = resolve(rng)
    plan = composition_of(config)
    cost = report_cost(config, plan)
    accountant.precheck(cost)
    step = progress or (lambda _msg: None)
    zcdp = {} if plan is None else _zcdp_description(plan)
    choice = config.bound_choice
    parts = report_parts(config, plan)
    header = Release(
        kind="report",
        cost=cost,
        unit=config.unit,
        bounds=_bounds(config, chosen=choice is None),
        noise={"kind": config.noise_kind.value, "confidence": config.confidence, **zcdp},
        params=_params(config, plan, chosen=choice is None),
        domain={
            "tiles": tiles.k,
            "tile_ids": list(tiles.ids),
            "time_bins": [t.isoformat() for t in time_bins(config)],
        },
        tables={},
        for_publication=r.for_publication,
        cost_parts=parts,
    )

    def count(cfg: ReportConfig) -> dict[str, npt.NDArray[np.int64]]:
        step("aggregating in the engine")
        key = fresh_key(r)
        if isinstance(points, Loaded):
            limit = report_memory(getattr(engine, "memory_limit", None))
            n = buckets or plan_buckets(points, limit)
            return bucketed_exact_counts(points, cfg, tiles, key, n, step)
        return exact_counts(engine, points, cfg, tiles, key)

    # with a bound to choose, the users' trips per user (exact, read by the choice after the
    # charge) and no counts yet: they need the bound
    exact = count(config) if choice is None else None
    if choice is not None:
        step("counting the trips of each user (for the bound)")
    histogram = None if choice is None else _trips_per_user(engine, points, choice, buckets, step)

    def draw() -> Release:
        cfg, drawn_plan = config, plan
        if choice is not None and histogram is not None:  # paid: the bound, then the counts
            cfg = config.at_bound(choose_bound(histogram, choice, config.bound_epsilon, r))
            drawn_plan = _plan_at_bound(cfg, plan)
            step(f"counting trips with at most {cfg.max_trips} per user")
        counts = exact if exact is not None else count(cfg)
        step("adding noise")
        results, tables = _release_all(counts, cfg, tiles, r, drawn_plan, levels)
        signal = report_signal(results, cfg.unit.value)
        release = header.drawn(
            tables,
            params=_params(cfg, drawn_plan, chosen=True),
            extra={
                "analyses": {
                    name: res.to_dict() | _mechanisms_of(name, drawn_plan)
                    for name, res in results.items()
                },
                "signal": signal,
                "tessellation": {
                    "ids": list(tiles.ids),
                    "names": list(tiles.names),
                    "lat": tiles.lat.tolist(),
                    "lng": tiles.lng.tolist(),
                    "outlines": tiles.outlines,
                },
            },
        )
        release.bounds = type(release.bounds).of(_bounds(cfg, chosen=True))
        return release

    return Draft(header, "DP mobility report", draw)


def _bounds(cfg: ReportConfig, *, chosen: bool) -> JSONObject:
    """The release's bounds: M (:data:`~privmob.releases.bound_choice.CHOSEN` until a bound
    chosen privately exists, and then its candidates beside it)."""
    m: JSON = cfg.max_trips if chosen else CHOSEN
    out: JSONObject = {"max_trips_per_user": m, "ends_per_trip": 2, **_cell_cap(cfg)}
    if cfg.bound_choice is not None:
        out["bound_candidates"] = [1, cfg.bound_choice.max_bound]
    return out


def _params(cfg: ReportConfig, plan: CompositionPlan | None, *, chosen: bool) -> JSONObject:
    """The release's parameters; before a bound chosen privately exists (``chosen`` False),
    nothing that depends on it (M, the bins of trips per user and tiles per user, each part's
    sensitivity and noise): those are stated in the release, at the bound chosen."""
    params = cfg.to_dict() | ({"mechanisms": plan.to_dict(at_bound=chosen)} if plan else {})
    if not chosen:
        params["max_trips_per_user"] = CHOSEN
        ranges = dict(json_object(params["ranges"]))
        for name, top in (("trips_per_user", "M + 1"), ("user_tile_count", "2 M + 1")):
            ranges[name] = f"1 to {top} by 1, M the bound chosen"
        params["ranges"] = ranges
    return params


def _plan_at_bound(cfg: ReportConfig, plan: CompositionPlan | None) -> CompositionPlan | None:
    """The composition plan at the bound chosen: the Gaussian parts, shares and costs of the
    plan charged (made at the largest candidate), the noise scaled to the bound's
    sensitivities."""
    if plan is None:
        return None
    at = plan_composition(cfg, plan.gaussian_parts)
    if at.cost_parts != plan.cost_parts:
        raise RuntimeError("the plan at the bound chosen costs what was not charged: a bug")
    return at


def _trips_per_user(
    engine: Engine,
    points: str | Loaded,
    choice: BoundChoice,
    buckets: int | None,
    step: Callable[[str], None],
) -> npt.NDArray[np.int64]:
    """Users per number of trips (as the bounding counts them: every trip with a uid and a
    tid; index min(n, cap + 1)), exact, over user buckets of a ``Loaded`` input."""

    def rows(view: str) -> str:
        return f"(SELECT DISTINCT uid, tid FROM {view} WHERE uid IS NOT NULL AND tid IS NOT NULL)"

    cap = choice.max_bound
    if isinstance(points, Loaded):
        return records_per_user(
            points, lambda part: rows(part.view), cap, buckets=buckets, step=step
        )
    return dense_counts(engine, per_user_histogram_sql(rows(points), cap), (cap + 2,))


mobility_report = through_the_gate(report_draft)


def _cell_cap(cfg: ReportConfig) -> JSONObject:
    """The OD cell cap among the bounds (none without one: the bounds are what they were)."""
    if cfg.od_cell_cap is None:
        return {}
    return {"od_flows_trips_per_user_per_cell": cfg.od_cell_cap}


def _zcdp_description(plan: CompositionPlan) -> JSONObject:
    """What the release's noise description says of its zCDP composition."""
    return {
        **({"kind": "discrete-laplace and discrete-gaussian"} if plan.gaussian else {}),
        "composition": "zcdp" if plan.gaussian else "pure (zCDP asked, no part gains)",
        "delta": plan.delta if plan.gaussian else 0.0,
        "rho": plan.rho,
        "conversion": CONVERSION,
        "gaussian_parts": [f"{c.part.analysis}/{c.part.part}" for c in plan.choices if c.gaussian],
    }


def _mechanisms_of(name: str, plan: CompositionPlan | None) -> JSONObject:
    """An analysis's parts in the composition plan (mechanism, sigma, rho, why); none when
    pure, so a pure report's metadata is what it was."""
    if plan is None:
        return {}
    own: JSONObject = {c.part.part: c.to_dict() for c in plan.choices if c.part.analysis == name}
    return {"mechanisms": own}


def report_signal(results: dict[str, an.AnalysisResult], unit: str) -> JSONObject:
    """Per count analysis, the share of noisy cells within their 95% margin of 0, and one
    warning naming the analyses where most are and no cell clears the noise floor, unless
    another analysis of the report clears its own: then the report has units enough and those
    cells are small or zero, said in a note (:func:`~privmob.privacy.signal.beside_signal`;
    noisy values and public margins only)."""
    from privmob.privacy.signal import SignalCheck, beside_signal, signal_check

    checks: dict[str, SignalCheck] = {}
    for name, res in results.items():
        values, margin = res.values.get("counts"), res.margin_of_error.get("counts")
        if values is None or margin is None:
            continue
        noise = _noise_of(res.noise.get("counts"))
        checks[name] = signal_check(np.asarray(values), int(margin), unit, noise)
    # an analysis without signal beside others with it counts something small or absent
    held = [name for name, c in checks.items() if c.above_noise_floor > 0]
    per: JSONObject = {
        name: beside_signal(c, [h for h in held if h != name]).to_dict()
        for name, c in checks.items()
    }
    noisy = [name for name, s in per.items() if json_object(s).get("warning")]
    warning = (
        f"most cells of {', '.join(noisy)} are within their 95% margin of 0: too few {unit}s "
        f"for {unit}-level statistics at this epsilon; read those analyses as noise"
        if noisy
        else None
    )
    return {"analyses": per, "warning": warning}


def _noise_of(described: JSON) -> Noise | None:
    """The Noise a result describes ({"kind", "scale"}), or None."""
    from privmob.privacy.mechanisms import Noise, NoiseKind

    if not isinstance(described, dict):
        return None
    try:
        kind, scale = described["kind"], described["scale"]
        if not isinstance(kind, str) or not isinstance(scale, int | float | str):
            return None
        return Noise(NoiseKind(kind), float(scale))
    except (KeyError, TypeError, ValueError):
        return None


def _release_all(
    exact: dict[str, npt.NDArray[np.int64]],
    cfg: ReportConfig,
    tiles: Tiles,
    rng: Randomness,
    plan: CompositionPlan | None = None,
    levels: OdLevels | None = None,
) -> tuple[dict[str, an.AnalysisResult], dict[str, pd.DataFrame]]:
    results: dict[str, an.AnalysisResult] = {}
    tables: dict[str, pd.DataFrame] = {}
    k = tiles.k

    def gaussian(name: str, part: str) -> Noise | None:
        return None if plan is None else plan.noise_for(name, part)

    for name in cfg.selected:
        eps = cfg.epsilon_for(name)
        if name == "dataset_statistics":
            g = {p: gaussian(name, p) for p in ("users", "trips")}
            res = an.dataset_statistics(exact["users"], exact["trip_kinds"], eps, cfg, rng, g)
            tables[name] = pd.DataFrame(
                {
                    "statistic": [*res.values],
                    "value": [*res.values.values()],
                    "margin_of_error_95": [res.margin_of_error.get(s) for s in res.values],
                }
            )
        elif an.is_distribution(name):
            hist = gaussian(name, "histogram")
            paid = (
                None if plan is None or hist is None else (hist, plan.part_cost(name, "histogram"))
            )
            res = an.distribution(name, exact[name], eps, cfg, rng, paid)
            v = res.values
            tables[name] = pd.DataFrame(
                {
                    "bin_lo": [*json_list(v["edges"])[:-1], None],
                    "bin_hi": [*json_list(v["edges"])[1:], None],
                    "count": [*json_list(v["counts"]), v["outliers"]],
                    "is_outliers": [False] * len(json_list(v["counts"])) + [True],
                }
            )
        elif name == "od_flows" and levels is not None:
            res = _od_flows_levels(exact[name], cfg, tiles, rng, levels, tables)
        else:
            noisy, res = an.counts(
                name,
                exact[name],
                eps,
                an.sensitivity(name, cfg),
                cfg,
                rng,
                gaussian(name, "counts"),
            )
            if name == "od_flows" and cfg.same_tile != "include":
                noisy[: k * k : k + 1] = 0  # the diagonal is not released (od's same-tile rule)
            res.name = name
            tables[name] = _count_table(name, noisy, cfg, tiles, k)
            res.values = _count_values(name, noisy, cfg, k)
        results[name] = res
    return results, tables


def _od_flows_levels(
    exact: npt.NDArray[np.int64],
    cfg: ReportConfig,
    tiles: Tiles,
    rng: Randomness,
    levels: OdLevels,
    tables: dict[str, pd.DataFrame],
) -> an.AnalysisResult:
    """od_flows over a hierarchy (:mod:`.levels`): its table of consistent estimates with
    their margins, and a table per coarser level (also in the metadata)."""
    from .levels import od_flows_levels

    name, k = "od_flows", tiles.k
    fine, res, coarse, columns = od_flows_levels(exact, cfg, levels, rng)
    table = _count_table(name, fine, cfg, tiles, k)
    for column, values in columns.items():
        table[column] = values
    tables[name] = table
    tables.update(coarse)
    res.name = name
    by_level: JSONObject = {
        t: {str(c): df[c].tolist() for c in df.columns} for t, df in coarse.items()
    }
    res.values = {
        **_count_values(name, fine, cfg, k),
        "outliers": int(fine[-1]),
        "levels": by_level,
        **res.values,
    }
    return res


def _count_values(
    name: str, noisy: npt.NDArray[np.int64] | npt.NDArray[np.float64], cfg: ReportConfig, k: int
) -> JSONObject:
    v = noisy.tolist()
    if name == "trips_over_time":
        outliers = v.pop()  # the list itself, not a copy of all but its last (od_flows: 4M)
        return {"counts": v, "outliers": outliers, "resolution": cfg.time_resolution}
    if name in ("visits_per_tile", "od_flows", "visits_per_time_tile"):
        outliers = v.pop()
        return {"counts": v, "outliers": outliers}
    return {"counts": v}


def _count_table(
    name: str,
    noisy: npt.NDArray[np.int64] | npt.NDArray[np.float64],
    cfg: ReportConfig,
    tiles: Tiles,
    k: int,
) -> pd.DataFrame:
    if name == "missing_values":
        return pd.DataFrame({"column": list(MISSING_COLUMNS), "trips_with_missing": noisy})
    if name == "trips_over_time":
        starts = [t.date().isoformat() for t in time_bins(cfg)]
        return pd.DataFrame({"bin_start": [*starts, "outside period"], "trips": noisy})
    if name == "trips_per_weekday":
        return pd.DataFrame({"weekday": list(WEEKDAYS), "trips": noisy})
    if name == "trips_per_hour":
        idx = np.arange(96)
        return pd.DataFrame(
            {
                "end": np.where(idx // 48 == 1, "end", "start"),
                "day_type": np.where((idx // 24) % 2 == 1, "weekend", "weekday"),
                "hour": idx % 24,
                "trips": noisy,
            }
        )
    if name == "visits_per_tile":
        return pd.DataFrame({"tile_id": [*tiles.ids, "outliers"], "visits": noisy})
    if name == "visits_per_time_tile":
        nw = len(cfg.time_windows)
        idx = np.arange(k * 2 * nw)
        labels = np.array(cfg.window_labels)
        return pd.DataFrame(
            {
                "tile_id": [*np.array(tiles.ids)[idx // (2 * nw)].tolist(), "outliers"],
                "day_type": [*np.where((idx // nw) % 2 == 1, "weekend", "weekday"), None],
                "time_window": [*labels[idx % nw].tolist(), None],
                "visits": noisy,
            }
        )
    if name == "od_flows":
        # the k labels and "outliers" as Python objects once, each cell's origin and
        # destination a reference to one of them: a list of a new string per cell took about
        # 0.5 GB for the 4 million cells of 2,000 tiles (the same column values either way)
        labels = np.empty(k + 1, dtype=object)
        labels[:k] = np.array(tiles.ids).tolist()
        labels[k] = "outliers"
        idx = np.arange(k * k)
        if cfg.same_tile != "include":  # the diagonal is not released
            idx = idx[idx // k != idx % k]
        noisy = np.concatenate([noisy[idx], noisy[-1:]])
        return pd.DataFrame(  # the three new arrays as they are (a copy: 0.1 GB more)
            {
                "origin": labels[np.append(idx // k, k)],
                "destination": labels[np.append(idx % k, k)],
                "trips": noisy,
            },
            copy=False,
        )
    raise KeyError(name)
