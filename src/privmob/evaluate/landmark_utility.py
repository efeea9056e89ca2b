"""Utility of the landmark schemes (SPEC 4.5): mean absolute error over landmark shares.

For each landmark share (0% .. 100% of the timestamps, a seeded random, public landmark set)
and each scheme, the MAE between the released and the true series is averaged over trials.
Every scheme in a trial uses the same seed, so at 0% landmarks ``uniform`` releases exactly
what ``event`` releases and at 100% exactly what ``user`` releases (same budgets and noise).

The real series: hourly Gowalla check-ins in a Manhattan box over a public period, each user
contributing at most ``max_per_hour`` check-ins per hour (enforced here), so the sensitivity
per hour is ``max_per_hour``. This is an evaluation (a simulation on data), not a release.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from privmob.errors import InputError
from privmob.releases.landmark import Scheme, perturb_series

MANHATTAN = (40.70, -74.02, 40.88, -73.91)  # lat_min, lng_min, lat_max, lng_max
DEFAULT_PERIOD = ("2010-09-01", "2010-10-01")  # public: [start, end) in UTC, 720 hours
DEFAULT_SHARES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)
ALL_SCHEMES = (Scheme.EVENT, Scheme.UNIFORM, Scheme.ADAPTIVE, Scheme.SKIP, Scheme.USER)


def synthetic_series(length: int = 720, seed: int = 0) -> np.ndarray:
    """Hourly counts with a daily cycle: Poisson(30 + 20 sin(2 pi t / 24)), integer."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    return rng.poisson(30 + 20 * np.sin(2 * np.pi * t / 24)).astype(np.int64)


def gowalla_hourly_counts(
    path: str | Path,
    *,
    bbox: tuple[float, float, float, float] = MANHATTAN,
    period: tuple[str, str] = DEFAULT_PERIOD,
    max_per_hour: int = 1,
) -> pd.Series:
    """Hourly check-ins in ``bbox`` over the public ``period``, at most ``max_per_hour`` per
    user per hour. Reads the Gowalla TSV (user, utc_time, lat, lng, location_id)."""
    src = Path(path)
    if not src.is_file():
        raise InputError("file not found", source=str(src))
    df = pd.read_csv(src, sep="\t", header=None, names=["uid", "time", "lat", "lng", "location_id"])
    df["time"] = pd.to_datetime(df["time"], utc=True).dt.tz_localize(None)
    lat0, lng0, lat1, lng1 = bbox
    start, end = pd.Timestamp(period[0]), pd.Timestamp(period[1])
    inside = (
        df["lat"].between(lat0, lat1)
        & df["lng"].between(lng0, lng1)
        & (df["time"] >= start)
        & (df["time"] < end)
    )
    hours = df.loc[inside].assign(hour=lambda d: d["time"].dt.floor("h"))
    per_user = hours.groupby(["uid", "hour"]).size().clip(upper=max_per_hour)
    counts = per_user.groupby(level="hour").sum()
    grid = pd.date_range(start, end, freq="h", inclusive="left")  # the public domain
    return counts.reindex(grid, fill_value=0).astype(np.int64).rename("checkins")


def landmark_set(length: int, share: float, seed: int) -> np.ndarray:
    """A seeded random set of round(share * length) landmark timestamps."""
    k = round(share * length)
    return np.sort(np.random.default_rng(seed).choice(length, size=k, replace=False))


def utility_table(
    values: np.ndarray,
    *,
    epsilon: float = 1.0,
    sensitivity: float = 1.0,
    shares: Sequence[float] = DEFAULT_SHARES,
    schemes: Sequence[Scheme | str] = ALL_SCHEMES,
    trials: int = 5,
    seed: int = 0,
) -> pd.DataFrame:
    """MAE (and mean budget per timestamp) of each scheme at each landmark share."""
    x = np.asarray(values)
    rows = []
    for share in shares:
        marks = landmark_set(x.shape[-1], share, seed)
        for scheme in map(Scheme, schemes):
            maes, eps_mean, fresh = [], [], []
            for trial in range(trials):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = perturb_series(
                        x, marks, epsilon, scheme, sensitivity=sensitivity,
                        rng=seed * 1000 + trial,
                    )  # fmt: skip
                maes.append(float(np.mean(np.abs(res.values - x))))
                eps_mean.append(float(res.epsilons.mean()))
                fresh.append(float(res.published.mean()))
            rows.append(
                {
                    "share": share,
                    "landmarks": int(marks.size),
                    "scheme": scheme.value,
                    "mae": float(np.mean(maes)),
                    "mean_epsilon_t": float(np.mean(eps_mean)),
                    "fresh_share": float(np.mean(fresh)),
                }
            )
    return pd.DataFrame(rows)


def to_markdown(table: pd.DataFrame) -> str:
    """MAE as a share x scheme Markdown table."""
    wide = table.pivot(index="share", columns="scheme", values="mae")
    cols = [s.value for s in ALL_SCHEMES if s.value in wide.columns]
    lines = ["| landmarks | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for share, row in wide[cols].iterrows():
        lines.append(f"| {share:.0%} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines) + "\n"


def plot_utility(tables: dict[str, pd.DataFrame], path: str | Path) -> Path:
    """MAE versus landmark share, one panel per series (PNG, matplotlib Agg)."""
    from privmob.extras import pyplot

    plt = pyplot("the utility plot")

    fig, axes = plt.subplots(1, len(tables), figsize=(5.5 * len(tables), 4), squeeze=False)
    for ax, (title, table) in zip(axes[0], tables.items(), strict=True):
        for scheme, part in table.groupby("scheme", sort=False):
            ax.plot(100 * part["share"], part["mae"], marker="o", label=scheme)
        ax.set_title(title)
        ax.set_xlabel("landmarks (% of timestamps)")
        ax.set_ylabel("mean absolute error")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
