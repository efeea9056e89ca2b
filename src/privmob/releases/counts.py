"""The count-release template: a bounded count of records grouped by public dimensions.

A count kind (:class:`CountKind`) supplies only what is its own: the records it counts and how
they are read, its public domain (:class:`CountDomain`: its dimensions, its outliers cells, a
diagonal it does not release), its per-user bound as the engine enforces it
(:class:`EnforcedBound`) and what it publishes from the noisy cells (tables, post-processing,
metadata). :class:`CountSpec` (``privmob counts``),
``od`` (:class:`privmob.releases.od.OdSpec`), ``population``
(:class:`privmob.releases.population.PopulationSpec`) and ``series-counts``
(:class:`privmob.releases.landmark_counts.ZoneSeriesSpec`) are such kinds. The template
(:func:`count_release`) owns the rest, in the order of every release:

public domain -> cost and precheck before any data is read -> each user keeps at most
``bound`` records (keyed random sample in the engine, per user bucket under a memory limit)
-> exact counts in the engine -> a :class:`~privmob.releases.gate.Draft` -> (the one gate:
the charge of every part of the cost, committed) -> the noise step -> the kind's tables
(the session's lifecycle binds the input first and publishes after: stage, seal, rename).

The noise step is, by default, :class:`CellNoise`: noise on every released cell, in flat
order (discrete Laplace or Gaussian, scale from the enforced bound). A kind may calibrate its
own :class:`NoiseStep` instead: the zone series
(:class:`privmob.releases.landmark_counts.ZoneSeriesSpec`) noises its zone x bin cells with the
landmark series mechanism and its outliers cell with a budget of its own, a cost of two parts
(two ledger entries, :attr:`Release.cost_parts`).

Guarantee: adding or removing one user changes at most ``bound`` records, each in one cell,
so the L1 and L2 sensitivity of the count vector is at most ``bound``; every cell of the public
domain gets independent noise calibrated to it: epsilon-DP per user (discrete Laplace) or
(epsilon, delta)-DP (discrete Gaussian). Nothing in the domain is read from the data.

The dimension vocabulary of ``Session.counts``, ``privmob counts`` and the report's count
vectors (a spec holds them typed; their text is read only at the edges): ``origin``,
``destination`` (trips), ``tile`` and ``zone`` (the visited tile of trip points or events),
``period`` (the bins of the declared period), ``bin:1h``, ``hour`` (of day), ``weekday``,
``duration:0,5,15,60`` (trip minutes), ``distance:0,1,2,5`` (trip km) and a categorical column
with declared values (``usertype:Subscriber,Customer``): the vocabulary is
:mod:`privmob.releases.dimensions`.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from privmob.domain import Period
from privmob.engine.base import dense_counts
from privmob.engine.buckets import counts_by_user_buckets
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.prepare.bounding import bound_per_user, fresh_key
from privmob.privacy.bound_choice import BoundChoice
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.samplers import Randomness, resolve
from privmob.privacy.signal import signal_check
from privmob.releases.base import Accountant
from privmob.releases.dimensions import SOURCES, Dimension, TypedDimension, measures, spelling
from privmob.releases.gate import Draft, through_the_gate
from privmob.releases.release import Release
from privmob.releases.values import PARTS_PER_UNIT, Mean, means, sum_noise
from privmob.surface import option, spelled

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from privmob.data.tessellation import Tessellation
    from privmob.engine.base import Engine
    from privmob.engine.dialect import Dialect
    from privmob.engine.relation import Loaded
    from privmob.releases.bound_choice import ChosenBound
    from privmob.releases.plan import Plan
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

#: told each step of a release as it starts
Step = Callable[[str], None]
#: the column of a record's label of ``CountSpec.bound_per`` (the per-user bound's group)
PER_LABEL = "_pm_per"


@dataclass(frozen=True)
class EnforcedBound:
    """The per-user bound the template enforces in the engine: each user keeps at most
    ``bound`` units (a keyed random sample with a fresh key; ``unit``: the columns that tell
    two units of one user apart), in each group of ``partition`` when given. What the declared
    bound (:class:`privmob.dp.PerUser`, ``pm.PerUser``) becomes in the engine."""

    bound: int
    unit: tuple[str, ...] = ("tid",)
    partition: tuple[str, ...] = ()
    #: one key for every user bucket (drawn before counting): the summed bucket counts then
    #: equal one pass's; otherwise a fresh key per bucket
    one_key: bool = False


@dataclass(frozen=True)
class CountDomain:
    """The public domain of a count release, fixed before any data is read.

    Cells ``0 .. cells-1``: the product of the dimensions' labels (row-major). Then the
    outliers cells: with ``outliers_by = 0`` one cell (a record outside ``period`` or outside
    any dimension); with ``outliers_by = m > 0`` one cell per value of the ``m`` leading
    dimensions (a record inside those but outside another dimension) and a last one (a record
    outside ``period`` or the leading dimensions); with ``None`` no outliers cell (the
    dimensions hold every record). ``diagonal``: two dimensions over the same labels whose
    equal cells are counted but not released (od's same-tile rule); the dimensions' SQL
    reads the records' ``time`` column and ``k`` tiles."""

    dimensions: tuple[Dimension, ...]
    time: str = "time"
    k: int = 0
    period: Period | None = None
    outliers_by: int | None = 0
    diagonal: tuple[str, str] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(d.labels) for d in self.dimensions)

    @property
    def cells(self) -> int:
        """The cells of the dimensions (without the outliers cells)."""
        return int(np.prod(self.shape))

    @property
    def outlier_cells(self) -> int:
        m = self.outliers_by
        if m is None:
            return 0
        return int(np.prod(self.shape[:m])) + 1 if m else 1

    @property
    def size(self) -> int:
        """Every cell counted in the engine (the flat vector)."""
        return self.cells + self.outlier_cells

    @property
    def released_cells(self) -> int:
        """The cells that get noise and are published."""
        if self.diagonal is None:
            return self.size
        return self.size - self.cells // self.shape[self._axis(self.diagonal[0])]

    def _axis(self, column: str) -> int:
        return [d.column for d in self.dimensions].index(column)

    def released_mask(self) -> npt.NDArray[np.bool_]:
        """True for every released cell of the flat vector (all but the ``diagonal``)."""
        mask = np.ones(self.size, dtype=bool)
        if self.diagonal is not None:
            i, j = (self._axis(c) for c in self.diagonal)
            n = len(self.shape)
            a = np.arange(self.shape[i]).reshape([-1 if x == i else 1 for x in range(n)])
            b = np.arange(self.shape[j]).reshape([-1 if x == j else 1 for x in range(n)])
            mask[: self.cells] = ~np.broadcast_to(a == b, self.shape).ravel()
        return mask

    def cell_sql(self, dialect: Dialect) -> str:
        """SQL: the flat cell of a record (see the class; -1 for a record in no cell)."""
        parts = [f"({d.sql(self.time, dialect, self.k)})" for d in self.dimensions]
        flat = _flat(parts, self.shape)
        m = self.outliers_by
        if m is None:
            return f"CASE WHEN {' OR '.join(_outside(parts))} THEN -1 ELSE {flat} END"
        period: list[str] = []
        if self.period is not None:
            in_period = f"({self.period.bin_sql(self.time, dialect)})"
            period = [f"{in_period} < 0", f"{in_period} IS NULL"]
        if m == 0:
            outside = " OR ".join(period + _outside(parts))
            return f"CASE WHEN {outside} THEN {self.cells} ELSE {flat} END"
        lead, rest = parts[:m], parts[m:]
        arms = f"WHEN {' OR '.join(period + _outside(lead))} THEN {self.size - 1} "
        if rest:
            split = _flat(lead, self.shape[:m])
            arms += f"WHEN {' OR '.join(_outside(rest))} THEN {self.cells} + {split} "
        return f"CASE {arms}ELSE {flat} END"

    def index(self) -> pd.DataFrame:
        """The dimensions' labels of every cell (row-major), one column each."""
        index = pd.MultiIndex.from_product([d.labels for d in self.dimensions])
        return index.to_frame(index=False, name=[d.column for d in self.dimensions])


