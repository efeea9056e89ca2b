"""Landmark privacy for time series (seed 001, SPEC 4.5).

A series (one value per timestamp, or a vector of counts per zone per timestamp) is published
with a *public* set L of landmark timestamps. Landmark-neighbouring series differ in the
events at the landmarks and at one more timestamp; a mechanism made of per-timestamp
eps_t-DP parts with independent noise satisfies landmark epsilon-privacy iff

    for every t:  sum_{i in L u {t}} eps_i <= epsilon            (the landmark theorem)

Every scheme below produces a budget sequence eps_t, and :func:`verify_landmark_budget`
checks the theorem on it *before* anything is returned; the budgets are part of the output.

Schemes (``Scheme``):

- ``uniform``: eps_t = epsilon/(|L|+1) for every t (SPEC 4.5). When every timestamp is a
  landmark there is no regular t and epsilon/|L| satisfies the theorem; privmob uses it, so
  100% landmarks coincides with the user-level scheme and 0% with the event-level one.
- ``skip``: landmarks republish the last regular release (cost 0, a public ``fill_value``
  before the first one); regular timestamps get epsilon. WARNING: a sparse or repeated
  release pattern can reveal where the landmarks are (seed 001); the release says so.
- ``adaptive``: see :class:`AdaptiveRule` for the sampling-rate rule and the redistribution
  of the budget of skipped landmarks.
- ``event`` (reference): eps_t = epsilon at every t. epsilon-DP per *event*; it protects a
  landmark set only when L is empty (its unit is ``event``, not ``landmark``).
- ``user`` (reference): eps_t = epsilon/T. epsilon-DP for the whole series (unit ``user``):
  the theorem holds for every L.

Noise: Laplace with scale Delta/eps_t through :mod:`privmob.privacy.mechanisms`, discrete
Laplace (secure, exact) for integer series, continuous Laplace (OpenDP's sampler) for real
ones. Delta is the caller's *enforced* bound on how much one unit's event can change the
value at one timestamp (L1 over zones), e.g. "each user contributes at most c check-ins per
hour" gives Delta = c; ``value_bounds`` additionally clamps values to a declared range.
Nothing in the budgets, the noise scales or the adaptive decisions is read from the data.
"""

from __future__ import annotations

from privmob.releases.landmark.mechanism import SKIP_WARNING, SeriesResult, perturb_series
from privmob.releases.landmark.options import SeriesOptions
from privmob.releases.landmark.positions import (
    DOMAIN_FROM_DATA,
    Landmark,
    landmark_tokens,
    mark_domain_from_data,
    resolve_landmarks,
)
from privmob.releases.landmark.release import publish_series
from privmob.releases.landmark.schemes import SCHEME_UNIT, AdaptiveRule, Scheme, scheme_budgets
from privmob.releases.landmark.theorem import (
    RELATIVE_TOLERANCE,
    landmark_indices,
    landmark_spend,
    verify_landmark_budget,
)

__all__ = [
    "DOMAIN_FROM_DATA",
    "RELATIVE_TOLERANCE",
    "SCHEME_UNIT",
    "SKIP_WARNING",
    "AdaptiveRule",
    "Landmark",
    "Scheme",
    "SeriesOptions",
    "SeriesResult",
    "landmark_indices",
    "landmark_spend",
    "landmark_tokens",
    "mark_domain_from_data",
    "perturb_series",
    "publish_series",
    "resolve_landmarks",
    "scheme_budgets",
    "verify_landmark_budget",
]
