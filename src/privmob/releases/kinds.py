"""The registry of release kinds: every list of kinds in privmob derives from :data:`KINDS`.

A kind has **one name**, used as the ``privmob`` command, the ledger's kind, ``metadata.json``'s
``kind`` and the docs; its :class:`~privmob.session.Session` method is that name with ``_`` for
``-``. Each :class:`Kind` says which input shapes it accepts, its spec type
(:mod:`privmob.releases.specs`), its bound (one spelling: the Python keyword, the command-line
flag and the ``metadata.json`` key), the definitions it records (what a trip, a day or a stay
was), the tables and map layer it publishes (a count table's layer follows the dimensions
it counts by: :meth:`Kind.layer_of`), and whether ``privmob plan <kind>`` and
``privmob plan programme`` know it.

Derived from here: the release commands of ``privmob --help`` (``cli/lazy.py``),
``privmob plan <kind>`` (``cli/plan.py``), the programme planner's kinds
(``evaluate/programme.py``), the map layers (``render/layers.py``); the tests of option names,
of the docs tables and of the guarantees (``tests/releases/test_kinds.py``) iterate it, so a new
kind cannot land without them.

**Kinds declared as data.** A kind of the count template is a row, :func:`count_kind`: the
records it counts, its dimensions and its aggregate (:class:`Counts`: a count, or with a value
the clamped sum beside the count, post-processed into the mean). The lifecycle derives the
rest from it: the loader (the records, the columns its dimensions and value read), the binding,
the one charge, the noise, the metadata and the map layer (``releases/counts.py``). A kind
declared outside privmob is added with ``pm.register_kind`` (:func:`register`): its Session
method and plan, its command and ``privmob plan <name>`` (in that process), the gate, the
ledger and the guarantee tests, which iterate :func:`every_kind`, know it from then on.

This module imports nothing heavy: ``privmob --help`` reads it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privmob.releases.dimensions import DimensionLike, TypedDimension
    from privmob.releases.values import Mean

#: input shapes (privmob.data.SHAPES, minus "auto"), and the series file of ``privmob series``
TRIPS, TRIP_POINTS, EVENTS, GPS, CELL_EVENTS, SERIES_FILE = (
    "trips", "trip-points", "events", "gps", "events with cell_id", "series file",
)  # fmt: skip
#: every shape of located records: trips are made from any of them (``prepare/inputs.py``)
LOCATED = (TRIPS, TRIP_POINTS, EVENTS, GPS)

#: what every release on located records says it counted (``metadata.json`` ``definitions``)
RECORD_DEFINITIONS = ("input_shape", "timezone", "input_timezone")
TRIP_DEFINITIONS = (*RECORD_DEFINITIONS, "trip_rule", "stay_points", "same_tile_trips")


#: the one rule for trips that start and end in one tile, in ``od`` and in the report's
#: ``od_flows`` (``same_tile=``, ``--same-tile``): left out by default, released on request
SAME_TILE_RULES = {
    "exclude": "not released: a trip within one tile is in no OD cell",
    "include": "released: every tile's cell to itself counts the trips within it",
}


def same_tile_flag(rule: str) -> bool:
    """``True`` when trips within one tile are released (``rule``: a key of SAME_TILE_RULES)."""
    from privmob.errors import ConfigError

    if rule not in SAME_TILE_RULES:
        raise ConfigError(
            f"unknown same-tile rule {rule!r}", hint=f"use one of {', '.join(SAME_TILE_RULES)}"
        )
    return rule == "include"


@dataclass(frozen=True)
class Bound:
    """A kind's per-user bound, ``pm.PerUser(n, unit)`` (the Session methods' ``per_user=``):
    ``keyword`` (the Session method's earlier keyword, deprecated), ``flags (the command
    line's: ``-T`` is every release's bound, its long form the shared ``--max-trips``, or the
    keyword's own spelling where trips are not what is bounded, e.g. density's
    ``--max-visits``; other words stay accepted as hidden aliases) and ``metadata`` (the key
    of ``metadata.json``'s ``privacy.bounds``: the keyword and what it bounds per)."""

    keyword: str
    flags: tuple[str, ...]
    metadata: str
    #: the typed bounds (``privmob.dp``) the Session method takes, each named ``keyword``
    typed: tuple[str, ...] = ()
    #: the unit of the bound, ``pm.PerUser(n, unit)`` (``per_user=``; ``-T n`` means it)
    unit: str = "trips"
    #: the bound can be chosen privately (``pm.PerUser("auto", unit)``, ``-T auto``)
    auto: bool = False


@dataclass(frozen=True)
class Layer:
    """A kind's map layer: its main ``table``, the tile ``key`` of that table (``None``: an OD
    table, keyed by origin and destination) and the layer file's ``stem``."""

    table: str
    key: str | None
    stem: str
    #: the 95% margin of each row: one for the release (``"release"``), or from the noise
    #: scale of each row's timestamp in the ``budgets`` table (``"budgets"``)
    margin: str = "release"


#: the count template's spec: a count table's layer follows the dimensions it counts by
COUNT_SPEC = "privmob.releases.counts.CountSpec"
#: the dimensions of the count template whose labels are the tessellation's tiles
TILE_DIMENSIONS = ("origin", "destination", "tile", "zone")


def count_layer(name: str, by: Sequence[str]) -> Layer | None:
    """The map layer of a count table of kind ``name`` by the dimensions ``by`` (spellings:
    ``origin``, ``hour``, ``bin:1h`` ...): OD lines for origin and destination, a polygon per
    row for one tile dimension (``origin``, ``destination``, ``tile`` or ``zone``), none
    without a tile dimension. Its table is ``counts``; its stem ``<name>_flows`` or
    ``<name>_tiles``."""
    tiles = [c for c in (str(b).split(":")[0] for b in by) if c in TILE_DIMENSIONS]
    stem = name.replace("-", "_")
    if sorted(tiles) == ["destination", "origin"]:
        return Layer("counts", None, f"{stem}_flows")
    if len(tiles) == 1:
        return Layer("counts", tiles[0], f"{stem}_tiles")
    return None


@dataclass(frozen=True)
class Counts:
    """A kind declared as data, made by the count template (``releases/counts.py``): the
    ``records`` it counts, the public dimensions it groups them ``by`` (typed:
    :mod:`privmob.releases.dimensions`) and its aggregate: a
    count (``value`` ``None``), or with ``value`` (``"duration:0:180"``, ``pm.Mean``'s
    spelling) the sum of each record's value clamped to that range beside the count,
    post-processed into the mean (noisy sum / noisy count, with its margin;
    ``releases/values.py``)."""

    records: str
    by: tuple[TypedDimension, ...]
    value: str | None = None

    def __post_init__(self) -> None:
        from privmob.releases.dimensions import as_dimension

        # a declaration's text parsed once, here; a typed dimension kept as given
        by: tuple[DimensionLike, ...] = self.by
        object.__setattr__(self, "by", tuple(as_dimension(b) for b in by))

    @property
    def spelled_by(self) -> str:
        """The dimensions as text (messages and docstrings)."""
        from privmob.releases.dimensions import spelling

        return ", ".join(spelling(b) for b in self.by)

    @property
    def mean(self) -> Mean | None:
        """The value as ``pm.Mean`` (``None``: a count alone)."""
        from privmob.releases.values import Mean

        return None if self.value is None else Mean.parse(self.value)


@dataclass(frozen=True)
class Kind:
    """One release kind (see the module's docstring)."""

    name: str
    summary: str
    shapes: tuple[str, ...]
    spec: str  # dotted path of the spec type (imported when asked for: :attr:`spec_type`)
    cli_help: str  # the command's help line (``privmob --help``)
    tables: tuple[str, ...]
    #: the module of the command (default ``privmob.cli.<method>``: named after the kind)
    cli_module: str = ""
    bound: Bound | None = None
    definitions: tuple[str, ...] = RECORD_DEFINITIONS
    layer: Layer | None = None
    plannable: bool = True  # ``privmob plan <name>``
    programme: bool = True  # a kind of ``privmob plan programme``
    engine: bool = True  # read with an engine (``False``: a file read by pandas)
    #: a kind of the count template: what it counts (``None``: a kind with its own code)
    counts: Counts | None = None
    #: earlier names: kinds in older ledgers and metadata.json, Session methods, commands
    old_kinds: tuple[str, ...] = ()
    old_methods: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.cli_module:
            object.__setattr__(self, "cli_module", f"privmob.cli.{self.method}")

    @property
    def method(self) -> str:
        """The :class:`~privmob.session.Session` method (``plan_<method>`` its plan)."""
        return self.name.replace("-", "_")

    def layer_of(self, by: Sequence[str] = ()) -> Layer | None:
        """The kind's map layer; a count table's (``privmob counts``) from the dimensions
        ``by`` its release counts (:func:`count_layer`)."""
        if self.spec == COUNT_SPEC and self.counts is None:
            return count_layer(self.name, by)
        return self.layer

    @property
    def spec_type(self) -> type:
        module, _, name = self.spec.rpartition(".")
        spec: type = getattr(importlib.import_module(module), name)
        return spec


#: the bound of the kinds that keep at most so many trips of each user (od, the report), which
#: they can also choose privately
OD_BOUND = Bound(
    "max_trips", ("--max-trips", "-T"), "max_trips_per_user", ("MaxTripsPerUser",), auto=True
)
#: the map layer of both landmark series (one zone column, a margin per timestamp's budget)
SERIES_LAYER = Layer("series", "zone", "series_tiles", margin="budgets")
#: the bound of the count template's kinds
COUNT_BOUND = Bound(
    "max_records", ("--max-trips", "-T"), "max_records_per_user", unit="records", auto=True
)


def count_kind(
    name: str,
    summary: str,
    records: str,
    *by: DimensionLike,
    value: Mean | str | None = None,
    spec: str = COUNT_SPEC,
) -> Kind:
    """A kind of the count template declared as data: ``records`` counted by the dimensions
    ``by`` (typed, ``pm.Duration([0, 15, 60])``, kept as given; or spelled, ``"hour"``, parsed
    here once: :func:`~privmob.releases.dimensions.parse_dimension`), with ``value``
    (``pm.Mean("duration", 0, 180)`` or ``"duration:0:180"``) also the clamped value's mean per
    cell (:class:`Counts`); its command, Session method, plan,
    metadata and map layer come with it. ``spec``: the dotted path of the spec type, the
    template's :class:`~privmob.releases.counts.CountSpec` or a subclass of it."""
    from privmob.releases.dimensions import as_dimension, spelling

    dims = tuple(as_dimension(b) for b in by)  # parsed once (Counts keeps them as they are)
    return Kind(
        name=name,
        summary=summary,
        shapes=LOCATED if records == TRIPS else (records,),
        spec=spec,
        cli_module="privmob.cli.counts",
        cli_help=f"Release {summary} (the count template).",
        tables=("counts", "outliers"),
        bound=COUNT_BOUND,
        definitions=TRIP_DEFINITIONS if records == TRIPS else RECORD_DEFINITIONS,
        layer=count_layer(name, [spelling(b) for b in dims]),
        programme=False,
        counts=Counts(records, dims, None if value is None else str(value)),
    )


KINDS: tuple[Kind, ...] = (
    Kind(
        name="od",
        summary="origin-destination matrices per period",
        shapes=LOCATED,
        spec="privmob.releases.specs.OdSpec",
        cli_help="Release a differentially private origin-destination matrix.",
        tables=("od", "outliers"),
        bound=OD_BOUND,
        definitions=TRIP_DEFINITIONS,
        layer=Layer("od", None, "od_flows"),
        old_kinds=("od-matrix",),
        old_methods=("od_matrix",),
    ),
    Kind(
        name="population",
        summary="users per home zone (night-time mode)",
        shapes=(EVENTS, CELL_EVENTS),
        spec="privmob.releases.specs.PopulationSpec",
        cli_help="Release DP counts of users per home zone.",
        tables=("population",),
        layer=Layer("population", "zone", "population_tiles"),
    ),
    Kind(
        name="report",
        summary="the mobility report: 15 analyses in one HTML + JSON",
        shapes=(TRIP_POINTS, GPS),
        spec="privmob.releases.report.ReportSpec",
        cli_help="A differentially private mobility report: 15 analyses, one offline HTML + JSON.",
        tables=(),
        bound=OD_BOUND,
        definitions=TRIP_DEFINITIONS,
        old_kinds=("mobility_report",),
        old_methods=("mobility_report",),
    ),
    Kind(
        name="density",
        summary="users per zone and hour of one week (EFPA)",
        shapes=(CELL_EVENTS,),
        spec="privmob.releases.specs.DensitySpec",
        cli_help="Release the number of users per zone and hour of a week (Acs and Castelluccia).",
        tables=("density", "out_of_domain", "outliers"),
        bound=Bound(
            "max_visits",
            ("--max-visits", "-T"),
            "max_visits_per_week",
            ("MaxVisitsPerWeek",),
            unit="visits",
        ),
        layer=Layer("density", "zone", "density_tiles"),
    ),
    Kind(
        name="series-counts",
        summary="events per zone and time bin under landmark privacy",
        shapes=(EVENTS,),
        spec="privmob.releases.landmark_counts.ZoneSeriesSpec",
        cli_module="privmob.cli.series",
        cli_help="Counts per zone and time bin from raw events (at most -T per user and bin, "
        "enforced),\npublished under landmark epsilon-privacy.",
        tables=("series", "budgets", "outliers"),
        bound=Bound(
            "max_per_bin",
            ("--max-trips", "-T"),
            "sensitivity_per_timestamp",
            ("MaxEventsPerBin", "MaxVisitsPerHour"),
            unit="events",
        ),
        layer=SERIES_LAYER,
        programme=False,  # a programme's "series" plans both landmark series
        old_kinds=("landmark-zone-counts",),
        old_methods=("zone_series",),
    ),
    Kind(
        name="series",
        summary="an aggregated series under landmark privacy",
        shapes=(SERIES_FILE,),
        spec="privmob.releases.specs.SeriesSpec",
        cli_help="Publish a series under landmark epsilon-privacy (uniform, skip, adaptive) or "
        "at the\nevent / user level; writes series.parquet, budgets.parquet and metadata.json.",
        tables=("series", "budgets"),
        definitions=(),
        layer=SERIES_LAYER,
        plannable=False,
        engine=False,
        old_kinds=("landmark-series",),
    ),
    Kind(
        name="counts",
        summary="a bounded count of trips, trip points or events by public dimensions",
        shapes=LOCATED,
        spec=COUNT_SPEC,
        cli_help="Release noisy counts of trips, trip points or events by public dimensions.",
        tables=("counts", "outliers"),
        bound=COUNT_BOUND,
        definitions=TRIP_DEFINITIONS,
        programme=False,
    ),
    count_kind("trips-per-hour", "trips per hour of day", TRIPS, "hour"),
    count_kind(
        "trip-duration-by-origin",
        "the mean trip duration per origin",
        TRIPS,
        "origin",
        value="duration:0:180",
    ),
)

#: the kinds declared outside privmob (:func:`register`), in the order they were registered
REGISTERED: list[Kind] = []
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
#: every name a kind was ever recorded under (older ledgers, metadata.json) -> its kind
BY_ANY_NAME: dict[str, Kind] = {n: k for k in KINDS for n in (k.name, *k.old_kinds)}
#: what derives from the registry: called on every kind, and on each kind registered later
#: (:func:`each_kind`), with a refusal asked before a kind is registered
_DERIVED: list[Callable[[Kind], None]] = []
#: a kind's name: lowercase words joined by hyphens (a command, and with ``_`` a method)
NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def every_kind() -> tuple[Kind, ...]:
    """Every kind: privmob's own (:data:`KINDS`), then those registered (:func:`register`)."""
    return (*KINDS, *REGISTERED)


def each_kind(derive: Callable[[Kind], None]) -> None:
    """Call ``derive`` on every kind now, and on each kind :func:`register` adds later (how a
    list of kinds built at import keeps deriving from the registry)."""
    for k in every_kind():
        derive(k)
    _DERIVED.append(derive)


def register(kind: Kind) -> Kind:
    """Add ``kind``, a kind declared as data (:func:`count_kind`), to the registry, and return
    it. The public point is ``pm.register_kind``, which calls this once the Session is loaded
    (so that a name one of its members has is refused). From then on, in this process, the
    kind is ``Session.<method>`` and ``plan_<method>``, ``privmob <name>`` and ``privmob plan
    <name>``, the gate and the ledger record it, its metadata and map layer follow its
    declaration, and every guarantee test iterating :func:`every_kind` runs on it. Refused
    (:class:`~privmob.errors.ConfigError`, nothing added): a kind with code of its own (no
    :class:`Counts`), a name taken or not of lowercase words joined by hyphens, a spec that is
    not the count template's (or a subclass of it), a programme kind, a name a Session member
    already has."""
    from privmob.errors import ConfigError

    hint = "declare it with privmob.releases.kinds.count_kind(name, summary, records, *by)"
    if kind.counts is None or kind.cli_module != "privmob.cli.counts" or kind.programme:
        raise ConfigError(f"{kind.name!r}: only a kind declared as data is registered", hint=hint)
    for name in (kind.name, *kind.old_kinds):
        if not NAME.fullmatch(name):
            raise ConfigError(f"{name!r} is not a kind's name", hint="e.g. trips-by-weekday")
        if name in BY_ANY_NAME:
            raise ConfigError(f"a release kind {name!r} exists", hint="choose another name")
    REGISTERED.append(kind)
    BY_NAME[kind.name] = kind
    BY_ANY_NAME.update({n: kind for n in (kind.name, *kind.old_kinds)})
    for derive in _DERIVED:
        derive(kind)
    return kind


def kind(name: str) -> Kind:
    """The kind named ``name`` (or one of its earlier names)."""
    from privmob.errors import ConfigError

    if name not in BY_ANY_NAME:
        raise ConfigError(f"unknown release kind {name!r}", hint=f"one of {', '.join(BY_NAME)}")
    return BY_ANY_NAME[name]


def names(**having: object) -> tuple[str, ...]:
    """The names of the kinds whose fields equal ``having`` (e.g. ``plannable=True``)."""
    return tuple(k.name for k in every_kind() if all(getattr(k, f) == v for f, v in having.items()))


def deprecated(old: str, new: str) -> None:
    """Warn once per call site that ``old`` is now spelt ``new``."""
    from privmob.surface import warn_caller

    warn_caller(f"{old} is deprecated: use {new} (the release kind's one name)", DeprecationWarning)
