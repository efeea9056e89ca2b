"""Machine-learning membership attack on OD time series (Pyrgelis et al. 2017; seed 003, SPEC 7).

For each target user every period (day) is labelled "in" (the target made at least one trip
counted in that period's OD matrix) or "out". Periods are split in time: the first half trains,
the second half tests; each half is balanced by downsampling the larger class. Features are the
period's OD counts (all off-diagonal cells), optionally with weekday dummies. Two classifiers:
L1 logistic regression (C by 3-fold CV) and a random forest (100 trees, depth by 3-fold CV).
Three settings: raw/raw, private/private (the attacker trains on released matrices) and
raw/private (trained on raw, tested on released). The score is the mean test AUC over targets.

The private matrices come from privmob's own mechanism: every period's dense OD vector gets
noise from :func:`privmob.privacy.mechanisms.calibrate` / :meth:`Noise.add` (user-level: each
user bounded to T trips per period first, sensitivity T; trip-level: sensitivity 1), then
values below tau are set to 0 (post-processing).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privmob.errors import ConfigError, InputError
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind, calibrate
from privmob.privacy.samplers import Randomness

SETTINGS = ("raw/raw", "private/private", "raw/private")
MODELS = ("logistic", "forest")


@dataclass
class MembershipData:
    """OD counts per period of a whole population and of each attack target.

    ``aggregate``: (periods, cells) raw counts of everyone (targets included).
    ``targets``: (n_targets, periods, cells) each target's own counts.
    ``bounded``: T -> the aggregate after bounding every user to at most T trips per period
    (what a user-level release with bound T noises).
    ``weekday``: (periods,) 0 = Monday.
    """

    aggregate: np.ndarray
    targets: np.ndarray
    weekday: np.ndarray
    bounded: dict[int, np.ndarray] = field(default_factory=dict)
    target_ids: list[object] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.aggregate.ndim != 2 or self.targets.ndim != 3:
            raise ConfigError("aggregate must be (periods, cells), targets (n, periods, cells)")
        if self.targets.shape[1:] != self.aggregate.shape:
            raise ConfigError("targets and aggregate must have the same periods and cells")
        if self.weekday.shape != (self.aggregate.shape[0],):
            raise ConfigError("weekday must have one entry per period")
        if not self.target_ids:
            self.target_ids = list(range(self.targets.shape[0]))

    @property
    def periods(self) -> int:
        return int(self.aggregate.shape[0])

    def labels(self) -> np.ndarray:
        """(n_targets, periods) True where the target has a trip in the period."""
        return np.asarray(self.targets.sum(axis=2) > 0)


@dataclass(frozen=True)
class PrivateOD:
    """The OD release the attack is run against (privmob's mechanism)."""

    epsilon: float
    unit: PrivacyUnit = PrivacyUnit.TRIP
    bound: int = 1  # T for unit user
    noise: NoiseKind = NoiseKind.DISCRETE_LAPLACE
    tau: int = 0

    def release(self, data: MembershipData, rng: Randomness) -> np.ndarray:
        """Noisy (periods, cells) matrices: calibrate + Noise.add, then threshold."""
        if self.unit == PrivacyUnit.USER:
            if self.bound not in data.bounded:
                raise ConfigError(
                    f"the data has no aggregate bounded to T={self.bound}",
                    hint="build it with bounds=(T,) in synthetic_membership_data/from_trips",
                )
            counts, sens = data.bounded[self.bound], self.bound
        else:
            counts, sens = data.aggregate, 1
        noise, _cost = calibrate(self.noise, self.epsilon, l1_sensitivity=sens, unit=self.unit)
        noisy = noise.add(counts.astype(np.int64), rng)
        return np.where(noisy >= self.tau, noisy, 0)

    def label(self) -> str:
        unit = "trip" if self.unit == PrivacyUnit.TRIP else f"user T={self.bound}"
        return f"eps={self.epsilon:g} ({unit})"


# -- data --------------------------------------------------------------------------------------


def cell_index(origin: np.ndarray, destination: np.ndarray, zones: int) -> np.ndarray:
    """Index of the off-diagonal OD cell (a, b), a != b, in 0..zones*(zones-1)-1."""
    o = np.asarray(origin, dtype=np.int64)
    d = np.asarray(destination, dtype=np.int64)
    return o * (zones - 1) + np.where(d < o, d, d - 1)


def bound_per_period(user_counts: np.ndarray, bound: int, gen: np.random.Generator) -> np.ndarray:
    """Keep at most ``bound`` trips per (user, period), uniformly at random without replacement.

    ``user_counts``: (users, periods, cells) counts. Returns the bounded aggregate (periods, cells).
    """
    users, periods, cells = user_counts.shape
    flat = user_counts.reshape(users * periods, cells)
    rows, cols = np.nonzero(flat)
    reps = flat[rows, cols]
    trip_row = np.repeat(rows, reps)
    trip_cell = np.repeat(cols, reps)
    order = np.lexsort((gen.random(trip_row.size), trip_row))
    trip_row, trip_cell = trip_row[order], trip_cell[order]
    starts = np.searchsorted(trip_row, trip_row, side="left")
    keep = (np.arange(trip_row.size) - starts) < bound
    period = trip_row[keep] % periods
    out = np.zeros((periods, cells), dtype=np.int64)
    np.add.at(out, (period, trip_cell[keep]), 1)
    return out


def _pick_targets(
    user_counts: np.ndarray, n_targets: int, min_days: int, gen: np.random.Generator
) -> np.ndarray:
    active = user_counts.sum(axis=2) > 0  # (users, periods)
    half = active.shape[1] // 2
    ok = (active[:, :half].sum(axis=1) >= min_days) & (active[:, half:].sum(axis=1) >= min_days)
    ok &= (~active[:, :half]).sum(axis=1) >= min_days
    ok &= (~active[:, half:]).sum(axis=1) >= min_days
    candidates = np.flatnonzero(ok)
    if candidates.size == 0:
        raise InputError(
            f"no user is active on at least {min_days} periods in each half",
            hint="lower --min-days or use more periods",
        )
    return np.sort(gen.choice(candidates, size=min(n_targets, candidates.size), replace=False))


def _assemble(
    user_counts: np.ndarray,
    weekday: np.ndarray,
    n_targets: int,
    min_days: int,
    bounds: Sequence[int],
    gen: np.random.Generator,
    ids: Sequence[object] | None = None,
) -> MembershipData:
    targets = _pick_targets(user_counts, n_targets, min_days, gen)
    return MembershipData(
        aggregate=user_counts.sum(axis=0),
        targets=user_counts[targets],
        weekday=weekday,
        bounded={int(t): bound_per_period(user_counts, int(t), gen) for t in bounds},
        target_ids=[ids[i] for i in targets] if ids is not None else [int(i) for i in targets],
    )


def synthetic_membership_data(
    *,
    users: int = 300,
    zones: int = 8,
    periods: int = 120,
    n_targets: int = 10,
    min_days: int = 10,
    bounds: Sequence[int] = (4,),
    seed: int = 0,
) -> MembershipData:
    """A synthetic phone-data population: commuters with their own habits, weekly rhythm.

    Each user has a home and a work zone, a personal activity rate (share of days with trips,
    lower at weekends) and a few other zones visited on some days. Small populations make the
    target's trips stand out (high raw AUC), as in Pyrgelis et al.'s small datasets.
    """
    if zones < 2 or users < 1 or periods < 8:
        raise ConfigError("need zones >= 2, users >= 1 and periods >= 8")
    gen = np.random.default_rng(seed)
    cells = zones * (zones - 1)
    home = gen.integers(0, zones, users)
    work = (home + gen.integers(1, zones, users)) % zones
    rate = gen.beta(2.0, 3.0, users)
    weekday = np.arange(periods) % 7
    day_factor = np.where(weekday >= 5, 0.5, 1.0)
    active = gen.random((users, periods)) < rate[:, None] * day_factor[None, :]
    counts = np.zeros((users, periods, cells), dtype=np.int64)
    u, p = np.nonzero(active)
    hw = cell_index(home[u], work[u], zones)
    wh = cell_index(work[u], home[u], zones)
    np.add.at(counts, (u, p, hw), 1)
    np.add.at(counts, (u, p, wh), 1)
    # extra errands: Poisson number of trips from home to other zones and back
    extra = gen.poisson(0.7, u.size)
    for e in range(1, int(extra.max(initial=0)) + 1):
        sel = extra >= e
        other = (home[u[sel]] + gen.integers(1, zones, sel.sum())) % zones
        np.add.at(counts, (u[sel], p[sel], cell_index(home[u[sel]], other, zones)), 1)
        np.add.at(counts, (u[sel], p[sel], cell_index(other, home[u[sel]], zones)), 1)
    return _assemble(counts, weekday, n_targets, min_days, bounds, gen)


def from_trips(
    trips: pd.DataFrame,
    zones: int,
    *,
    n_targets: int = 10,
    min_days: int = 10,
    bounds: Sequence[int] = (4,),
    seed: int = 0,
) -> MembershipData:
    """Daily OD tensors from a trips table (``uid, start_time, origin, destination``).

    Origins/destinations are tile indices 0..zones-1 (the canonical trips schema); trips with
    origin == destination or outside the tessellation (-1) are not OD cells and are dropped.
    Periods are the calendar days from the first to the last trip (an audit input, not a
    release: it is never published).
    """
    missing = {"uid", "start_time", "origin", "destination"} - set(trips.columns)
    if missing:
        raise InputError(f"trips table lacks columns {sorted(missing)}", column=sorted(missing)[0])
    t = trips[(trips.origin >= 0) & (trips.destination >= 0) & (trips.origin != trips.destination)]
    if t.empty:
        raise InputError("no trips between two different zones")
    if int(t.origin.max()) >= zones or int(t.destination.max()) >= zones:
        raise InputError(f"tile index >= zones={zones}", column="origin")
    day = pd.to_datetime(t.start_time).dt.floor("D")
    first = day.min()
    period = ((day - first).dt.days).to_numpy()
    periods = int(period.max()) + 1
    uids, user = np.unique(t.uid.to_numpy(), return_inverse=True)
    cells = zones * (zones - 1)
    counts = np.zeros((uids.size, periods, cells), dtype=np.int64)
    np.add.at(
        counts,
        (user, period, cell_index(t.origin.to_numpy(), t.destination.to_numpy(), zones)),
        1,
    )
    weekday = ((first.dayofweek + np.arange(periods)) % 7).astype(np.int64)
    gen = np.random.default_rng(seed)
    return _assemble(counts, weekday, n_targets, min_days, bounds, gen, list(uids))


# -- attack ------------------------------------------------------------------------------------


def _balanced(idx: np.ndarray, y: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    pos, neg = idx[y[idx]], idx[~y[idx]]
    n = min(pos.size, neg.size)
    return np.sort(np.concatenate([gen.choice(pos, n, replace=False), gen.choice(neg, n, False)]))


def _features(counts: np.ndarray, weekday: np.ndarray, with_weekday: bool) -> np.ndarray:
    x = counts.astype(np.float64)
    if with_weekday:
        x = np.hstack([x, np.eye(7)[weekday]])
    return x


def _model(name: str, n_estimators: int, n_jobs: int, seed: int) -> object:
    from privmob.extras import require

    require("sklearn", "the machine-learning attack (privmob audit ml)")
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    cv = StratifiedKFold(3, shuffle=True, random_state=seed)
    if name == "logistic":
        return make_pipeline(
            StandardScaler(),
            LogisticRegressionCV(
                Cs=[0.01, 0.1, 1.0, 10.0],
                cv=cv,
                penalty="l1",
                solver="liblinear",
                scoring="roc_auc",
            ),
        )
    if name == "forest":
        return GridSearchCV(
            RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=n_jobs),
            {"max_depth": [3, 6, None]},
            cv=cv,
            scoring="roc_auc",
        )
    raise ConfigError(f"unknown model {name!r}", hint=f"one of {', '.join(MODELS)}")


def attack(
    data: MembershipData,
    releases: PrivateOD | Sequence[PrivateOD],
    *,
    models: Sequence[str] = MODELS,
    weekday: bool = False,
    n_estimators: int = 100,
    n_jobs: int = 2,
    rng: Randomness | int = 0,
    progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Mean test AUC over targets per release, model and setting.

    Settings: raw/raw, private/private and raw/private, against each private OD release. The
    raw-trained model of a target is fitted once and tested on every release. Seeded: an
    audit, never a publication (the private matrices are not for publication).
    """
    from privmob.extras import require

    require("sklearn", "the machine-learning attack (privmob audit ml)")
    from sklearn.metrics import roc_auc_score

    rels = [releases] if isinstance(releases, PrivateOD) else list(releases)
    if not rels:
        raise ConfigError("no private release to attack")
    r = rng if isinstance(rng, Randomness) else Randomness.for_tests(int(rng))
    if r.for_publication:
        raise ConfigError("the attack simulation needs a seeded Randomness")
    gen = r.generator
    raw_x = _features(data.aggregate, data.weekday, weekday)
    priv_x = [_features(rel.release(data, r), data.weekday, weekday) for rel in rels]
    labels = data.labels()
    half = data.periods // 2
    train_idx, test_idx = np.arange(half), np.arange(half, data.periods)
    aucs: dict[tuple[int, str, str], list[float]] = {
        (i, m, s): [] for i in range(len(rels)) for m in models for s in SETTINGS
    }
    seed = int(gen.integers(2**31))

    def fit(m: str, x: np.ndarray, idx: np.ndarray, y: np.ndarray) -> Any:
        return _model(m, n_estimators, n_jobs, seed).fit(x[idx], y[idx])  # type: ignore[attr-defined]

    def auc(mdl: Any, x: np.ndarray, idx: np.ndarray, y: np.ndarray) -> float:
        return float(roc_auc_score(y[idx], mdl.predict_proba(x[idx])[:, 1]))

    with warnings.catch_warnings():
        # scikit-learn's convergence and joblib-configuration chatter, not results
        warnings.simplefilter("ignore")
        for t in range(labels.shape[0]):
            y = labels[t]
            tr, te = _balanced(train_idx, y, gen), _balanced(test_idx, y, gen)
            if tr.size >= 6 and te.size >= 2:
                for m in models:
                    raw_model = fit(m, raw_x, tr, y)
                    raw_auc = auc(raw_model, raw_x, te, y)
                    for i, px in enumerate(priv_x):
                        aucs[(i, m, "raw/raw")].append(raw_auc)
                        aucs[(i, m, "raw/private")].append(auc(raw_model, px, te, y))
                        aucs[(i, m, "private/private")].append(auc(fit(m, px, tr, y), px, te, y))
            if progress:
                progress(1)
    rows = []
    for (i, m, s), vals in aucs.items():
        rows.append(
            {
                "model": m,
                "features": "od+weekday" if weekday else "od",
                "setting": s,
                "release": rels[i].label(),
                "epsilon": rels[i].epsilon,
                "mean_auc": float(np.mean(vals)) if vals else math.nan,
                "targets": len(vals),
            }
        )
    return pd.DataFrame(rows)


def auc_table(results: pd.DataFrame) -> pd.DataFrame:
    """Seed 003's Table S1 layout: rows = panel (train raw / train private) x release,
    columns = features x model, cells = mean AUC. The 'Non-private' row is raw/raw."""
    rows: list[tuple[Any, ...]] = []
    for panel, setting in (
        ("A: train raw", "raw/private"),
        ("B: train private", "private/private"),
    ):
        base = results[results.setting == "raw/raw"]
        for (feat, model), g in base.groupby(["features", "model"]):
            rows.append((panel, "non-private", f"{feat} {model}", g.mean_auc.mean()))
        sub = results[results.setting == setting]
        for (rel, feat, model), g in sub.groupby(["release", "features", "model"]):
            rows.append((panel, rel, f"{feat} {model}", float(g.mean_auc.iloc[0])))
    df = pd.DataFrame(rows, columns=["panel", "release", "column", "auc"])
    return df.pivot_table(index=["panel", "release"], columns="column", values="auc", sort=False)
