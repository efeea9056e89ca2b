"""The report's count vectors are the count template's cells (releases/counts.py): a
:class:`CountVector` over the template's dimensions puts every record in the cell that
``count_release`` would (``cell_sql``), its once-per-row form equals the inline form that
Spark's fused scan uses, and the noise step is the template's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmob.domain import Period
from privmob.engine import DuckDBEngine, dense_counts
from privmob.privacy.mechanisms import calibrate
from privmob.releases.counts import (
    CountSpec,
    CountVector,
    cell_sql,
    count_vectors,
    noisy_cells,
)
from privmob.releases.dimensions import dimension, parse_dimensions

K = 3


@pytest.fixture
def trips() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 400
    start = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 14 * 24 * 60, n), "min")
    frame = pd.DataFrame(
        {
            "origin": rng.integers(-1, K + 1, n),  # -1 and K: outside the tessellation
            "destination": rng.integers(0, K, n).astype("float"),
            "start_time": start,
        }
    )
    frame.loc[::37, "destination"] = np.nan  # a trip without a destination tile
    return frame


class _Tiles:
    k = K
    tile_ids = tuple(range(K))


@pytest.mark.parametrize("by", [("origin",), ("origin", "destination"), ("weekday", "hour")])
def test_a_count_vector_counts_each_record_in_the_template_cell(
    trips: pd.DataFrame, by: tuple[str, ...]
) -> None:
    eng = DuckDBEngine()
    eng.register("pm_cv_trips", trips)
    spec = CountSpec(_Tiles(), 1.0, "trips", parse_dimensions(",".join(by)), 1)  # type: ignore[arg-type]
    want = dense_counts(
        eng,
        f"SELECT {cell_sql(spec, eng.dialect)} AS i0, count(*) AS n FROM pm_cv_trips GROUP BY i0",
        (int(np.prod(spec.shape)) + 1,),
    )
    dims = tuple(dimension(b, range(K), Period()) for b in by)
    vector = CountVector("pm_cv_trips", dims, time="start_time", k=K)
    term = vector.term(eng.dialect)
    got = count_vectors(eng, {"v": ([term], vector.size)})["v"]
    np.testing.assert_array_equal(got, want)
    assert got.sum() == len(trips) and (by[0] != "origin" or got[-1] > 0)  # outliers counted
    inline = dense_counts(
        eng,
        f"SELECT {term.inline_cell()} AS i0, count(*) AS n FROM pm_cv_trips GROUP BY i0",
        (vector.size,),
    )
    np.testing.assert_array_equal(inline, got)  # Spark's fused form: the same cells


def test_a_vector_without_outliers_cell_keeps_only_rows_its_condition_keeps(
    trips: pd.DataFrame,
) -> None:
    eng = DuckDBEngine()
    eng.register("pm_cv_trips", trips)
    weekday = dimension("weekday", range(K), Period())
    vector = CountVector(
        "pm_cv_trips", (weekday,), time="start_time", where="origin >= 0", outliers=False
    )
    got = count_vectors(eng, {"v": ([vector.term(eng.dialect)], vector.size)})["v"]
    assert vector.size == 7 and got.sum() == int((trips["origin"] >= 0).sum())
    want = trips.loc[trips["origin"] >= 0, "start_time"].dt.day_of_week.value_counts()
    np.testing.assert_array_equal(got, want.reindex(range(7), fill_value=0).to_numpy())


def test_the_noise_step_is_independent_noise_on_every_cell() -> None:
    noise, _ = calibrate("discrete-laplace", 1.0, l1_sensitivity=2)
    exact = np.zeros(10_000, dtype=np.int64)
    a, b = noisy_cells(exact, noise, 3), noisy_cells(exact, noise, 3)
    np.testing.assert_array_equal(a, b)  # a test seed: the same draws
    assert a.dtype == np.int64 and np.count_nonzero(a) > 5_000  # zero cells get noise too
    # discrete Laplace with scale 2: the variance is 2 e^-1/2 / (1 - e^-1/2)^2 = 7.83;
    # 10,000 draws (kurtosis about 6): the sample variance is off by 10% (4.5 standard
    # errors) with probability about 1e-5 for a seed
    assert abs(a.var() / 7.83 - 1) < 0.1