def _outside(parts: Sequence[str]) -> list[str]:
    return [f"{p} < 0" for p in parts] + [f"{p} IS NULL" for p in parts]


def _flat(parts: Sequence[str], shape: Sequence[int]) -> str:
    if not parts:
        return "0"
    strides = np.cumprod([1, *shape[::-1]])[:-1][::-1]
    return " + ".join(f"{p} * {int(s)}" for p, s in zip(parts, strides, strict=True))


class Rows(Protocol):
    """How a kind's records are read for counting (see :class:`CountKind`)."""

    @property
    def records(self) -> str: ...

    def rows_sql(self, part: Loaded) -> str:
        """The records of ``part`` (a user bucket of the counted relation) as the cell SQL
        reads them: a view name or a parenthesised query."""
        ...

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        """The input columns the count needs and its engine bytes per input row (user
        buckets under a memory limit, :mod:`privmob.engine.buckets`)."""
        ...


Noisy = TypeVar("Noisy", covariant=True)
#: what a noise step's ``start`` returns: ``finish(exact)``, the noisy cells of the exact
#: flat vector of the domain
Finish = Callable[["npt.NDArray[np.int64]"], Noisy]


class NoiseStep(Protocol[Noisy]):
    """The template's noise step (see the module's docstring): started before counting
    (nothing it draws reads the data), finished on the exact cells of the domain."""

    @property
    def kind(self) -> str:
        """The noise, in the words of the progress line."""
        ...

    def start(self, domain: CountDomain, r: Randomness) -> Finish[Noisy]:
        """Start the noise of ``domain``'s released cells; returns ``finish(exact)``: the
        noisy cells of the flat ``exact`` vector (what the kind's ``publish`` is given)."""
        ...


