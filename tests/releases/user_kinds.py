"""A release kind declared outside privmob, as a user declares one: a registry row made with
``count_kind`` and added through the public point, ``pm.register_kind``.

Importing this module registers it; the registry's guarantee tests (``test_kinds.py``,
``test_one_gate.py``, ``test_loaded_input.py``) import it before they iterate
``every_kind()``, so every guarantee runs on it as on privmob's own kinds."""

from __future__ import annotations

import privmob as pm
from privmob.releases.kinds import TRIPS, count_kind

#: the mean trip duration per destination and weekday, beside the trip count
USER_KIND = pm.register_kind(
    count_kind(
        "user-trip-duration-by-destination",
        "mean trip duration per destination and weekday (a user's kind)",
        TRIPS,
        "destination",
        "weekday",
        value=pm.Mean("duration", 0, 120),
    )
)
