"""Count tables users define (``Session.counts``, ``privmob counts``), the kinds of the count
template in the registry (``Session.<kind>``) and the zone series (``Session.series_counts``:
the template's zone x bin counts under a landmark scheme): the count template of
:mod:`privmob.releases.counts` through the session's one lifecycle."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Unpack

from privmob.domain import Period
from privmob.dp import MaxEventsPerBin, MaxVisitsPerHour, PrivacyUnit, as_period, bound_value
from privmob.errors import ConfigError
from privmob.privacy.bound_choice import choice_of
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.counts import CountSpec
from privmob.releases.dimensions import (
    DimensionLike,
    as_dimension,
    needs,
    with_trip_distance,
)
from privmob.releases.kinds import BY_NAME, COUNT_SPEC, Kind, each_kind
from privmob.releases.specs import Plan
from privmob.releases.values import Mean
from privmob.results import ReleaseResult
from privmob.session.base import SessionBase, internal
from privmob.session.bounds import fixed_per_user_bound, per_user_bound
from privmob.session.keywords import CountOptions, ZoneSeriesOptions, refuse_unknown

if TYPE_CHECKING:
    from privmob.engine.relation import Loaded
    from privmob.releases.kinds import Kind
    from privmob.releases.landmark_counts import ZoneSeriesSpec


class SessionCounts(SessionBase):
    """The count template's releases (see :class:`~privmob.session.Session`)."""

    # -- count tables (the count template) -----------------------------------------------------
    def _count_spec(
        self, by: Sequence[DimensionLike], epsilon: float, options: CountOptions
    ) -> CountSpec:
        refuse_unknown("counts", options, CountOptions)
        kind = options.get("kind", "counts")
        count_kinds = {n: k for n, k in BY_NAME.items() if k.spec == COUNT_SPEC or k.counts}
        if kind not in count_kinds:  # the ledger records registered kinds only
            raise ConfigError(
                f"{kind!r} is not a registered count kind",
                hint=f"kind= one of {', '.join(count_kinds)} (privmob.releases.kinds)",
            )
        # typed dimensions as given (the same objects); text parsed here, once
        records, dims = options.get("records", "trips"), tuple(as_dimension(b) for b in by)
        declared = count_kinds[kind].counts  # a kind declared as data: released as declared
        if declared is not None and (records, dims, options.get("value")) != (
            declared.records, declared.by, declared.mean
        ):  # fmt: skip
            raise ConfigError(
                f"a {kind} release counts {declared.records} by {declared.spelled_by}"
                + (f" with the mean of {declared.value}" if declared.value else ""),
                hint=f"use Session.{count_kinds[kind].method}, or leave out kind=",
            )
        bound = per_user_bound(
            kind, options.get("per_user"), options.get("max_records"), records=records
        )
        spec: type[CountSpec] = count_kinds[kind].spec_type  # the template's, or a subclass
        return spec(
            self.tessellation,
            epsilon,
            records,
            dims,
            1 if bound is None else bound,
            options.get("noise", NoiseKind.DISCRETE_LAPLACE),
            options.get("delta", 0.0),
            as_period(options.get("period")),
            kind,
            value=options.get("value"),
            unit=PrivacyUnit(options.get("unit", PrivacyUnit.USER)),
            bound_choice=choice_of(options),
        )

    def plan_counts(
        self, *, epsilon: float, by: Sequence[DimensionLike], **options: Unpack[CountOptions]
    ) -> Plan:
        """The plan of :meth:`counts` (reads no data, charges nothing)."""
        plan: Plan = self._count_spec(by, epsilon, options).plan()
        return plan

    def _load_counted(
        self,
        records: str,
        by: Sequence[DimensionLike],
        value: Mean | None = None,
        unit: PrivacyUnit | str = PrivacyUnit.USER,
    ) -> Loaded:
        """The ``records`` (``"trips"``, ``"trip-points"``, ``"events"``) a count ``by`` these
        dimensions reads, read and validated once: with the categorical columns it names (and
        the column of its ``value``) carried from the input, and the trip distance where it
        reads one (:func:`~privmob.releases.dimensions.with_trip_distance`). At ``unit="trip"``
        without a group size, trips without a rider id are each their own unit (as
        :meth:`_load_for`)."""
        carry, distance = needs([as_dimension(b) for b in by])  # text (a caller's): parsed
        if value is not None:
            carry = (*carry, *(c for c in value.carried if c not in carry))
            distance = distance or value.distance
        if records == "trips":
            per_trip = PrivacyUnit(unit) is PrivacyUnit.TRIP and self._accountant.group_size is None
            trips: Loaded = self._load_trips(per_trip, carry=carry, coordinates=distance)
            return with_trip_distance(trips, self._tiles()) if distance else trips
        if records == "trip-points":
            points: Loaded = self._load_trip_points(carry=carry)
            return points
        events: Loaded = self._load_events(carry=carry)
        return events

    def counts(
        self,
        *,
        epsilon: float,
        by: Sequence[DimensionLike],
        output: str | Path | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        **options: Unpack[CountOptions],
    ) -> ReleaseResult:
        """A count table you define: ``records`` (``"trips"``, ``"trip-points"`` or
        ``"events"``) counted by the public dimensions ``by`` (``origin``, ``destination``,
        ``tile``, ``zone``, ``period``, ``bin:1h``, ``hour``, ``weekday``,
        ``duration:0,5,15,60`` or ``pm.Duration([...])`` (minutes), ``distance:0,1,2,5`` or
        ``pm.Distance([...])`` (km), a categorical column ``"usertype:Subscriber,Customer"``
        or ``pm.Categorical("usertype", [...])``; see :mod:`privmob.releases.dimensions`: a
        typed dimension is kept as given, text is parsed here, once, into the typed form),
        each user keeping at most ``per_user=pm.PerUser(n, "records")`` records (default 1;
        the unit may name them: ``pm.PerUser(n, "events")`` with ``records="events"``); or,
        with ``unit="trip"``, trips counted once each, every trip its own unit (rides without
        a rider id).

        Guarantee: one user changes at most ``n`` cells by one each (L1 and L2
        sensitivity ``n``, enforced by a keyed sample in the engine); every cell of
        the declared domain gets noise: epsilon-DP per user (discrete Laplace) or (epsilon,
        delta)-DP (discrete Gaussian). The labels of every dimension are declared, never read
        from the data: a value outside them is counted in the outliers cell.
        At trip level: one trip changes one cell by one, epsilon-DP per trip.
        ``output``/``formats`` as for :meth:`od`; ``options``
        (:class:`~privmob.session.keywords.CountOptions`, shared with :meth:`plan_counts`):
        ``records``, ``per_user`` (``max_records=n``: its deprecated spelling), ``unit``,
        ``noise``, ``delta``, ``period``, ``kind``, ``value``: ``pm.Mean("duration", 0, 180)``
        adds per cell the noisy mean of the value clamped to ``[0, 180]`` and its 95% margin
        (half the budget on the counts, half on the sums: :mod:`privmob.releases.values`)."""
        spec = self._count_spec(by, epsilon, options)
        return self.run(
            spec,
            functools.partial(
                SessionCounts._load_counted,
                records=spec.records,
                by=spec.by,
                value=spec.value,
                unit=spec.unit,
            ),
            output=output,
            overwrite=overwrite,
            formats=formats,
        )

    # -- zone series (series-counts): the count template's zone x bin, landmark noise -------------
    def _series_counts_spec(
        self, epsilon: float, period: Period, options: ZoneSeriesOptions
    ) -> ZoneSeriesSpec:
        # the landmark modules on first use: not before the plan of another release (issue 43)
        from privmob.releases.landmark import Scheme
        from privmob.releases.landmark_counts import ZoneSeriesSpec

        refuse_unknown("series_counts", options, ZoneSeriesOptions)
        freq = options.get("freq", "1h")
        earlier = options.get("max_per_bin")
        if isinstance(earlier, MaxVisitsPerHour) and freq not in ("1h", "h", "60min"):
            raise ConfigError(
                f"MaxVisitsPerHour bounds hourly bins, not bins of {freq}",
                hint='use per_user=pm.PerUser(n, "events") (per bin), or freq="1h"',
            )
        max_per_bin = fixed_per_user_bound("series-counts", options.get("per_user"), earlier)
        study = as_period(period)
        if study.start is None or study.end is None:
            raise ConfigError(
                "a zone series needs a declared study period",
                hint='pass period=pm.Period("2024-01-01", "2024-01-08")',
            )
        bound = int(bound_value(max_per_bin, MaxEventsPerBin) or 1)  # None: 1
        return ZoneSeriesSpec.declared(
            self._tiles(),
            epsilon=epsilon,
            start=study.start.isoformat(sep=" "),
            end=study.end.isoformat(sep=" "),
            freq=freq,
            max_per_bin=bound,
            landmarks=options.get("landmarks", ()),
            scheme=options.get("scheme", Scheme.UNIFORM),
            outliers_epsilon=options.get("outliers_epsilon"),
        )

    def plan_series_counts(
        self, *, epsilon: float, period: Period, **options: Unpack[ZoneSeriesOptions]
    ) -> Plan:
        """The plan of :meth:`series_counts` (reads no data, charges nothing)."""
        return self._series_counts_spec(epsilon, period, options).plan()

    def series_counts(
        self,
        *,
        epsilon: float,
        period: Period,
        output: str | Path | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        **options: Unpack[ZoneSeriesOptions],
    ) -> ReleaseResult:
        """Events per zone and time bin (``privmob series-counts``), from events or trip points:
        the count template's ``zone`` x ``bin:<freq>``, published under landmark privacy.

        Guarantee: each user keeps at most ``per_user=pm.PerUser(n, "events")`` events per bin
        (enforced; default 1; ``max_per_bin=n`` is its deprecated spelling), the
        series is published under landmark epsilon-privacy by ``scheme`` (uniform, skip,
        adaptive: per landmark; event; user) with ``landmarks`` as bin positions (integers) or
        bin starts (text or datetimes; public); the events outside the period get one noisy
        cell costing ``outliers_epsilon`` (default 0.1 x epsilon) on top. The ledger is charged
        epsilon + outliers_epsilon in the scheme's unit: give the session ``unit=`` to match
        (e.g. ``pm.PrivacyUnit.LANDMARK``).

        ``output``: a folder where the release is published atomically (staged, charged,
        renamed into place; refused before anything is read if it cannot be written), with
        map layers in ``formats`` (``geoparquet``, ``geojson``, ``csv``) beside its tables.
        Without it the release is charged and returned; write it later with ``write``.
        ``options`` (:class:`~privmob.session.keywords.ZoneSeriesOptions`, shared with
        :meth:`plan_series_counts`): ``freq``, ``per_user``, ``landmarks``, ``scheme``,
        ``outliers_epsilon``.
        """
        spec = self._series_counts_spec(epsilon, period, options)
        return self.run(
            spec, SessionBase._load_events, output=output, overwrite=overwrite, formats=formats
        )


