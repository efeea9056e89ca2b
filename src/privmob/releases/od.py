"""Private origin-destination matrices (SPEC 4.1; seed 003, Algorithm 1).

Data flow: trips → (user-level) keep at most T trips per user → exact counts over the public
domain (every ordered pair of distinct tiles in every period, plus outliers cells) → noise on
every cell, zeros included → (optional) suppress below tau → charge the ledger → output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.domain import Period
from privmob.engine.base import dense_counts
from privmob.engine.buckets import counts_by_user_buckets, root
from privmob.engine.relation import Loaded
from privmob.errors import ConfigError
from privmob.prepare.bounding import bound_per_user, fresh_key
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.postprocess import check_tau, suppress
from privmob.privacy.postprocess import describe as describe_post
from privmob.privacy.samplers import Randomness, resolve
from privmob.privacy.signal import expected_signal, signal_check
from privmob.releases.base import Accountant
from privmob.releases.kinds import same_tile_flag
from privmob.releases.release import Release
from privmob.releases.tiles import check_shape, check_tessellation

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

Step = Callable[[str], None]


@dataclass(frozen=True)
class ODDomain:
    """The public domain: ``n_periods`` x k x k OD cells, one outliers cell per period (an end
    outside the tessellation) and one for trips outside the declared study period. Fixed from
    public parameters only. ``same_tile``: the diagonal (trips that start and end in one tile)
    is released; by default it is not (:data:`SAME_TILE_RULES`)."""

    k: int
    n_periods: int
    same_tile: bool = False

    @property
    def od_cells(self) -> int:
        """The released OD cells (without the outliers cells)."""
        return self.n_periods * self.k * (self.k - (0 if self.same_tile else 1))

    @property
    def od_size(self) -> int:
        return self.n_periods * self.k * self.k

    @property
    def size(self) -> int:
        return self.od_size + self.n_periods + 1

    @property
    def released_cells(self) -> int:
        return self.od_cells + self.n_periods + 1

    def released_mask(self) -> np.ndarray:
        mask = np.ones(self.size, dtype=bool)
        if self.same_tile:
            return mask
        diag = np.zeros((self.n_periods, self.k, self.k), dtype=bool)
        diag[:, np.arange(self.k), np.arange(self.k)] = True
        mask[: self.od_size] = ~diag.ravel()
        return mask

    def cell_sql(self, period: str, origin: str, destination: str) -> str:
        """SQL: the flat cell index of a trip, or -1 for a trip within one tile (not released)."""
        k, n = self.k, self.n_periods
        same = "" if self.same_tile else f"WHEN {origin} = {destination} THEN -1 "
        return (
            f"CASE WHEN {period} < 0 THEN {self.od_size + n} "
            f"WHEN {origin} < 0 OR {destination} < 0 THEN {self.od_size} + {period} "
            f"{same}"
            f"ELSE {period} * {k * k} + {origin} * {k} + {destination} END"
        )


def od_matrix(
    trips: Loaded,
    *,
    tessellation: Tessellation,
    epsilon: float,
    accountant: Accountant,
    unit: PrivacyUnit | str = PrivacyUnit.USER,
    max_trips: int | None = None,
    tau: int | None = None,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    period: Period | None = None,
    bound_per: str = "release",
    rng: Randomness | int | None = None,
    step: Step | None = None,
    buckets: int | None = None,
    plan: ODPlan | None = None,
    same_tile: str = "exclude",
) -> Release:
    """A differentially private origin-destination matrix, per period.

    Guarantee: with ``unit="user"`` each user keeps at most ``max_trips`` trips (uniformly at
    random, by a keyed hash with a fresh key), so adding or removing one user changes the
    counts by at most T in L1 (and L2) norm; every cell of the public domain gets independent
    noise of scale T/epsilon (discrete Laplace: epsilon-DP; discrete Gaussian: (epsilon,
    delta)-DP via zCDP). With ``bound_per="release"`` (default) the bound T holds over the whole
    release and the whole release costs epsilon. With ``bound_per="period"`` each user keeps T
    trips in every period; each period (and the out-of-period outliers cell) then costs epsilon
    and the ledger is charged once per period. With ``unit="trip"`` the guarantee is per trip
    (a user with g trips loses g x epsilon); if the accountant states a ``group_size`` g (to
    charge g x epsilon to a user-level budget), each user keeps at most g trips (same keyed
    sampling), so that charge rests on an enforced bound, not on a claim about the data.
    Suppression below ``tau`` reads only noisy values (post-processing). Default (``tau``
    None): the noisy integers as drawn, negative values kept, so every cell and every total is
    unbiased; ``tau = 0`` clamps negative counts to 0 and ``tau > 0`` suppresses below tau,
    both of which inflate totals (the expected bias is stated in ``params.post_processing``).
    ``same_tile``: trips within one tile are left out (``"exclude"``, default) or released on
    the diagonal (``"include"``); the same rule as the report's ``od_flows``.

    Out of core: ``buckets`` (default: sized to the engine's memory limit) splits the users by
    a hash of the user id and sums the bucket counts; bounding stays exact per user.

    ``plan``: the :func:`plan_od` of these same parameters, when the caller already made it
    (computed once, reused).
    """
    step = step or (lambda _msg: None)
    r = resolve(rng)
    period = period or Period()
    check_tessellation(trips, tessellation)
    check_shape(
        trips,
        "trips",
        "OD matrix",
        "build trips first: privmob.prepare.inputs.load_trips_any (any shape) or "
        "trips_from_points, or use privmob.Session, which resolves the input's shape once",
    )
    plan = plan or plan_od(
        epsilon=epsilon,
        unit=unit,
        max_trips=max_trips,
        tau=tau,
        noise=noise,
        delta=delta,
        period=period,
        bound_per=bound_per,
    )
    unit, t_bound, noise_dist, cost_each, parts, total = (
        plan.unit,
        plan.t_bound,
        plan.noise,
        plan.cost_each,
        plan.parts,
        plan.total,
    )
    domain = ODDomain(tessellation.k, period.n_bins, same_tile_flag(same_tile))
    labels = period.labels()
    accountant.precheck(total)  # refuse before reading any data

    # trip level charged to a user budget by group privacy: enforce the stated group size
    group = accountant.group_size if unit is PrivacyUnit.TRIP else None
    if group is not None and (int(group) != group or group < 1):
        raise ConfigError(f"--group-size must be a whole number >= 1, got {group}")

    mask = domain.released_mask()
    # the noise reads no data (public scale, public domain): drawn while the engine counts
    add_noise = noise_dist.add_later(int(mask.sum()), r)
    step("counting trips over the public domain")
    counts = exact_counts(
        trips,
        domain=domain,
        period=period,
        unit=PrivacyUnit.USER if group is not None else unit,
        max_trips=int(group) if group is not None else t_bound,
        bound_per="release" if group is not None else bound_per,
        rng=r,
        buckets=buckets,
        step=step,
    )
    step(f"adding {noise_dist.kind} noise to {domain.released_cells:,} cells")
    noisy = np.zeros(domain.size, dtype=np.int64)
    noisy[mask] = add_noise(counts[mask])
    published = suppress(noisy, tau) * mask
    n_cells = domain.od_cells
    margin = noise_dist.margin_of_error(0.95)
    # from the published (noisy) OD cells and the public margin only: post-processing
    signal = signal_check(
        published[: domain.od_size][mask[: domain.od_size]], margin, unit, noise_dist
    )

    od = published[: domain.od_size].reshape(domain.n_periods, domain.k, domain.k)
    tables = {
        "od": od_table(od, tessellation.tile_ids, labels, same_tile=domain.same_tile),
        "outliers": outliers_table(published[domain.od_size :], labels),
    }
    release = Release(
        kind="od",
        cost=total,
        unit=unit,
        bounds={
            "max_trips_per_user": t_bound if unit is PrivacyUnit.USER else None,
            "bound_per": bound_per if unit is PrivacyUnit.USER else None,
            **({"group_size_enforced": int(group)} if group is not None else {}),
        },
        noise={
            **noise_dist.to_dict(),
            "l1_sensitivity": t_bound,
            "margin_of_error_95": noise_dist.margin_of_error(0.95),
        },
        params={
            "epsilon": epsilon,
            "delta": delta,
            "tau": tau,
            "post_processing": describe_post(noise_dist, tau, n_cells),
            "expected_signal": expected_signal(noise_dist).to_dict(),
            "signal": signal.to_dict(),
            "period": period.to_dict(),
            "epsilon_per_part": cost_each.epsilon,
        },
        domain={
            "tiles": domain.k,
            "periods": domain.n_periods,
            "od_cells": domain.od_cells,
            "outlier_cells": domain.n_periods + 1,
            "diagonal": "released" if domain.same_tile else "not released",
        },
        tables=tables,
        for_publication=r.for_publication,
        cost_parts=parts,
    )
    step(accountant.closing_step)
    accountant.charge(release, description=f"OD matrix, {domain.n_periods} period(s)")
    return release


@dataclass(frozen=True)
class ODPlan:
    """What an OD release will cost, from its public parameters only."""

    unit: PrivacyUnit
    t_bound: int
    noise: Noise
    cost_each: Cost
    parts: list[tuple[str, Cost]]
    total: Cost


def plan_od(
    *,
    epsilon: float,
    unit: PrivacyUnit | str = PrivacyUnit.USER,
    max_trips: int | None = None,
    tau: int | None = None,
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    delta: float = 0.0,
    period: Period | None = None,
    bound_per: str = "release",
) -> ODPlan:
    """Check the parameters and compute the noise and ledger parts (no data is read)."""
    unit = PrivacyUnit(unit)
    period = period or Period()
    if unit not in (PrivacyUnit.USER, PrivacyUnit.TRIP):
        raise ConfigError(f"the OD release protects a user or a trip, not a {unit}")
    if unit is PrivacyUnit.USER:
        if max_trips is None:
            raise ConfigError(
                "user-level privacy needs --max-trips T, the most trips counted per user",
                hint="T is a public bound, never taken from the data; it sets the noise scale",
            )
        if int(max_trips) != max_trips or max_trips < 1:
            raise ConfigError(f"--max-trips must be a whole number >= 1, got {max_trips}")
        t_bound = int(max_trips)
    else:
        if max_trips not in (None, 1):
            raise ConfigError(
                "trip-level releases count every trip once (T = 1)",
                hint="drop --max-trips or use --unit user",
            )
        t_bound = 1
    if bound_per not in ("release", "period"):
        raise ConfigError(f"unknown bound scope '{bound_per}'", hint="use release or period")
    check_tau(tau)
    noise_dist, cost_each = calibrate(
        noise, epsilon, l1_sensitivity=t_bound, l2_sensitivity=t_bound, delta=delta, unit=unit
    )
    if bound_per == "period" and unit is PrivacyUnit.USER:
        parts = [(f"period {lab}", cost_each) for lab in period.labels()]
        if period.declared:  # undeclared: no trip can be outside, that cell reads no data
            parts.append(("trips outside the study period (outliers)", cost_each))
    else:
        parts = [("all periods", cost_each)]
    total = parts[0][1]
    for _, c in parts[1:]:
        total = total + c
    return ODPlan(unit, t_bound, noise_dist, cost_each, parts, total)


def exact_counts(
    trips: Loaded,
    *,
    domain: ODDomain,
    period: Period,
    unit: PrivacyUnit,
    max_trips: int,
    bound_per: str = "release",
    rng: Randomness | None = None,
    buckets: int | None = None,
    step: Step | None = None,
) -> np.ndarray:
    """Exact bounded counts over the flat domain (no noise: never publish these).

    Users are split into ``buckets`` hash buckets (default: as many as the engine's memory
    limit needs, see :mod:`privmob.engine.buckets`); each user lies in one bucket, so the sum
    of bucket counts equals the single-pass counts.
    """
    return counts_by_user_buckets(
        trips,
        lambda part: _exact_counts_one(
            part,
            domain=domain,
            period=period,
            unit=unit,
            max_trips=max_trips,
            bound_per=bound_per,
            rng=rng,
        ),
        "counting trips",
        buckets=buckets,
        step=step,
        # trips from events need only these event columns (the spilled buckets hold no more)
        columns=("uid", "time", "tile") if root(trips).shape == "events" else None,
    )


def _exact_counts_one(
    trips: Loaded,
    *,
    domain: ODDomain,
    period: Period,
    unit: PrivacyUnit,
    max_trips: int,
    bound_per: str,
    rng: Randomness | None,
) -> np.ndarray:
    engine = trips.engine
    d = engine.dialect
    binned = (
        f"(SELECT uid, tid, origin, destination, "
        f"{period.bin_sql('start_time', d)} AS period FROM {trips.view})"
    )
    if unit is PrivacyUnit.USER:
        partition = ("period",) if bound_per == "period" else ()
        rows = (
            "("
            + bound_per_user(
                binned, max_units=max_trips, key=fresh_key(rng), dialect=d, partition=partition
            )
            + ")"
        )
    else:
        rows = binned
    cell = domain.cell_sql("period", "origin", "destination")
    sql = (
        f"SELECT cell AS i0, count(*) AS n FROM (SELECT {cell} AS cell FROM {rows} AS r_) "
        "AS c_ WHERE cell >= 0 GROUP BY cell"
    )
    return dense_counts(engine, sql, (domain.size,))


def od_table(
    od: np.ndarray, tile_ids: list[Any], labels: list[str], *, same_tile: bool = False
) -> pd.DataFrame:
    """Long table (period, origin, destination, count) over every off-diagonal cell (and the
    diagonal with ``same_tile``).

    ``origin`` and ``destination`` hold the tile ids with their type (int64 or string).

    Rows are ordered by period, origin, destination. The label columns are built by Arrow
    ``take`` from the public labels (pandas' string dtype is Arrow-backed): a daily 263-zone
    matrix has 1.9M rows, and converting 3 x 1.9M Python strings cost seconds.
    """
    import pyarrow as pa

    n, k, _ = od.shape
    o, dst = np.divmod(np.arange(k * k, dtype=np.int64), k)
    off = np.ones(k * k, dtype=bool) if same_tile else o != dst
    per_period = int(off.sum())
    index = {
        "period": np.repeat(np.arange(n, dtype=np.int64), per_period),
        "origin": np.tile(o[off], n),
        "destination": np.tile(dst[off], n),
    }
    # tile ids keep their type (int ids stay int64, so a merge with the tessellation works)
    ids = pa.array(tile_ids) if tile_ids else pa.array([], pa.large_string())
    if pa.types.is_string(ids.type):
        ids = ids.cast(pa.large_string())
    names = {"period": pa.array([str(x) for x in labels], pa.large_string()), "origin": ids}
    names["destination"] = names["origin"]
    columns: dict[str, Any] = {
        col: pd.Series(names[col].take(pa.array(idx)).to_pandas()) for col, idx in index.items()
    }
    columns["count"] = od.reshape(n, k * k)[:, off].ravel().astype(np.int64)
    return pd.DataFrame(columns)


def outliers_table(values: np.ndarray, labels: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "period": [*labels, "outside study period"],
            "cell": ["end outside the tessellation"] * len(labels) + ["start outside the period"],
            "count": values.astype(np.int64),
        }
    )


def noise_for(
    kind: NoiseKind | str, epsilon: float, max_trips: int, delta: float = 0.0
) -> tuple[Noise, Cost]:
    """The noise and cost of one OD period (for planning tools)."""
    return calibrate(kind, epsilon, l1_sensitivity=max_trips, l2_sensitivity=max_trips, delta=delta)
