"""What a series of periodic releases (daily or weekly OD matrices) costs one person.

Composition over periods (SPEC section 5): with a user-level bound per period, each period is
a separate epsilon-DP release of the same users, so the series costs the sum (sequential
composition); with one bound over the whole release the series costs epsilon once. A
trip-level release protects each trip with epsilon; a user with g trips over the series loses
g x epsilon by group privacy (seed 003: 14 trips at epsilon = 0.5 lose 7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privmob.privacy.costs import PrivacyUnit
from privmob.releases.metadata import json_object

if TYPE_CHECKING:
    from privmob.releases.release import Release


def series_cost_lines(release: Release, group_size: int | None = None) -> list[str]:
    """Plain-language lines on the total per-person cost of a (periodic) release."""
    bins = json_object(release.params.get("period")).get("bins", 1)
    periods = int(bins) if isinstance(bins, int | float | str) and bins else 1
    cost = release.cost
    bound_per = release.bounds.get("bound_per")
    lines: list[str] = []
    if release.unit is PrivacyUnit.USER:
        if bound_per == "period" and periods > 1:
            each = release.params.get("epsilon_per_part", cost.epsilon)
            lines.append(
                f"{periods} periods x epsilon={each:g} (+ the out-of-period outliers cell): "
                f"each user loses at most epsilon={cost.epsilon:g} over the series "
                "(sequential composition)"
            )
        else:
            lines.append(
                f"one bound over all {periods} period(s): each user loses at most "
                f"epsilon={cost.epsilon:g} over the series"
            )
    elif release.unit is PrivacyUnit.TRIP:
        eps = cost.epsilon
        if group_size:
            g = int(group_size)
            user = cost.for_group(g)
            lines.append(
                f"trip level: each trip is protected with epsilon={eps:g}; a user with {g} trips "
                f"over the series loses epsilon={user.epsilon:g} (group privacy)"
            )
        else:
            examples = ", ".join(f"{g} trip{'s' * (g > 1)} -> {g * eps:g}" for g in (1, 14, 100))
            lines.append(
                f"trip level: epsilon={eps:g} per trip; a user with g trips loses g x {eps:g} "
                f"(group privacy; {examples}). With rider ids, --group-size N charges a "
                "user-level budget instead; rides without them (bike share) stay per trip."
            )
    return lines
