"""The count-release template: a bounded count of records grouped by public dimensions.

A count kind supplies only what is its own: which records it counts (trips, trip points or
events) and the dimensions it groups by (:class:`Dimension`); the template owns the rest, in
the order of every release:

public domain (the product of the dimensions' declared labels, plus one outliers cell) ->
cost and precheck before any data is read -> each user keeps at most ``bound`` records (keyed
random sample in the engine) -> exact counts in the engine -> noise on every cell (discrete
Laplace or Gaussian, scale from the enforced bound) -> the table -> charge (the session's
lifecycle binds the input first and publishes after: stage, charge, rename, stamp).

Guarantee: adding or removing one user changes at most ``bound`` records, each in one cell,
so the L1 and L2 sensitivity of the count vector is at most ``bound``; every cell of the public
domain gets independent noise calibrated to it: epsilon-DP per user (discrete Laplace) or
(epsilon, delta)-DP (discrete Gaussian). Nothing in the domain is read from the data.

:func:`dimension` reads the dimension vocabulary of ``Session.counts`` and ``privmob counts``:
``origin``, ``destination`` (trips), ``tile`` (the visited tile of trip points or events),
``period`` (the bins of the declared period), ``hour`` (of day), ``weekday`` and
``duration:0,5,15,60`` (trip minutes, bins between declared edges).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.domain import Period
from privmob.engine.base import dense_counts
from privmob.errors import ConfigError
from privmob.prepare.bounding import bound_per_user, fresh_key
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.privacy.signal import signal_check
from privmob.releases.base import Accountant
from privmob.releases.release import Release

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

#: what a count release counts: its records' time column and the columns that tell two
#: records of one user apart (for the per-user bound)
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "trips": ("start_time", ("tid",)),
    "trip-points": ("time", ("tid", "time")),
    "events": ("time", ("time", "tile")),
}
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class Dimension:
    """One public dimension: its output ``column``, its declared ``labels`` and ``sql``, which
    maps a record (its time column, the dialect, the number of tiles) to 0..len(labels)-1, or
    to a negative value for a record outside the domain (counted in the outliers cell)."""

    column: str
    labels: tuple[Any, ...]
    sql: Callable[[str, Any, int], str] = field(compare=False)
    sources: tuple[str, ...] = tuple(SOURCES)


def _tile(column: str) -> Callable[[str, Any, int], str]:
    return lambda _t, _d, k: f"CASE WHEN {column} >= 0 AND {column} < {k} THEN {column} ELSE -1 END"


def _bins(
    edges: Sequence[float], expr: Callable[[str, Any], str]
) -> Callable[[str, Any, int], str]:
    def sql(time: str, dialect: Any, _k: int) -> str:
        x = expr(time, dialect)
        arms = " ".join(
            f"WHEN {x} >= {lo!r} AND {x} < {hi!r} THEN {i}"
            for i, (lo, hi) in enumerate(itertools.pairwise(edges))
        )
        return f"CASE {arms} ELSE -1 END"

    return sql


def _minutes(_time: str, d: Any) -> str:
    return f"(({d.epoch_seconds('end_time')} - {d.epoch_seconds('start_time')}) / 60.0)"


def dimension(spec: str, tile_ids: Sequence[Any], period: Period) -> Dimension:
    """The dimension named by ``spec`` (see the module's docstring), over public labels."""
    name, _, arg = spec.partition(":")
    tiles = tuple(tile_ids)
    if name in ("origin", "destination"):
        return Dimension(name, tiles, _tile(name), ("trips",))
    if name == "tile":
        return Dimension("tile", tiles, _tile("tile"), ("trip-points", "events"))
    if name == "period":
        return Dimension("period", tuple(period.labels()), lambda t, d, _k: period.bin_sql(t, d))
    if name == "hour":
        return Dimension("hour", tuple(range(24)), lambda t, d, _k: d.hour(t))
    if name == "weekday":
        return Dimension("weekday", WEEKDAYS, lambda t, d, _k: d.weekday(t))
    if name == "duration":
        edges = _edges(arg, spec)
        labels = tuple(f"[{lo:g}, {hi:g}) min" for lo, hi in itertools.pairwise(edges))
        return Dimension("duration", labels, _bins(edges, _minutes), ("trips",))
    raise ConfigError(
        f"unknown count dimension {spec!r}",
        hint="use origin, destination, tile, period, hour, weekday or duration:EDGES "
        "(minutes, e.g. duration:0,5,15,60)",
    )


def _edges(text: str, spec: str) -> list[float]:
    try:
        edges = [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"cannot read the bin edges of {spec!r}") from exc
    if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ConfigError(
            f"{spec!r}: give at least two increasing edges", hint="e.g. duration:0,5,15,60"
        )
    if not all(math.isfinite(e) for e in edges):
        raise ConfigError(f"{spec!r}: the edges must be finite numbers")
    return edges


@dataclass(frozen=True)
class CountSpec:
    """A count release (the template's spec): ``records`` counted (a key of :data:`SOURCES`),
    grouped by ``by`` (dimension names), at most ``bound`` records per user."""

    tessellation: Tessellation | None
    epsilon: float
    records: str
    by: tuple[str, ...]
    bound: int
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE
    delta: float = 0.0
    period: Period = field(default_factory=Period)
    kind: str = "counts"

    @cached_property
    def dimensions(self) -> tuple[Dimension, ...]:
        if self.records not in SOURCES:
            raise ConfigError(
                f"unknown records {self.records!r}", hint=f"count one of {', '.join(SOURCES)}"
            )
        if not self.by:
            raise ConfigError("give at least one dimension to count by", hint="e.g. by=['hour']")
        ids = [] if self.tessellation is None else list(self.tessellation.tile_ids)
        dims = tuple(dimension(s, ids, self.period) for s in self.by)
        for d in dims:
            if self.records not in d.sources:
                raise ConfigError(
                    f"{d.column} is not a dimension of {self.records}",
                    hint=f"{d.column} exists for {', '.join(d.sources)}",
                )
            if not d.labels:
                raise ConfigError(f"{d.column} needs a tessellation (its tiles are its labels)")
        if len({d.column for d in dims}) != len(dims):
            raise ConfigError("a dimension is given twice")
        return dims

    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(d.labels) for d in self.dimensions)

    @cached_property
    def calibrated(self) -> tuple[Noise, Cost]:
        if int(self.bound) != self.bound or self.bound < 1:
            raise ConfigError(f"the bound per user must be a whole number >= 1, got {self.bound}")
        b = int(self.bound)
        return calibrate(
            self.noise, self.epsilon, l1_sensitivity=b, l2_sensitivity=b, delta=self.delta
        )

    def public_period(self) -> dict[str, object]:
        """The declared period (public)."""
        return self.period.to_dict()

    @property
    def same_tile_rule(self) -> str:
        """What happens to a trip that starts and ends in one tile."""
        return "counted as any trip (origin and destination are each a dimension of their own)"

    def plan(self) -> Any:
        from privmob.releases.specs import Plan, domain_memory

        noise, cost = self.calibrated
        cells = int(np.prod(self.shape)) + 1
        return Plan(
            kind=self.kind,
            cost=cost,
            cells=cells,
            memory_bytes=domain_memory(cells, cells),
            output_rows=cells - 1,
            margin_of_error_95=float(noise.margin_of_error(0.95)),
            noise=str(noise.kind),
        )

    def run(
        self,
        data: Any,
        accountant: Accountant,
        *,
        rng: Randomness | int | None,
        progress: Callable[[str], None],
    ) -> Release:
        return count_release(data, self, accountant, rng=rng, step=progress)


