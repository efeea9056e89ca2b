"""L2 sensitivity of a count vector from the bounds the code enforces (for Gaussian noise).

One unit (a user, or a trip) adds at most ``total`` to a vector of non-negative integer counts
(its L1 bound, e.g. M trips per user) and at most ``cap`` to any one cell (a per-cell cap; with
no cap of its own, ``cap = total``). Its change ``v`` then has ``sum(v) <= total`` and
``0 <= v_i <= cap``, and ``sum(v_i^2)`` is largest when the change is packed into as few cells
as possible: ``q = total // cap`` cells at ``cap`` and one at ``r = total - q cap``, so

    ||v||_2^2 <= q cap^2 + r^2 <= cap * total          (hence ||v||_2 <= sqrt(M c))

and with no cap (``cap = total``) the bound is ``total``: one cell gets everything, and L2 is
the L1 bound. A vector made of parts that a unit changes independently (the start half and the
end half of *trips per hour*) has the sum of the parts' squared bounds.
"""

from __future__ import annotations

import math

from privmob.errors import ConfigError


def capped_l2_squared(total: int, cap: int | None = None) -> int:
    """The largest squared L2 norm of a non-negative integer vector with sum at most ``total``
    and every entry at most ``cap`` (None: ``total``, no cap of its own); exact, an integer."""
    total = int(total)
    c = total if cap is None else min(int(cap), total)
    if total < 0 or c < 0 or (cap is not None and cap < 1 and total > 0):
        raise ConfigError(f"an L2 bound needs a total >= 0 and a cap >= 1, got {total}, {cap}")
    if total == 0:
        return 0
    q, r = divmod(total, c)
    return q * c * c + r * r


def l2_of(squared: int) -> float:
    """sqrt of an integer squared sensitivity, rounded up (never below the exact root)."""
    root = math.sqrt(squared)
    while root * root < squared:
        root = math.nextafter(root, math.inf)
    return root
