"""The one per-user bound of every :class:`~privmob.session.Session` release:
``per_user=pm.PerUser(n, unit)``, its unit the kind's (the registry's
:class:`~privmob.releases.kinds.Bound`: ``trips`` for ``od`` and ``report``, ``records`` or
what is counted for ``counts``, ``visits`` for ``density``, ``events`` for ``series_counts``).

The earlier spellings, one keyword per kind (``max_trips``, ``max_records``, ``max_visits``,
``max_per_bin``) and the typed bounds (``MaxTripsPerUser`` ...), still work for one minor
version with a :class:`FutureWarning` at the caller's line naming the new spelling; they give
the same release (the bound is the same number).
"""

from __future__ import annotations

from privmob.dp import PerUser, _Bound
from privmob.errors import ConfigError
from privmob.releases.kinds import kind as kind_named
from privmob.surface import warn_caller

#: the earlier keywords' values: a number, "auto" or a typed bound (``pm.MaxTripsPerUser(3)``)
Earlier = int | str | _Bound


def per_user_bound(
    kind: str, per_user: PerUser | None, earlier: Earlier | None, *, records: str | None = None
) -> int | str | None:
    """The bound a release of ``kind`` takes: ``per_user``'s (its unit checked against the
    kind's, ``"auto"`` only where the kind chooses it), or the value of the kind's earlier
    keyword ``earlier`` (a number, ``"auto"``, or a typed bound of the kind's, whose number it
    is), with a :class:`FutureWarning`; ``None`` when neither is given (the release's
    default). ``records``: what a count counts (its bound's unit may name it)."""
    bound = kind_named(kind).bound
    if bound is None:
        raise ConfigError(f"a release of {kind} has no per-user bound")
    if earlier is not None:
        if per_user is not None:
            raise ConfigError(
                f"the per-user bound is given twice: per_user= and {bound.keyword}=",
                hint=f"give per_user= alone ({bound.keyword}= is its earlier spelling)",
            )
        number = earlier.value if isinstance(earlier, _Bound) else earlier
        typed = f"{type(earlier).__name__} and " if isinstance(earlier, _Bound) else ""
        if typed and type(earlier).__name__ not in bound.typed:
            raise ConfigError(
                f"{type(earlier).__name__} does not bound this release",
                hint=f"use per_user=pm.PerUser({number!r}, {bound.unit!r})",
            )
        verb = "are" if typed else "is"
        warn_caller(
            f"{typed}{bound.keyword}= {verb} deprecated and will be removed in the next minor "
            f"version: use per_user=pm.PerUser({number!r}, {bound.unit!r}) (the one per-user "
            "bound of every release)",
            FutureWarning,
        )
        return int(number) if isinstance(earlier, _Bound) else earlier
    if per_user is None:
        return None
    units = (bound.unit, records) if bound.unit == "records" and records else (bound.unit,)
    if not isinstance(per_user, PerUser):
        raise ConfigError(
            f"per_user= takes a pm.PerUser, not {type(per_user).__name__}",
            hint=f'e.g. per_user=pm.PerUser(10, "{units[-1]}")',
        )
    if per_user.unit not in units:
        raise ConfigError(
            f"a release of {kind} bounds the {' or '.join(units)} of each user, "
            f"not their {per_user.unit}",
            hint=f"e.g. per_user=pm.PerUser({per_user.bound!r}, {units[-1]!r})",
        )
    if per_user.bound == "auto" and not bound.auto:
        raise ConfigError(
            f"a release of {kind} does not choose its bound privately",
            hint=f"give a whole number: per_user=pm.PerUser(10, {units[-1]!r})",
        )
    return per_user.bound


def fixed_per_user_bound(
    kind: str, per_user: PerUser | None, earlier: Earlier | None
) -> int | None:
    """:func:`per_user_bound` of a kind that does not choose its bound (``report``,
    ``density``, ``series-counts``): a number or ``None``."""
    bound = None if isinstance(earlier, str) else per_user_bound(kind, per_user, earlier)
    if isinstance(earlier, str) or isinstance(bound, str):  # "auto", from either spelling
        declared = kind_named(kind).bound
        unit = declared.unit if declared else "trips"
        raise ConfigError(
            f"a release of {kind} does not choose its bound privately",
            hint=f"give a whole number: per_user=pm.PerUser(10, {unit!r})",
        )
    return bound
