"""The value slot of the count template: a clamped per-record value summed per cell beside the
count, and the mean as post-processing (issue 41).

``Mean("duration", 0, 180)`` (``--mean duration:0:180``) asks, for every cell of a count
table, the noisy count, the noisy sum of the records' values clamped to the declared range,
and their ratio, the mean, with its 95% margin. The values:

- ``duration``: trip minutes (end time minus start time), from the trips' times;
- ``distance``: trip kilometres (great-circle, as the ``distance`` dimension reads them);
- any numeric column of the input, in its own units (carried from the input like a
  categorical dimension's column).

Sensitivity. Each user keeps at most ``bound`` records (the template's enforced per-user
bound). A record's value is clamped to ``[lo, hi]`` and centred on the middle of that range
(``v - (lo + hi) / 2``, as PipelineDP normalises sums), so one record moves the centred sum of
its cell by at most ``(hi - lo) / 2`` and one user moves the vector of centred sums by at most
``bound * (hi - lo) / 2`` in L1 norm. A record whose value is missing counts at the middle (it
adds 0 to the centred sum). The centred values are summed exactly in thousandths of a unit
(integers, so every engine and every user bucket adds them alike).

Budget. The release's epsilon is split in two halves: discrete Laplace on the counts (scale
``bound / (epsilon / 2)``), continuous Laplace on the centred sums (scale
``bound * (hi - lo) / 2 / (epsilon / 2)``): epsilon-DP per user by sequential composition, two
ledger entries. The mean of a cell is ``middle + noisy sum / noisy count`` clamped to ``[lo,
hi]``, shown only where the noisy count is above the count's 95% margin (below it the ratio is
mostly noise); its margin comes from the delta method on the two independent noises. All of it
is post-processing: no extra cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privmob.engine.dialect import Dialect
from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import np
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.surface import spelled

if TYPE_CHECKING:
    import numpy.typing as npt

#: the values a trip has of its own (any other name is a numeric column of the input)
UNITS = {"duration": "minutes", "distance": "km"}
#: centred values are summed exactly in these parts of a unit
PARTS_PER_UNIT = 1000


@dataclass(frozen=True)
class Mean:
    """The mean of a per-record ``column`` clamped to ``[lo, hi]``, per cell (see the module's
    docstring): ``Mean("duration", 0, 180)`` is ``"duration:0:180"``."""

    column: str
    lo: float
    hi: float

    def __post_init__(self) -> None:
        if not self.column or not self.column.isidentifier():
            raise ConfigError(
                f"a mean needs a value: duration, distance or a numeric column, got "
                f"{self.column!r}",
                hint="e.g. "
                + spelled(
                    "--mean duration:0:180 (minutes) or --mean distance:0:30 (km)",
                    'pm.Mean("duration", 0, 180) (minutes) or pm.Mean("distance", 0, 30) (km)',
                ),
            )
        lo, hi = float(self.lo), float(self.hi)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(
                f"the clamp of {self.column} must be two finite numbers lo < hi, got "
                f"{self.lo}, {self.hi}",
                hint=f"e.g. {self.column}:0:180",
            )

    @classmethod
    def parse(cls, spec: str) -> Mean:
        """``COLUMN:LO:HI`` (the command line's ``--mean``)."""
        parts = str(spec).strip().split(":")
        if len(parts) != 3:
            raise ConfigError(
                f"--mean {spec!r}: give the value and its clamp as VALUE:LO:HI",
                hint="e.g. --mean duration:0:180 (minutes) or --mean distance:0:30 (km)",
            )
        try:
            lo, hi = float(parts[1]), float(parts[2])
        except ValueError:
            raise ConfigError(
                f"--mean {spec!r}: the clamp must be two numbers", hint="e.g. duration:0:180"
            ) from None
        return cls(parts[0].strip(), lo, hi)

    def __str__(self) -> str:
        return f"{self.column}:{self.lo:g}:{self.hi:g}"

    @property
    def middle(self) -> float:
        return (float(self.lo) + float(self.hi)) / 2

    @property
    def units(self) -> str:
        return UNITS.get(self.column, f"the units of the input column {self.column}")

    @property
    def distance(self) -> bool:
        """It reads the trip distance (added to the trips before counting)."""
        return self.column == "distance"

    @property
    def carried(self) -> tuple[str, ...]:
        """The input column it carries into the records (none for a trip's own value)."""
        return () if self.column in UNITS else (self.column,)

    def sensitivity(self, bound: int) -> float:
        """L1 sensitivity of the vector of centred sums: ``bound * (hi - lo) / 2``."""
        return int(bound) * (float(self.hi) - float(self.lo)) / 2

    def centred_sql(self, dialect: Dialect) -> str:
        """SQL: a record's value clamped and centred, in whole thousandths of a unit (a
        missing value: 0, the middle)."""
        from privmob.data.reading import ident
        from privmob.releases.dimensions import DISTANCE_COLUMN

        if self.column == "duration":
            start, end = dialect.epoch_seconds("start_time"), dialect.epoch_seconds("end_time")
            raw = f"(({end} - {start}) / 60.0)"
        elif self.column == "distance":
            raw = DISTANCE_COLUMN
        else:
            raw = f"TRY_CAST({ident(self.column)} AS DOUBLE)"
        lo, hi, mid = float(self.lo), float(self.hi), self.middle
        clamped = f"LEAST(GREATEST(CAST({raw} AS DOUBLE), {lo!r}), {hi!r})"
        return f"COALESCE(CAST(ROUND(({clamped} - {mid!r}) * {PARTS_PER_UNIT}) AS BIGINT), 0)"

    def to_dict(self, bound: int) -> JSONObject:
        """What ``metadata.json``'s ``params.value`` says of it."""
        return {
            "aggregate": "mean",
            "column": self.column,
            "units": self.units,
            "clamp": [float(self.lo), float(self.hi)],
            "centred_on": self.middle,
            "l1_sensitivity_of_sums": self.sensitivity(bound),
            "missing": "counted at the middle of the clamp (adds 0 to the centred sum)",
            "shown": "where the noisy count is above its 95% margin",
        }


def sum_noise(value: Mean, bound: int, epsilon: float) -> Noise:
    """Continuous Laplace on the centred sums: scale ``bound * (hi - lo) / 2 / epsilon``."""
    return Noise(NoiseKind.LAPLACE_ROUNDED, value.sensitivity(bound) / float(epsilon))


def means(
    counts: npt.NDArray[np.int64],
    sums: npt.NDArray[np.float64],
    value: Mean,
    count_noise: Noise,
    sum_noise_: Noise,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The noisy mean per cell and its 95% margin (NaN where the noisy count is at or below
    the count's 95% margin): post-processing of the noisy counts and centred sums."""
    floor = float(count_noise.margin_of_error(0.95))
    c = counts.astype(np.float64)
    shown = c > max(floor, 0.0)
    safe = np.where(shown, c, 1.0)
    centred = sums / safe
    mean = np.clip(value.middle + centred, float(value.lo), float(value.hi))
    var = (sum_noise_.std**2 + centred**2 * count_noise.std**2) / safe**2
    margin = 1.959963984540054 * np.sqrt(var)
    return np.where(shown, mean, np.nan), np.where(shown, margin, np.nan)