def cell_sql(spec: CountSpec, dialect: Any) -> str:
    """SQL: the flat cell of a record (row-major over the dimensions; the outliers cell, the
    last, for a record outside the period or outside any dimension)."""
    time, _ = SOURCES[spec.records]
    k = 0 if spec.tessellation is None else spec.tessellation.k
    parts = [f"({d.sql(time, dialect, k)})" for d in spec.dimensions]
    outside = " OR ".join([f"{p} < 0" for p in parts] + [f"{p} IS NULL" for p in parts])
    in_period = spec.period.bin_sql(time, dialect)
    strides = np.cumprod([1, *spec.shape[::-1]])[:-1][::-1]
    flat = " + ".join(f"{p} * {int(s)}" for p, s in zip(parts, strides, strict=True))
    size = int(np.prod(spec.shape))
    return (
        f"CASE WHEN ({in_period}) < 0 OR ({in_period}) IS NULL OR {outside} THEN {size} "
        f"ELSE {flat} END"
    )


def count_release(
    data: Any,
    spec: CountSpec,
    accountant: Accountant,
    *,
    rng: Randomness | int | None = None,
    step: Callable[[str], None] | None = None,
) -> Release:
    """Run the template (see the module's docstring) on loaded ``data`` (``records`` shape)."""
    step = step or (lambda _m: None)
    r = resolve(rng)
    noise, cost = spec.calibrated
    size = int(np.prod(spec.shape)) + 1
    accountant.precheck(cost)  # before any data is read
    engine = data.engine
    d = engine.dialect
    _, unit_columns = SOURCES[spec.records]
    rows = bound_per_user(
        data.view, max_units=int(spec.bound), key=fresh_key(r), dialect=d, unit=unit_columns
    )
    sql = (
        f"SELECT cell AS i0, count(*) AS n FROM (SELECT {cell_sql(spec, d)} AS cell "
        f"FROM ({rows}) AS r_) AS c_ GROUP BY cell"
    )
    step(f"counting {spec.records} over {size:,} public cells")
    exact = dense_counts(engine, sql, (size,))
    step(f"adding {noise.kind} noise to {size:,} cells")
    noisy = noise.add(exact, r).astype(np.int64)
    margin = noise.margin_of_error(0.95)
    index = pd.MultiIndex.from_product([d_.labels for d_ in spec.dimensions])
    table = index.to_frame(index=False, name=[d_.column for d_ in spec.dimensions])
    table["count"] = noisy[:-1]
    release = Release(
        kind=spec.kind,
        cost=cost,
        unit=PrivacyUnit.USER,
        bounds={"max_records_per_user": int(spec.bound), "records": spec.records},
        noise={**noise.to_dict(), "l1_sensitivity": int(spec.bound), "margin_of_error_95": margin},
        params={
            "epsilon": spec.epsilon,
            "delta": spec.delta,
            "by": list(spec.by),
            "period": spec.period.to_dict(),
            "post_processing": "noisy integers as drawn (unbiased; negative values kept)",
            "signal": signal_check(noisy[:-1], margin, PrivacyUnit.USER).to_dict(),
        },
        domain={
            "dimensions": {d_.column: len(d_.labels) for d_ in spec.dimensions},
            "cells": size - 1,
            "outlier_cells": 1,
        },
        tables={
            "counts": table,
            "outliers": pd.DataFrame(
                {"cell": ["outside the period or a dimension"], "count": noisy[-1:]}
            ),
        },
        for_publication=r.for_publication,
    )
    step("charging the privacy ledger")
    accountant.charge(release, description=f"{spec.kind}: {spec.records} by {', '.join(spec.by)}")
    return release
