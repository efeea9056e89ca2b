"""Contribution bounding (SPEC section 2): keep at most M units per user.

Which units a user keeps is decided by sorting that user's units on a keyed hash of
(secret key, uid, unit id) — a uniform random choice without replacement that depends only on
the user's own records and a key drawn fresh for each release. The bound is enforced here,
before aggregation, and it is the bound (never the data) that sets the sensitivity.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from privmob.engine.dialect import Dialect
from privmob.errors import ConfigError
from privmob.privacy.samplers import Randomness


def fresh_key(rng: Randomness | None = None) -> int:
    """A new 62-bit secret key for one release (derived from the seed in tests)."""
    if rng is not None and not rng.for_publication:
        return int(rng.generator.integers(0, 2**62))
    return secrets.randbits(62)


def bound_per_user(
    relation: str,
    *,
    max_units: int,
    key: int,
    dialect: Dialect,
    user: str = "uid",
    unit: Sequence[str] = ("tid",),
    partition: Sequence[str] = (),
) -> str:
    """SQL keeping at most ``max_units`` rows per user (per ``partition`` group, if given).

    ``relation`` is a table name or a parenthesised query; ``unit`` names the columns that
    identify one unit (a trip, a visit) within a user. Output has the input's columns.
    """
    if int(max_units) != max_units or max_units < 1:
        raise ConfigError(f"the contribution bound must be a whole number >= 1, got {max_units}")
    part = ", ".join([user, *partition])
    order = ", ".join([dialect.keyed_hash(key, user, *unit), *unit])
    return (
        f"SELECT * FROM (SELECT b_.*, ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY {order}) "
        f"AS _pm_rank FROM {relation} AS b_) AS bounded_ WHERE _pm_rank <= {int(max_units)}"
    )
