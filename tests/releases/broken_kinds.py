"""Two deliberately broken user kinds, registered like any user kind: the registry's guarantee
tests must fail on them (``test_user_kinds.py`` runs those tests on them in a process of its
own, through ``$PRIVMOB_TEST_KINDS``; they are never registered in the main test run).

- ``broken-draws-first``: its draft draws noise before returning, i.e. before the charge;
- ``broken-sensitivity``: it states a sensitivity of 1 whatever its bound, so its noise is
  calibrated to less than what one user changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import privmob as pm
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.samplers import resolve
from privmob.releases.counts import CountSpec
from privmob.releases.gate import Draft
from privmob.releases.kinds import TRIPS, count_kind


@dataclass(frozen=True)
class DrawsFirst(CountSpec):
    """Noise drawn in the draft: before the lifecycle's charge."""

    def draft(self, data: Any, accountant: Any, *, rng: Any, progress: Any) -> Draft:
        Noise(NoiseKind.DISCRETE_LAPLACE, 1.0).add(np.zeros(1, dtype=np.int64), resolve(rng))
        return super().draft(data, accountant, rng=rng, progress=progress)


@dataclass(frozen=True)
class UnderstatedSensitivity(CountSpec):
    """One user is said to change one cell by one, whatever the bound per user."""

    @property
    def sensitivity(self) -> int:
        return 1


HERE = __name__
pm.register_kind(count_kind("broken-draws-first", "trips per origin", TRIPS, "origin",
                    spec=f"{HERE}.DrawsFirst"))  # fmt: skip
pm.register_kind(count_kind("broken-sensitivity", "trips per origin", TRIPS, "origin",
                    spec=f"{HERE}.UnderstatedSensitivity"))  # fmt: skip