@dataclass(frozen=True)
class CellNoise:
    """The default noise step: independent ``noise`` on every released cell of the domain, in
    flat order (zero cells and the outliers cells included; a cell not released stays 0)."""

    noise: Noise

    @property
    def kind(self) -> str:
        return f"{self.noise.kind}"

    def start(self, domain: CountDomain, r: Randomness) -> Finish[npt.NDArray[np.int64]]:
        mask = domain.released_mask()
        # the noise reads no data (public scale, public domain): drawn while the engine counts
        add_noise = self.noise.add_later(int(mask.sum()), r)
        return lambda exact: released(mask, add_noise(exact[mask]))


Cell = TypeVar("Cell", "np.int64", "np.float64")


def released(mask: npt.NDArray[np.bool_], noisy: npt.NDArray[Cell]) -> npt.NDArray[Cell]:
    """The flat vector of a domain whose released cells (``mask``) hold ``noisy`` (in flat
    order) and whose other cells (a diagonal not released) hold 0."""
    out = np.zeros(mask.shape, dtype=noisy.dtype)
    out[mask] = noisy
    return out


@dataclass(frozen=True)
class NoisyMeans:
    """What :class:`MeanCells` drew: the noisy counts (flat, integers) and the noisy centred
    sums (flat, in the value's units)."""

    counts: npt.NDArray[np.int64]
    sums: npt.NDArray[np.float64]


@dataclass(frozen=True)
class MeanCells:
    """The noise step of a count with a value (:mod:`privmob.releases.values`): ``counts``
    noise on every released count, then ``sums`` noise (continuous Laplace) on every
    released centred sum."""

    counts: Noise
    sums: Noise

    @property
    def kind(self) -> str:
        return f"{self.counts.kind} (counts) and laplace (sums)"

    def start(self, domain: CountDomain, r: Randomness) -> Finish[NoisyMeans]:
        def finish(exact: npt.NDArray[np.int64]) -> NoisyMeans:
            counts = CellNoise(self.counts).start(domain, r)(exact[0])
            mask = domain.released_mask()
            centred = exact[1][mask].astype(np.float64) / PARTS_PER_UNIT
            return NoisyMeans(counts, released(mask, self.sums.add_float(centred, r)))

        return finish


#: a kind's noise (its ``calibrated``: a :class:`Noise`, or its own noise step) and what its
#: noise step draws (what its ``publish`` is given)
Calibrated = TypeVar("Calibrated")
Drawn = TypeVar("Drawn", contravariant=True)


class CountKind(Rows, Protocol[Calibrated, Drawn]):
    """What a kind of the count template supplies, all from public parameters: its name, its
    noise and cost, its domain, its per-user bound, the records it counts (and how they are
    read from its input) and what it publishes from the noisy cells. The template
    (:func:`count_release`) owns the rest and its order."""

    @property
    def kind(self) -> str: ...

    @property
    def calibrated(self) -> tuple[Calibrated, Cost]:
        """The noise (a :class:`Noise` on every cell: :class:`CellNoise`; or the kind's own
        noise step) and the cost (its parts, if any, on the release: one entry each)."""
        ...

    def count_domain(self) -> CountDomain: ...

    def per_user(self, group_size: int | None) -> EnforcedBound | None:
        """The enforced bound (``None``: one record per user by construction);
        ``group_size``: the accountant's (a trip-level cost charged to a user budget)."""
        ...

    def counted(self, data: object) -> Loaded:
        """The relation counted, from the release's input (checked against the kind)."""
        ...

    @property
    def value(self) -> Mean | None:
        """The value summed beside the count (``None``: a count alone)."""
        ...

    def publish(
        self,
        noisy: Drawn | None,
        noise: Calibrated,
        cost: Cost,
        r: Randomness,
        bound: EnforcedBound | None,
    ) -> tuple[Release, str]:
        """The release made from the noisy cells (what the noise step gave: the flat integer
        vector of :class:`CellNoise`) and the kind's calibrated ``noise``: post-processing,
        tables, metadata; and the ledger description. With ``noisy`` ``None``: the release's
        header, what the gate charges before any noise is drawn (no tables, nothing computed
        from the data or the noise)."""
        ...


