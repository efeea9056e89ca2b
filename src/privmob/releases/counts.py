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
``period`` (the bins of the declared period), ``hour`` (of day), ``weekday``,
``duration:0,5,15,60`` (trip minutes), ``distance:0,1,2,5`` (trip km), ``bin:1h`` and a
categorical column with declared values (``usertype:Subscriber,Customer``): the vocabulary is
:mod:`privmob.releases.dimensions`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.domain import StudyPeriod
from privmob.engine.base import dense_counts
from privmob.errors import ConfigError
from privmob.prepare.bounding import bound_per_user, fresh_key
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.privacy.signal import signal_check
from privmob.releases.base import Accountant
from privmob.releases.dimensions import SOURCES, Dimension, dimension, measures
from privmob.releases.release import Release

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation


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
    period: StudyPeriod = field(default_factory=StudyPeriod)
    kind: str = "counts"
    #: a dimension's column: each user keeps at most ``bound`` records per label of it (the
    #: records outside the domain one more group), not in all (a zone series' bins)
    bound_per: str | None = None

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
        b = self.sensitivity
        return calibrate(
            self.noise, self.epsilon, l1_sensitivity=b, l2_sensitivity=b, delta=self.delta
        )

    @property
    def sensitivity(self) -> int:
        """L1 (and L2) sensitivity of the count vector: ``bound``, or with ``bound_per`` the
        bound times the groups it applies to (the labels of that dimension, and one for the
        records outside it: all of a user's groups can land in the outliers cell)."""
        per = [len(d.labels) + 1 for d in self.dimensions if d.column == self.bound_per]
        return int(self.bound) * (per[0] if per else 1)

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


def exact_counts(
    data: Any,
    spec: CountSpec,
    *,
    key: int,
    step: Callable[[str], None],
    columns: tuple[str, ...] | None = None,
    buckets: int | None = None,
) -> np.ndarray:
    """Exact bounded counts of every cell of ``spec``'s domain, the outliers cell last (never
    publish these: they are the input of the noise). Each user keeps at most ``spec.bound``
    records (in all, or per label of ``spec.bound_per``), chosen by a keyed hash under ``key``.
    Out of core: with a memory limit on the engine the users are split into hash buckets
    (:mod:`privmob.engine.buckets`; ``columns``: the input columns kept in them, default
    all; ``buckets``: their number, default as the memory limit needs); the bounding is per
    user, so the summed bucket counts equal one pass's."""
    from privmob.engine.buckets import counts_by_user_buckets

    time, unit_columns = SOURCES[spec.records]
    size = int(np.prod(spec.shape)) + 1
    per = [d for d in spec.dimensions if d.column == spec.bound_per]
    if spec.bound_per is not None and not per:
        raise ConfigError(f"the bound is per {spec.bound_per}, which is not a dimension")

    def count(part: Any) -> np.ndarray:
        d, relation = part.engine.dialect, part.view
        if per:  # the label of the bound's dimension (negative or NULL: one more group)
            k = 0 if spec.tessellation is None else spec.tessellation.k
            relation = f"(SELECT *, {per[0].sql(time, d, k)} AS _pm_per FROM {part.view})"
        rows = bound_per_user(
            relation,
            max_units=int(spec.bound),
            key=key,
            dialect=d,
            unit=unit_columns,
            partition=("_pm_per",) if per else (),
        )
        sql = (
            f"SELECT cell AS i0, count(*) AS n FROM (SELECT {cell_sql(spec, d)} AS cell "
            f"FROM ({rows}) AS r_) AS c_ GROUP BY cell"
        )
        return dense_counts(part.engine, sql, (size,))

    step(f"counting {spec.records} over {size:,} public cells")
    return counts_by_user_buckets(
        data, count, f"counting {spec.records}", buckets=buckets, step=step, columns=columns
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
    exact = exact_counts(data, spec, key=fresh_key(r), step=step)
    step(f"adding {noise.kind} noise to {size:,} cells")
    noisy = noise.add(exact, r).astype(np.int64)
    margin = noise.margin_of_error(0.95)
    index = pd.MultiIndex.from_product([d_.labels for d_ in spec.dimensions])
    table = index.to_frame(index=False, name=[d_.column for d_ in spec.dimensions])
    table["count"] = noisy[:-1]
    release = Release(
        kind=spec.kind,
        cost=cost,
        unit=Unit.USER,
        bounds={
            "max_records_per_user": int(spec.bound),
            "records": spec.records,
            **({"per": spec.bound_per} if spec.bound_per else {}),
        },
        noise={**noise.to_dict(), "l1_sensitivity": spec.sensitivity, "margin_of_error_95": margin},
        params={
            "epsilon": spec.epsilon,
            "delta": spec.delta,
            "by": list(spec.by),
            "period": spec.period.to_dict(),
            "post_processing": "noisy integers as drawn (unbiased; negative values kept)",
            "signal": signal_check(noisy[:-1], margin, Unit.USER).to_dict(),
            **measures(spec.dimensions, data),  # what a measured dimension was (distance)
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
