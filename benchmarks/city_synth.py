"""A structured synthetic city for the utility benchmark (``bench_utility.py``, docs/utility.md).

Not private data and not a release: seeded input whose truth is known. It is the model of
``privmob synth`` (:mod:`privmob.data.synth`: home and work anchors, weekday commutes, other
trips from home or work to a distance-decayed destination, durations from distances) with two
changes that make it the city of issue 40:

* **skewed zone popularity**: a zone's weight as a home is Zipf, ``1 / rank ** home_zipf``, and
  as a workplace ``1 / rank ** work_zipf``, over two seeded random rankings of the zones (with
  the defaults on the 263 NYC taxi zones, the most popular zone holds 9% of the homes and 21%
  of the jobs; half of the jobs are in 8 zones);
* **heavy-tailed trips per user** with a chosen median: ``max(1, round(lognormal))`` with median
  ``median_trips`` and log-sd ``trips_sigma`` (defaults 6 and 0.9: with seed 1 and 20,000
  users, 178,810 trips over 28 days, a mean of 8.9 per user and a busiest user with 242;
  issue 40's city had 181,143 trips and a maximum of 264).

The other rules are the synth model's: on weekdays 30% of trips go home -> work around 08:00
and 30% work -> home around 17:45, weekends are 92% other trips; day weights Mon-Fri 1, Sat
0.65, Sun 0.55; 3% of trips at a uniformly random hour; clock times in UTC.

One draw gives both input shapes, trip for trip: ``trips`` (one row per trip: uid, tid,
start_time, end_time, origin, destination as taxi-zone ids; for ``od`` and ``counts``) and
``trip-points`` (uid, tid, datetime, lat, lng: exactly the origin and the destination point of
each trip, inside the same zones; for the report and ``population``). The two files are read
from the same per-chunk random streams, so the same seed gives the same trips in both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from privmob.data.synth import SynthConfig, iter_synthetic
from privmob.data.synth_model import Alias, World

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TAXI_ZONES = SHARED / "nyc_taxi_zones" / "taxi_zones.geojson"


@dataclass(frozen=True)
class CityConfig:
    """The generator's parameters (all public; the same config gives the same rows)."""

    users: int = 20_000
    days: int = 28
    start: str = "2024-01-01"  # a Monday
    median_trips: float = 6.0  # per user over the whole period
    trips_sigma: float = 0.9  # log-sd of trips per user (the tail)
    home_zipf: float = 0.8  # Zipf exponent of the zones' popularity as homes
    work_zipf: float = 1.1  # ... and as workplaces
    tessellation: str = str(TAXI_ZONES)
    seed: int = 1

    def synth_config(self) -> SynthConfig:
        """The synth model's config: the lognormal's mean from the chosen median."""
        return SynthConfig(
            n_users=self.users,
            start=self.start,
            days=self.days,
            mean_trips_per_user=self.median_trips * math.exp(self.trips_sigma**2 / 2),
            trips_sigma=self.trips_sigma,
            tessellation=self.tessellation,
            extra_points_per_trip=0.0,
            seed=self.seed,
        )


def zipf_weights(ranks: np.ndarray, exponent: float) -> np.ndarray:
    """Shares ``1 / rank ** exponent`` for ranks 1..k given as ``ranks`` (a permutation)."""
    w = 1.0 / (ranks.astype(np.float64) + 1.0) ** exponent
    return w / w.sum()


class ZipfCity(World):
    """The synth model's world with Zipf home and work popularity over random zone rankings."""

    def __init__(self, config: CityConfig) -> None:
        super().__init__(config.synth_config())
        rng = np.random.default_rng([config.seed, 0x21F])
        k = self.tess.k
        self.pop = zipf_weights(rng.permutation(k), config.home_zipf)
        self.jobs = zipf_weights(rng.permutation(k), config.work_zipf)
        self.pop_alias, self.jobs_alias = Alias(self.pop), Alias(self.jobs)


@dataclass(frozen=True)
class CityFiles:
    trips: Path  # one row per trip (od, counts)
    points: Path  # two trip points per trip (report, population)
    n_trips: int
    n_users: int


def write_city(folder: str | Path, config: CityConfig) -> CityFiles:
    """Write ``trips.parquet`` and ``trip_points.parquet`` of ``config`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    world = ZipfCity(config)
    cfg = config.synth_config()
    paths = {"trips": folder / "trips.parquet", "trip-points": folder / "trip_points.parquet"}
    rows = {}
    for kind, path in paths.items():
        writer = None
        rows[kind] = 0
        for table in iter_synthetic(kind, cfg, world):  # type: ignore[arg-type]
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
            rows[kind] += table.num_rows
        assert writer is not None
        writer.close()
    assert rows["trip-points"] == 2 * rows["trips"]
    return CityFiles(paths["trips"], paths["trip-points"], rows["trips"], config.users)