def exact_cells(
    counted: Loaded,
    rows: Rows,
    domain: CountDomain,
    bound: EnforcedBound | None,
    r: Randomness,
    *,
    buckets: int | None = None,
    step: Callable[[str], None] | None = None,
    key: int | None = None,
    value: Mean | None = None,
) -> npt.NDArray[np.int64]:
    """Exact counts over ``domain``'s flat cells, each user keeping at most ``bound`` records
    (a fresh key from ``r`` per user bucket, or ``key`` in every bucket, drawn here with
    ``bound.one_key``: then the summed bucket counts equal one pass's). With ``value``: shape
    (2, cells), the counts and the exact sums of the records' centred values in thousandths
    (:mod:`privmob.releases.values`). Never publish these."""
    columns, per_row = rows.bucket_columns(counted)
    if key is None and bound is not None and bound.one_key:
        key = fresh_key(r)

    def count(part: Loaded) -> npt.NDArray[np.int64]:
        d = part.engine.dialect
        relation = rows.rows_sql(part)
        if bound is not None:
            limited = bound_per_user(
                relation,
                max_units=bound.bound,
                key=fresh_key(r) if key is None else key,
                dialect=d,
                unit=bound.unit,
                partition=bound.partition,
            )
            relation = f"({limited})"
        if value is not None:  # the counts and the centred sums, one pass
            both = (
                f"SELECT cell AS i0, count(*) AS n, CAST(sum(v) AS BIGINT) AS s FROM (SELECT "
                f"{domain.cell_sql(d)} AS cell, {value.centred_sql(d)} AS v FROM {relation} "
                "AS r_) AS c_ WHERE cell >= 0 GROUP BY cell"
            )
            return dense_counts(part.engine, both, (domain.size,), ("n", "s"))
        sql = (
            f"SELECT cell AS i0, count(*) AS n FROM (SELECT {domain.cell_sql(d)} AS cell "
            f"FROM {relation} AS r_) AS c_ WHERE cell >= 0 GROUP BY cell"
        )
        return dense_counts(part.engine, sql, (domain.size,))

    return counts_by_user_buckets(
        counted,
        count,
        f"counting {rows.records}",
        buckets=buckets,
        step=step,
        columns=columns,
        bytes_per_row=per_row,
    )


def count_draft(
    data: object,
    spec: CountKind[Calibrated, Drawn],
    accountant: Accountant,
    *,
    rng: Randomness | int | None = None,
    step: Callable[[str], None] | None = None,
    buckets: int | None = None,
) -> Draft:
    """The template's draft (see the module's docstring) on loaded ``data``: the exact counts
    and the kind's mechanism, no noise.

    The budget is checked before any data is read (:meth:`Accountant.precheck`); users are
    split into ``buckets`` hash buckets (default: as many as the engine's memory limit
    needs); the per-user key is drawn before counting. The draft's ``draw`` (run by the gate
    once the charge is committed) adds the noise and lets the kind publish (with a seed: the
    key, then the noise, in this order)."""
    step = step or _quiet
    r = resolve(rng)
    noise, cost = spec.calibrated
    counted = spec.counted(data)  # the input checked against the kind (nothing read)
    accountant.precheck(cost)  # before any data is read
    domain = spec.count_domain()
    bound = spec.per_user(accountant.group_size)
    # a Noise: on every cell, the kind publishes the integer vector drawn; else its own step
    noising = cast("NoiseStep[Drawn]", CellNoise(noise) if isinstance(noise, Noise) else noise)
    header, description = spec.publish(None, noise, cost, r, bound)
    step(f"counting {spec.records} over {domain.released_cells:,} public cells")
    exact = exact_cells(
        counted, spec, domain, bound, r, buckets=buckets, step=step, value=spec.value
    )

    def draw() -> Release:
        step(f"adding {noising.kind} noise to {domain.released_cells:,} cells")
        noisy = noising.start(domain, r)(exact)
        return spec.publish(noisy, noise, cost, r, bound)[0]

    return Draft(header, description, draw)


count_release = through_the_gate(count_draft)

if TYPE_CHECKING:

    class Choosable(
        CountKind[Calibrated, Drawn],
        ChosenBound[CountDomain, EnforcedBound],
        Protocol[Calibrated, Drawn],
    ):
        """A kind of the count template whose bound may be chosen privately (``od``,
        ``counts``)."""

        @property
        def choice(self) -> BoundChoice | None: ...


def template_draft(
    data: object,
    spec: Choosable[Calibrated, Drawn],
    accountant: Accountant,
    *,
    rng: Randomness | int | None,
    progress: Step,
) -> Draft:
    """The draft of a kind whose bound may be chosen: the template's (:func:`count_draft`) at
    the bound given, or with ``spec.choice`` the bound chosen (or the counts rescaled) after
    the charge (:func:`~privmob.releases.bound_choice.chosen_draft`, given the template's
    counting and noise step)."""
    if spec.choice is None:
        return count_draft(data, spec, accountant, rng=rng, step=progress)
    from privmob.releases.bound_choice import chosen_draft

    template = (exact_cells, CellNoise)
    return chosen_draft(
        data, spec, spec.choice, accountant, rng=rng, step=progress, template=template
    )


def _quiet(_message: str) -> None:
    return None


