"""Error measures of the utility benchmark (``bench_utility.py``, docs/utility.md).

Every measure compares an estimate with the truth over the same cells. Noisy counts may be
negative: shares are taken of the counts clamped at 0 (what a reader of a share map does).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: cells with at least this many true records are "large" (issue 40: flows >= 100 trips)
LARGE = 100
TOP_K = 50
QUARTILES = ("q1", "median", "q3")


def shares(counts: np.ndarray) -> np.ndarray:
    """Counts clamped at 0, divided by their sum (all zeros stay zeros)."""
    c = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    total = c.sum()
    return c / total if total > 0 else c


def tv_distance(truth: np.ndarray, estimate: np.ndarray) -> float:
    """Total-variation distance of the two share vectors, in [0, 1]."""
    return 0.5 * float(np.abs(shares(truth) - shares(estimate)).sum())


def top_k_recall(truth: np.ndarray, estimate: np.ndarray, k: int = TOP_K) -> float:
    """Share of the k largest true cells that are among the k largest estimated cells."""
    k = min(k, len(truth))
    true_top = set(np.argsort(-np.asarray(truth), kind="stable")[:k].tolist())
    est_top = set(np.argsort(-np.asarray(estimate), kind="stable")[:k].tolist())
    return len(true_top & est_top) / k if k else float("nan")


def large_cell_error(
    truth: np.ndarray, estimate: np.ndarray, floor: int = LARGE
) -> tuple[float, int]:
    """Median relative error |estimate - truth| / truth of the cells with truth >= ``floor``,
    and how many such cells there are (NaN, 0 when there are none)."""
    t = np.asarray(truth, dtype=np.float64)
    big = t >= floor
    if not big.any():
        return float("nan"), 0
    rel = np.abs(np.asarray(estimate, dtype=np.float64)[big] - t[big]) / t[big]
    return float(np.median(rel)), int(big.sum())


def relative_errors(truth: dict[str, float], estimate: dict[str, float]) -> dict[str, float]:
    """|estimate - truth| / |truth| per key of ``truth`` (NaN where the truth is 0)."""
    return {
        k: abs(estimate[k] - v) / abs(v) if v else float("nan")
        for k, v in truth.items()
        if k in estimate
    }


def aligned(
    truth: pd.DataFrame, estimate: pd.DataFrame, keys: list[str], value: str
) -> tuple[pd.Series, pd.Series]:
    """The value column of both tables over the union of their keys (a missing cell is 0)."""
    t = truth.set_index(keys)[value].astype(np.float64)
    e = estimate.set_index(keys)[value].astype(np.float64)
    index = t.index.union(e.index)
    return t.reindex(index, fill_value=0), e.reindex(index, fill_value=0)


def grouped_tv(truth: pd.Series, estimate: pd.Series, groups: pd.Index) -> float:
    """TV of the shares after summing the cells by ``groups`` (one label per cell; the noisy
    cells are summed as published, then clamped: post-processing of the release)."""
    return tv_distance(
        truth.groupby(groups.to_numpy()).sum().to_numpy(),
        estimate.groupby(groups.to_numpy()).sum().to_numpy(),
    )


def folded_histogram(truth: pd.DataFrame, estimate: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A histogram table (bin_lo, bin_hi, count, is_outliers) of the truth on the estimate's
    bins: true bins that the estimate does not declare (the unbounded truth's trips per user
    above M) are added to the outliers cell, as a value above the range would be."""
    est = estimate.sort_values(["is_outliers", "bin_lo"])
    t_bins = truth[~truth.is_outliers].set_index("bin_lo")["count"]
    lows = est.loc[~est.is_outliers, "bin_lo"].to_numpy()
    inside = t_bins.reindex(lows, fill_value=0).to_numpy(dtype=np.float64)
    outliers = float(truth["count"].sum()) - float(inside.sum())
    t = np.append(inside, outliers)
    return t, est["count"].to_numpy(dtype=np.float64)


def quartiles_of(values: np.ndarray) -> dict[str, float]:
    q = np.quantile(np.asarray(values, dtype=np.float64), [0.25, 0.5, 0.75])
    return dict(zip(QUARTILES, q.tolist(), strict=True))


def density_relative_errors(
    truth: np.ndarray, estimate: np.ndarray, gamma_share: float = 0.001
) -> np.ndarray:
    """|estimate - truth| / max(gamma, truth) per zone (rows) and hour (columns), gamma =
    ``gamma_share`` of the zone's weekly total (seed 004's sanity bound). The mean over hours
    is a zone's MRE (privmob.evaluate.density_metrics.mre); the mean over zones, an hour's."""
    t = np.asarray(truth, dtype=np.float64)
    denom = np.maximum(gamma_share * t.sum(axis=1, keepdims=True), t)
    diff = np.abs(np.asarray(estimate, dtype=np.float64) - t)
    return np.divide(diff, denom, out=np.zeros_like(t), where=denom > 0)
