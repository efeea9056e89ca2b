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

from typing import Literal, TypeVar

from privmob.dp import PerUser
from privmob.errors import ConfigError
from privmob.releases.kinds import kind as kind_named
from privmob.surface import warn_caller

Earlier = TypeVar("Earlier")


def per_user_bound(
    kind: str, per_user: PerUser | None, earlier: Earlier | None, *, records: str | None = None
) -> Earlier | int | Literal["auto"] | None:
    """The bound a release of ``kind`` takes: ``per_user``'s (its unit checked against the
    kind's, ``"auto"`` only where the kind chooses it), or the value of the kind's earlier
    keyword ``earlier`` as it was given (a number, ``"auto"`` or a typed bound, which the
    release checks as before), with a :class:`FutureWarning`; ``None`` when neither is given
    (the release's default). ``records``: what a count counts (its bound's unit may name it)."""
    bound = kind_named(kind).bound
    if bound is None:
        raise ConfigError(f"a release of {kind} has no per-user bound")
    if earlier is not None:
        if per_user is not None:
            raise ConfigError(
                f"the per-user bound is given twice: per_user= and {bound.keyword}=",
                hint=f"give per_user= alone ({bound.keyword}= is its earlier spelling)",
            )
        number = getattr(earlier, "value", earlier)  # a typed bound's number
        typed = "" if earlier is number else f"{type(earlier).__name__} and "
        warn_caller(
            f"{typed}{bound.keyword}= are deprecated and will be removed in the next minor "
            f"version: use per_user=pm.PerUser({number!r}, {bound.unit!r}) (the one per-user "
            "bound of every release)",
            FutureWarning,
        )
        return earlier
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
) -> Earlier | int | None:
    """:func:`per_user_bound` of a kind that does not choose its bound (``report``,
    ``density``, ``series-counts``): a number, a typed bound or ``None``."""
    bound = per_user_bound(kind, per_user, earlier)
    if isinstance(bound, str):  # "auto" given by the earlier keyword
        declared = kind_named(kind).bound
        unit = declared.unit if declared else "trips"
        raise ConfigError(
            f"a release of {kind} does not choose its bound privately",
            hint=f"give a whole number: per_user=pm.PerUser(10, {unit!r})",
        )
    return bound