@dataclass(frozen=True)
class CountSpec:
    """A count release (the template's spec): ``records`` counted (a key of :data:`SOURCES`),
    grouped by ``by`` (typed dimensions, :mod:`privmob.releases.dimensions`), at most
    ``bound`` records per user: in all, or with ``bound_per`` (a dimension's column) in each
    label of that dimension (the records outside it one more group: a zone series' bins)."""

    tessellation: Tessellation | None
    epsilon: float
    records: str
    by: tuple[TypedDimension, ...]
    #: a whole number, or "auto": chosen privately (``bound_choice``)
    bound: int | str
    noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE
    delta: float = 0.0
    period: Period = field(default_factory=Period)
    kind: str = "counts"
    #: a dimension's column: each user keeps at most ``bound`` records per label of it (the
    #: records outside the domain one more group), not in all (a zone series' bins)
    bound_per: str | None = None
    #: what the measured dimensions counted (a trip distance's definition, from the input's
    #: layout; set by :meth:`run` from the records read, see :func:`measures`)
    measured: tuple[tuple[str, str], ...] = ()
    #: the unit of privacy: ``user`` (each user keeps at most ``bound`` records) or ``trip``
    #: (trips counted, each trip its own unit, once: rides without a rider id)
    unit: PrivacyUnit | str = PrivacyUnit.USER

    @property
    def privacy_unit(self) -> PrivacyUnit:
        """The unit, checked against the records and the bound (public parameters only)."""
        unit = PrivacyUnit(self.unit)
        if unit is PrivacyUnit.USER:
            return unit
        if unit is not PrivacyUnit.TRIP:
            raise ConfigError(f"a count table protects a user or a trip, not a {unit}")
        if self.records != "trips":
            raise ConfigError(
                f"a trip-level count table counts trips, each trip its own unit, not "
                f"{self.records}",
                hint=f"count trips ({option('records', 'trips')}), or release at user level "
                f"({option('unit', 'user')})",
            )
        if self.bound != 1 or self.bound_per is not None or self.bound_choice is not None:
            raise ConfigError(
                "trip-level releases count every trip once (T = 1)",
                hint=spelled(
                    "drop --max-trips or use --unit user", 'drop max_records= or use unit="user"'
                ),
            )
        return unit

    #: a value summed beside the count, and its mean (:mod:`privmob.releases.values`)
    value: Mean | None = None
    #: how ``bound="auto"`` is chosen, and the rescale (:mod:`privmob.releases.bound_choice`)
    bound_choice: BoundChoice | None = None

    @cached_property
    def choice(self) -> BoundChoice | None:
        """The bound's choice or rescale (``None``: a fixed bound, the template's own path)."""
        from privmob.releases.bound_choice import checked_choice

        return checked_choice(
            self.bound, self.bound_choice, unit=self.unit, noise=self.noise, delta=self.delta,
            per=self.bound_per, value=self.value,
        )  # fmt: skip

    @property
    def fixed_bound(self) -> int | None:
        return None if isinstance(self.bound, str) else int(self.bound)

    def concrete(self, bound: int, epsilon: float) -> CountSpec:
        """This release with ``bound`` records per user and ``epsilon`` (no choice)."""
        return replace(self, bound=bound, epsilon=epsilon, bound_choice=None)

    @cached_property
    def dimensions(self) -> tuple[Dimension, ...]:
        if self.records not in SOURCES:
            raise ConfigError(
                f"unknown records {self.records!r}", hint=f"count one of {', '.join(SOURCES)}"
            )
        if not self.by:
            raise ConfigError("give at least one dimension to count by", hint="e.g. by=['hour']")
        ids = [] if self.tessellation is None else list(self.tessellation.tile_ids)
        if any(not isinstance(b, TypedDimension) for b in self.by):
            raise TypeError(
                "CountSpec.by holds typed dimensions (privmob.releases.dimensions): "
                "parse text with parse_dimension"
            )
        dims = tuple(b.resolve(tuple(ids), self.period) for b in self.by)
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
        if self.bound_per is not None and self.bound_per not in {d.column for d in dims}:
            raise ConfigError(f"the bound is per {self.bound_per}, which is not a dimension")
        return dims

    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(d.labels) for d in self.dimensions)

    @property
    def spelled_by(self) -> str:
        """The dimensions as text (the plan's, the ledger's and the metadata's words)."""
        return ", ".join(spelling(b) for b in self.by)

    @cached_property
    def calibrated(self) -> tuple[Noise | MeanCells, Cost]:
        if isinstance(self.bound, str):  # auto: planned and drawn by releases/bound_choice.py
            self.choice  # noqa: B018 (refuses what a chosen bound does not support)
            raise ConfigError(f"the bound per user is a whole number or auto, not {self.bound!r}")
        if int(self.bound) != self.bound or self.bound < 1:
            raise ConfigError(f"the bound per user must be a whole number >= 1, got {self.bound}")
        b = self.sensitivity
        if self.value is None:
            return calibrate(
                self.noise,
                self.epsilon,
                l1_sensitivity=b,
                l2_sensitivity=b,
                delta=self.delta,
                unit=self.privacy_unit,
            )
        if not NoiseKind(self.noise).traits.exact_pure or self.delta:
            raise ConfigError(
                "a mean is released with Laplace noise (discrete on the counts, continuous on "
                "the sums)",
                hint=spelled("leave out --noise and --delta", "leave out noise= and delta=")
                + " with a mean",
            )
        half = self.epsilon / 2
        counts, cost = calibrate(
            self.noise, half, l1_sensitivity=b, l2_sensitivity=b, unit=self.privacy_unit
        )
        return MeanCells(counts, sum_noise(self.value, b, half)), cost + cost

    @property
    def count_noise(self) -> Noise:
        """The noise on the counts (with a value: the counts' half of the budget)."""
        noise, _ = self.calibrated
        return noise.counts if isinstance(noise, MeanCells) else noise

    @property
    def sensitivity(self) -> int:
        """L1 (and L2) sensitivity of the count vector: ``bound``, or with ``bound_per`` the
        bound times the groups it applies to (the labels of that dimension, and one for the
        records outside it: all of a user's groups can land in the outliers cell)."""
        per = [len(d.labels) + 1 for d in self.dimensions if d.column == self.bound_per]
        return int(self.bound) * (per[0] if per else 1)

    def public_period(self) -> JSONObject:
        """The declared period (public)."""
        return self.period.to_dict()

    @property
    def same_tile_rule(self) -> str:
        """What happens to a trip that starts and ends in one tile."""
        return "counted as any trip (origin and destination are each a dimension of their own)"

    def plan(self) -> Plan:
        from privmob.releases.plan import Plan, domain_memory

        if self.choice is not None:
            from privmob.releases.bound_choice import chosen_plan

            return chosen_plan(self, self.choice)

        _, cost = self.calibrated
        noise = self.count_noise
        cells = int(np.prod(self.shape)) + 1
        return Plan(
            kind=self.kind,
            cost=cost,
            cells=cells,
            memory_bytes=domain_memory(cells * (2 if self.value else 1), cells),
            output_rows=cells - 1,
            margin_of_error_95=float(noise.margin_of_error(0.95)),
            noise=str(noise.kind),
            parts=2 if self.value else 1,
        )

    def draft(
        self, data: object, accountant: Accountant, *, rng: Randomness | int | None, progress: Step
    ) -> Draft:
        # what a measured dimension was (the trip distance) follows the records' layout
        spec = replace(self, measured=tuple(measures(self.dimensions, self.counted(data)).items()))
        return template_draft(data, spec, accountant, rng=rng, progress=progress)

    # -- what the count template asks of its kinds (CountKind) ---------------------------------
    def count_domain(self) -> CountDomain:
        time, _ = SOURCES[self.records]
        k = 0 if self.tessellation is None else self.tessellation.k
        return CountDomain(self.dimensions, time, k, self.period)

    def per_user(self, group_size: int | None) -> EnforcedBound | None:
        """``bound`` records per user; trip level: none (one record per trip), or the stated
        group size enforced (a charge to a user budget by group privacy rests on a real
        bound), as the OD matrix's."""
        if self.privacy_unit is PrivacyUnit.TRIP:
            if group_size is None:
                return None
            if int(group_size) != group_size or group_size < 1:
                raise ConfigError(f"--group-size must be a whole number >= 1, got {group_size}")
            return EnforcedBound(int(group_size))
        return self.user_bound()

    def user_bound(self) -> EnforcedBound:
        """``bound`` records per user (per label of ``bound_per`` when given)."""
        partition = () if self.bound_per is None else (PER_LABEL,)
        return EnforcedBound(int(self.bound), SOURCES[self.records][1], partition)

    def counted(self, data: object) -> Loaded:
        return cast("Loaded", data)

    def rows_sql(self, part: Loaded) -> str:
        """The records, with ``bound_per``: and the label of its dimension (:data:`PER_LABEL`;
        negative or NULL outside it: one more group of the per-user bound)."""
        if self.bound_per is None:
            return part.view
        (per,) = (d for d in self.dimensions if d.column == self.bound_per)
        domain = self.count_domain()
        label = per.sql(domain.time, part.engine.dialect, domain.k)
        return f"(SELECT *, {label} AS {PER_LABEL} FROM {part.view})"

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]:
        return None, None

    def publish(
        self,
        noisy: npt.NDArray[np.int64] | NoisyMeans | None,
        noise: Noise | MeanCells,
        cost: Cost,
        r: Randomness,
        bound: EnforcedBound | None,
    ) -> tuple[Release, str]:
        counts_noise = noise.counts if isinstance(noise, MeanCells) else noise
        margin = counts_noise.margin_of_error(0.95)
        domain = self.count_domain()
        described: JSONObject = {
            **counts_noise.to_dict(),
            "l1_sensitivity": self.sensitivity,
            "margin_of_error_95": margin,
        }
        params: JSONObject = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "by": [spelling(b) for b in self.by],
            "period": self.period.to_dict(),
            "post_processing": "noisy integers as drawn (unbiased; negative values kept)",
            **dict(self.measured),  # what a measured dimension was (the trip distance)
        }
        parts: list[tuple[str, Cost]] = []
        if isinstance(noise, MeanCells) and self.value is not None:
            half = Cost.pure(self.epsilon / 2, self.privacy_unit)
            parts = [
                (f"{self.kind}: counts by {self.spelled_by}", half),
                (f"{self.kind}: sums of {self.value.column}", half),
            ]
            described["sums"] = {
                **noise.sums.to_dict(),
                "kind": "laplace",
                "l1_sensitivity": self.value.sensitivity(self.sensitivity),
            }
            params["value"] = self.value.to_dict(self.sensitivity)
            params["epsilon_split"] = {"counts": self.epsilon / 2, "sums": self.epsilon / 2}
        unit = self.privacy_unit
        if unit is PrivacyUnit.TRIP:
            bounds: JSONObject = {"max_records_per_trip": 1, "records": self.records}
            if bound is not None:
                bounds["group_size_enforced"] = bound.bound
        else:
            bounds = {
                "max_records_per_user": int(self.bound),
                "records": self.records,
                **({"per": self.bound_per} if self.bound_per else {}),
            }
        if self.value is not None:
            bounds["value_clamp"] = [float(self.value.lo), float(self.value.hi)]
        release = Release(
            kind=self.kind,
            cost=cost,
            unit=unit,
            bounds=bounds,
            noise=described,
            params=params,
            domain={
                "dimensions": {d_.column: len(d_.labels) for d_ in self.dimensions},
                "cells": domain.cells,
                "outlier_cells": 1,
            },
            tables={},
            for_publication=r.for_publication,
            cost_parts=parts,
        )
        if noisy is not None:
            counts = noisy.counts if isinstance(noisy, NoisyMeans) else noisy
            table = domain.index()
            for column in table.columns:  # one type a column (Parquet): tiles and "outside"
                if table[column].map(type).nunique() > 1:
                    table[column] = table[column].astype(str)
            table["count"] = counts[:-1]
            outliers = pd.DataFrame(
                {"cell": ["outside the period or a dimension"], "count": counts[-1:]}
            )
            if isinstance(noisy, NoisyMeans) and isinstance(noise, MeanCells):
                assert self.value is not None
                mean, mean_margin = means(counts, noisy.sums, self.value, noise.counts, noise.sums)
                table["mean"] = mean[:-1]
                table["mean_margin_95"] = mean_margin[:-1]
            release.params["signal"] = signal_check(counts[:-1], margin, unit).to_dict()
            release.tables = {"counts": table, "outliers": outliers}
        return release, f"{self.kind}: {self.records} by {self.spelled_by}"


