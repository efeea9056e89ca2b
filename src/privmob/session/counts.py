"""Count tables users define (``Session.counts``, ``privmob counts``) and the kinds of the
count template in the registry (``Session.<kind>``): the count template of
:mod:`privmob.releases.counts` through the session's one lifecycle."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privmob.domain import StudyPeriod
from privmob.dp import as_period
from privmob.privacy.mechanisms import NoiseKind
from privmob.releases.counts import CountSpec
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
        period: StudyPeriod | None,
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
        period: StudyPeriod | None = None,
        kind: str = "counts",
    ) -> Plan:
        """The plan of :meth:`counts` (reads no data, charges nothing)."""
        spec = self._count_spec(kind, epsilon, by, records, max_records, noise, delta, period)
        return spec.plan()

    def counts(
        self,
        *,
        epsilon: float,
        by: Sequence[str],
        records: str = "trips",
        max_records: int = 1,
        noise: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
        delta: float = 0.0,
        period: StudyPeriod | None = None,
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

    def __getattr__(self, name: str) -> Any:
        """The kinds of the count template in the registry (``Session.<kind>(...)`` and
        ``plan_<kind>``): :meth:`counts` with the kind's records and dimensions."""
        from privmob.releases.kinds import KINDS

        plan = name.startswith("plan_")
        for k in KINDS:
            if k.counts is not None and k.method == name.removeprefix("plan_"):
                method: Any = self.plan_counts if plan else self.counts
                return functools.partial(
                    method, records=k.counts.records, by=k.counts.by, kind=k.name
                )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