class _Preset(Protocol):
    """``Session.<kind>`` (or ``plan_<kind>``) as made by :func:`_preset`."""

    def __call__(self, session: SessionCounts, /, **options: object) -> ReleaseResult | Plan: ...


def _preset(kind: Kind, plan: bool) -> _Preset:
    """``Session.<kind>`` (or ``plan_<kind>``): :meth:`SessionCounts.counts` with what the
    kind declares: its records, dimensions and value (:class:`~privmob.releases.kinds.Counts`)."""
    assert kind.counts is not None  # a kind of the count template
    preset: dict[str, object] = {
        "records": kind.counts.records, "by": kind.counts.by, "kind": kind.name
    }  # fmt: skip
    if kind.counts.value is not None:
        preset["value"] = kind.counts.mean

    def method(self: SessionCounts, /, **options: object) -> ReleaseResult | Plan:
        # the method's signature is the template's (``__signature__`` below): checked there
        run = getattr(self, "plan_counts" if plan else "counts")
        made: ReleaseResult | Plan = run(**preset, **options)
        return made

    method.__name__ = f"plan_{kind.method}" if plan else kind.method
    full = inspect.signature(
        SessionCounts.plan_counts if plan else SessionCounts.counts, eval_str=True
    )
    kept = [p for n, p in full.parameters.items() if n not in preset]
    method.__signature__ = full.replace(parameters=kept)  # type: ignore[attr-defined]
    what = f"{kind.summary}: :meth:`counts` of {kind.counts.records} by {kind.counts.spelled_by}"
    if kind.counts.value is not None:
        what += f" with the mean of {kind.counts.value}"
    method.__doc__ = f"The plan of {what} (reads no data)." if plan else f"{what}."
    return method


def _methods(kind: Kind) -> None:
    """A kind declared as data (the count template's): a method, and its plan."""
    if kind.counts is not None:
        setattr(SessionCounts, kind.method, _preset(kind, plan=False))
        setattr(SessionCounts, f"plan_{kind.method}", _preset(kind, plan=True))


# every kind of the count template in the registry, and each one registered later
each_kind(_methods)
internal(SessionCounts, "load_counted", "_load_counted", "the session's reading of its input")