def cell_sql(spec: CountSpec, dialect: Dialect) -> str:
    """SQL: the flat cell of a record of ``spec`` (:meth:`CountDomain.cell_sql`)."""
    return spec.count_domain().cell_sql(dialect)


# =============================================================================================
# Several count vectors from one bounded input (the mobility report): the template's cells and
# noise for a release that bounds its records once and publishes many vectors from them.
# Added for the report (issue 28, item 2); nothing above depends on it.
# =============================================================================================


@dataclass(frozen=True)
class CountTerm:
    """One term of a count vector: ``SELECT cell, count(*) FROM source WHERE where GROUP BY
    cell``. ``cell`` is never NULL on a row where ``where`` holds (every such row lands in a
    cell of the public domain, the outliers cell included). ``columns``: expressions computed
    once per row, which ``cell`` reads as ``pm_c0_``, ``pm_c1_``, ... (a cell that tests and
    combines them would otherwise compute each several times: 3.5x slower in DuckDB for the
    report's visits per time-tile at 1M trips)."""

    source: str
    cell: str
    where: str = "1 = 1"
    columns: tuple[str, ...] = ()

    def sql(self) -> str:
        if not self.columns:
            return (
                f"SELECT {self.cell} AS i0, COUNT(*) AS n FROM {self.source} "
                f"WHERE {self.where} GROUP BY i0"
            )
        named = ", ".join(f"{c} AS pm_c{i}_" for i, c in enumerate(self.columns))
        return (
            f"SELECT {self.cell} AS i0, COUNT(*) AS n FROM (SELECT {named} FROM {self.source} "
            f"WHERE {self.where}) AS c_ GROUP BY i0"
        )

    def inline_cell(self) -> str:
        """``cell`` on the rows of ``source`` itself (each column's expression in place)."""
        import re

        return re.sub(r"\bpm_c(\d+)_", lambda m: f"({self.columns[int(m[1])]})", self.cell)


