"""Count tables users define (``Session.counts``, ``privmob counts``) and the kinds of the
count template in the registry (``Session.<kind>``): the count template of
:mod:`privmob.releases.counts` through the session's one lifecycle."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privmob.domain import Period
from privmob.dp import as_period
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.counts import CountSpec
from privmob.releases.kinds import KINDS
from privmob.releases.specs import Plan
from privmob.results import ReleaseResult
from privmob.session.base import SessionBase


class SessionCounts(SessionBase):
    """The count template's releases (see :class:`~privmob.session.Session`)."""

    # -- count tables (the count template) -----------------------------------------------------
    def _count_spec(
        self,
        kind: str,
        epsilon: float,
        by: Sequence[str],
        records: str,
        max_records: int,
        noise: NoiseKind | str,
        delta: float,
        period: Period | None,
    ) -> CountSpec:
        return CountSpec(
            self.tessellation,
            epsilon,
            records,
            tuple(by),
            max_records,
            noise,
            delta,
            as_period(period),
            kind,
        )

    def plan_counts(
        self,
        *,
        epsilon: float,
        by: Sequence[str],
        records: str = "trips",
        max_records: int = 1,
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
        period: Period | None = None,
        kind: str = "counts",
    ) -> Plan:
        """The plan of :meth:`counts` (reads no data, charges nothing)."""
        spec = self._count_spec(kind, epsilon, by, records, max_records, noise, delta, period)
        plan: Plan = spec.plan()
        return plan

    def counts(
        self,
        *,
        epsilon: float,
        by: Sequence[str],
        records: str = "trips",
        max_records: int = 1,
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
        period: Period | None = None,
        output: str | Path | None = None,
        overwrite: bool = False,
        formats: Sequence[str] | None = None,
        kind: str = "counts",
    ) -> ReleaseResult:
        """A count table you define: ``records`` (``"trips"``, ``"trip-points"`` or
        ``"events"``) counted by the public dimensions ``by`` (``origin``, ``destination``,
        ``tile``, ``period``, ``hour``, ``weekday``, ``duration:0,5,15,60``; see
        :mod:`privmob.releases.counts`), each user keeping at most ``max_records`` records.

        Guarantee: one user changes at most ``max_records`` cells by one each (L1 and L2
        sensitivity ``max_records``, enforced by a keyed sample in the engine); every cell of
        the declared domain gets noise: epsilon-DP per user (discrete Laplace) or (epsilon,
        delta)-DP (discrete Gaussian). ``output``/``formats`` as for :meth:`od`."""
        spec = self._count_spec(kind, epsilon, by, records, max_records, noise, delta, period)
        load = {
            "trips": lambda s: s.load_trips(),
            "trip-points": SessionBase.load_trip_points,
            "events": SessionBase.load_events,
        }.get(records, SessionBase.load_events)
        return self.run(spec, load, output=output, overwrite=overwrite, formats=formats)


def _preset(kind: Any, plan: bool) -> Any:
    """``Session.<kind>`` (or ``plan_<kind>``): :meth:`SessionCounts.counts` with the kind's
    records and dimensions."""
    preset = {"records": kind.counts.records, "by": kind.counts.by, "kind": kind.name}

    def method(self: SessionCounts, **options: Any) -> Any:
        return (self.plan_counts if plan else self.counts)(**preset, **options)

    method.__name__ = f"plan_{kind.method}" if plan else kind.method
    full = inspect.signature(SessionCounts.plan_counts if plan else SessionCounts.counts)
    kept = [p for n, p in full.parameters.items() if n not in preset]
    method.__signature__ = full.replace(parameters=kept)  # type: ignore[attr-defined]
    what = f"{kind.summary}: :meth:`counts` of {kind.counts.records} by {', '.join(kind.counts.by)}"
    method.__doc__ = f"The plan of {what} (reads no data)." if plan else f"{what}."
    return method


# the kinds of the count template in the registry: a method each, and its plan
for _kind in KINDS:
    if _kind.counts is not None:
        setattr(SessionCounts, _kind.method, _preset(_kind, plan=False))
        setattr(SessionCounts, f"plan_{_kind.method}", _preset(_kind, plan=True))