@dataclass(frozen=True)
class CountVector:
    """A count vector of the template's shape over a relation the release has bounded itself:
    the rows of ``source`` where ``where`` holds, each in one cell of the product of
    ``dimensions`` (row-major, as :func:`cell_sql`; ``time`` is the time column the dimensions
    read, ``k`` the number of tiles). With ``outliers``, a row outside a dimension is
    counted in one more cell, the last; without it, ``where`` must keep every row inside every
    dimension (a row outside would fall outside the domain, which the engine count refuses)."""

    source: str
    dimensions: tuple[Dimension, ...]
    time: str = "time"
    where: str = "1 = 1"
    outliers: bool = True
    k: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(d.labels) for d in self.dimensions)

    @property
    def size(self) -> int:
        """The number of cells, the outliers cell included."""
        return math.prod(self.shape) + int(self.outliers)

    def term(self, dialect: Dialect) -> CountTerm:
        """The vector as one engine count term (its cell from the dimensions' values)."""
        columns = tuple(d.sql(self.time, dialect, self.k) for d in self.dimensions)
        strides = list(itertools.accumulate([1, *self.shape[::-1]], operator.mul))[:-1][::-1]
        flat = " + ".join(f"pm_c{i}_ * {int(s)}" for i, s in enumerate(strides)) or "0"
        if self.outliers and columns:
            outside = " OR ".join(f"coalesce(pm_c{i}_, -1) < 0" for i in range(len(columns)))
            flat = f"CASE WHEN {outside} THEN {math.prod(self.shape)} ELSE {flat} END"
        return CountTerm(self.source, flat, self.where, columns)


def count_vectors(
    engine: Engine, vectors: dict[str, tuple[list[CountTerm], int]]
) -> dict[str, npt.NDArray[np.int64]]:
    """Exact dense counts of several vectors (``name -> (terms, domain size)``) from one engine
    query, the vector's number as the first index: the same dense vectors as one
    :func:`~privmob.engine.base.dense_counts` per vector.

    DuckDB runs every term as its own branch of a UNION ALL. On Spark each branch is a scan of
    a cached table and a shuffle stage with its own scheduling, so the terms that read the same
    relation share one scan instead: each row becomes one row per term (``stack``), holding the
    term's cell where the term counts the row and NULL where it does not, and one GROUP BY
    counts them all (the report: 16 vectors, 5 scans).
    """
    items = list(vectors.items())
    if engine.dialect.fuses_count_scans:
        sql = _fused_sql(items)
    else:
        sql = " UNION ALL ".join(
            f"SELECT {j} AS i0, CAST(i0 AS BIGINT) AS i1, CAST(n AS BIGINT) AS n FROM ({t.sql()}) "
            f"AS q{j}_{m}"
            for j, (_, (ts, _)) in enumerate(items)
            for m, t in enumerate(ts)
        )
    dense = dense_counts(engine, sql, (len(items), max(size for _, (_, size) in items)))
    out = {}
    for j, (name, (_, size)) in enumerate(items):
        if dense[j, size:].any():  # as dense_counts' own check: SQL maps outliers first
            raise AssertionError(f"engine returned an index outside the domain of {name}")
        out[name] = dense[j, :size].copy()
    return out


def _fused_sql(items: list[tuple[str, tuple[list[CountTerm], int]]]) -> str:
    """One scan per source relation: ``stack`` turns each row into one (vector, cell) row per
    term (cell NULL where the term's condition fails, -1 where the cell would be NULL: an
    internal error that :func:`~privmob.engine.base.scatter_counts` refuses)."""
    by_source: dict[str, list[tuple[int, CountTerm]]] = {}
    for j, (_, (ts, _)) in enumerate(items):
        for t in ts:
            by_source.setdefault(t.source, []).append((j, t))
    parts = []
    for s, (source, terms) in enumerate(by_source.items()):
        cells = ", ".join(
            f"{j}, CASE WHEN {t.where} THEN coalesce(CAST({t.inline_cell()} AS BIGINT), -1) END"
            for j, t in terms
        )
        parts.append(
            f"SELECT q AS i0, i AS i1, CAST(count(*) AS BIGINT) AS n FROM (SELECT stack("
            f"{len(terms)}, {cells}) AS (q, i) FROM {source}) AS f{s} WHERE i IS NOT NULL "
            "GROUP BY q, i"
        )
    return " UNION ALL ".join(parts)


def noisy_cells(
    exact: npt.NDArray[np.int64], noise: Noise, rng: Randomness
) -> npt.NDArray[np.int64]:
    """The template's noise step: independent noise on every cell of the public domain (zero
    cells and the outliers cell included), integers out."""
    return noise.add(exact, rng).astype(np.int64)
