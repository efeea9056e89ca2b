"""Publishing a series: clamp to the declared range, add noise, build the tables (series,
budgets, and the outliers cell), precheck and charge the ledger."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, cast

from privmob.errors import ConfigError, InputError
from privmob.lazy_imports import np, pd
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import NoiseKind
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.releases.base import Accountant
from privmob.releases.gate import Draft, through_the_gate
from privmob.releases.landmark.mechanism import (
    SKIP_WARNING,
    Series,
    SeriesResult,
    add_noise,
    landmark_noise,
    perturb_series,
    series_values,
)
from privmob.releases.landmark.schemes import SCHEME_UNIT, AdaptiveRule, Scheme
from privmob.releases.landmark.theorem import landmark_indices, landmark_spend
from privmob.releases.release import Release

if TYPE_CHECKING:
    import numpy.typing as npt


def series_draft(
    values: npt.ArrayLike,
    landmarks: Sequence[int] | npt.NDArray[np.int64],
    epsilon: float,
    scheme: Scheme | str,
    *,
    sensitivity: float,
    accountant: Accountant,
    rng: RandomnessLike = None,
    timestamps: Sequence[object] | None = None,
    zones: Sequence[object] | None = None,
    integer: bool | None = None,
    rule: AdaptiveRule | None = None,
    fill_value: float = 0.0,
    value_bounds: tuple[float, float] | None = None,
    sensitivity_note: str = "",
    outliers: tuple[float, float] | None = None,
    kind: str = "series",
) -> Draft:
    """A series to publish under landmark epsilon-privacy with a public landmark set.

    Guarantee (schemes ``uniform``, ``skip``, ``adaptive``): landmark epsilon-privacy: for
    series that differ in the events at all landmarks plus one more timestamp, each changing
    the value at its timestamp by at most ``sensitivity`` (L1 over zones), the output
    distributions differ by at most e^epsilon. ``event``: epsilon-DP per event (one
    timestamp). ``user``: epsilon-DP for the whole series. ``value_bounds`` clamps the
    values first (an enforced range). The landmark set, the timestamps and the zones are
    public parameters. The cost (epsilon, in the scheme's unit) is prechecked before the
    data is used and charged by the gate before the noise is drawn; the tables hold only
    noisy or post-processed values plus the per-timestamp budgets (``budgets`` table).

    ``outliers = (exact value, outliers_epsilon)``: one more cell, the values outside the
    declared period (SPEC 1, invariant 1), which the caller bounds so that one unit changes
    it by at most ``sensitivity``. It gets its own noise of scale sensitivity /
    outliers_epsilon (``outliers`` table) and composes sequentially with the series: the
    cost is epsilon + outliers_epsilon, charged as two ledger entries (series, outliers).
    """
    mechanism = LandmarkNoise(
        tuple(np.asarray(list(landmarks), dtype=np.int64).tolist()),
        epsilon,
        Scheme(scheme),
        sensitivity,
        integer,
        rule,
        fill_value,
        None if outliers is None else outliers[1],
    )
    accountant.precheck(mechanism.cost)
    x = _clamped(np.asarray(values), value_bounds)
    r = resolve(rng)
    checked, noise_kind = series_values(x, sensitivity, integer)  # refused before the charge
    header = series_header(
        mechanism,
        r,
        noise_kind,
        checked.shape[-1],
        None if x.ndim == 1 else checked.shape[0],
        value_bounds=value_bounds,
        sensitivity_note=sensitivity_note,
        kind=kind,
    )

    def draw() -> Release:
        noisy = mechanism.noised(x, None if outliers is None else outliers[0], r)
        return series_release(
            noisy,
            mechanism,
            r,
            timestamps=timestamps,
            zones=zones,
            value_bounds=value_bounds,
            sensitivity_note=sensitivity_note,
            kind=kind,
        )

    return Draft(header, mechanism.description, draw)


publish_series = through_the_gate(series_draft)


@dataclass(frozen=True)
class NoisySeries:
    """What the landmark mechanism drew: the scheme's result, the landmarks' positions, the
    known notes it raised and the noisy outliers cell (``None``: a series without one)."""

    result: SeriesResult
    marks: npt.NDArray[np.int64]
    notes: list[str]
    single: bool
    outliers: float | None = None


@dataclass(frozen=True)
class LandmarkNoise:
    """The landmark series mechanism as a noise step: the scheme's noise on the series
    (:func:`perturb_series`), then, with ``outliers_epsilon``, the outliers cell's own noise
    of scale sensitivity / outliers_epsilon (in this order for a seed). Its cost: epsilon,
    plus outliers_epsilon composed sequentially (two parts, two ledger entries)."""

    landmarks: tuple[int, ...]
    epsilon: float
    scheme: Scheme
    sensitivity: float
    integer: bool | None = None
    rule: AdaptiveRule | None = None
    fill_value: float = 0.0
    outliers_epsilon: float | None = None

    @property
    def description(self) -> str:
        """The ledger's words for the release (its series part)."""
        return f"landmark series ({self.scheme.value})"

    @property
    def unit(self) -> PrivacyUnit:
        return SCHEME_UNIT[self.scheme]

    @property
    def parts(self) -> list[tuple[str, Cost]]:
        """The cost's parts, one ledger entry each (none apart: a series alone)."""
        if self.outliers_epsilon is None:
            return []
        eps_out = float(self.outliers_epsilon)
        if not (eps_out > 0 and math.isfinite(eps_out)):
            raise ConfigError(f"the outliers cell needs a budget > 0, got {eps_out}")
        return [
            (self.description, Cost.pure(self.epsilon, self.unit)),
            ("outliers cell (outside the period)", Cost.pure(eps_out, self.unit)),
        ]

    @property
    def cost(self) -> Cost:
        """epsilon (+ outliers_epsilon) in the scheme's unit."""
        total = Cost.pure(self.epsilon, self.unit)
        for _, part in self.parts[1:]:
            total = total + part
        return total

    def noised(
        self,
        x: Series,
        outliers: float | None,
        r: Randomness,
    ) -> NoisySeries:
        """The series' noise, then the outliers cell's (``outliers``: its exact value)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = perturb_series(
                x,
                self.landmarks,
                self.epsilon,
                self.scheme,
                sensitivity=self.sensitivity,
                rng=r,
                integer=self.integer,
                rule=self.rule,
                fill_value=self.fill_value,
            )
        marks = landmark_indices(self.landmarks, x.shape[-1])
        cell = None
        if outliers is not None and self.outliers_epsilon is not None:
            cell = noisy_outliers(
                outliers, self.outliers_epsilon, result.noise_kind, self.sensitivity, r
            )
        notes = known_notes(caught, self.scheme, marks)
        return NoisySeries(result, marks, notes, x.ndim == 1, cell)


def series_header(
    mechanism: LandmarkNoise,
    r: Randomness,
    noise_kind: NoiseKind,
    length: int,
    zones: int | None,
    *,
    value_bounds: tuple[float, float] | None = None,
    sensitivity_note: str = "",
    kind: str = "series",
) -> Release:
    """What the gate charges for a series of ``length`` timestamps (and ``zones`` zones;
    ``None``: a single series) before its noise exists: no table, nothing from the values."""
    scheme, sensitivity = mechanism.scheme, mechanism.sensitivity
    marks = landmark_indices(mechanism.landmarks, length)
    return Release(
        kind=kind,
        cost=mechanism.cost,
        unit=mechanism.unit,
        bounds={
            "sensitivity_per_timestamp": float(sensitivity),
            "sensitivity_source": sensitivity_note or "declared by the caller",
            "value_bounds": list(value_bounds) if value_bounds is not None else None,
        },
        noise={
            "kind": noise_kind.value,
            "scale": "sensitivity / epsilon_t per timestamp (see the budgets table)",
        },
        params={
            "scheme": scheme.value,
            "epsilon": float(mechanism.epsilon),
            "landmarks": marks.tolist(),
            "adaptive_rule": asdict(mechanism.rule or AdaptiveRule())
            if scheme is Scheme.ADAPTIVE
            else None,
            "fill_value": mechanism.fill_value if scheme is Scheme.SKIP else None,
        },
        domain={"timestamps": length, "zones": zones},
        tables={},
        for_publication=r.for_publication,
        cost_parts=mechanism.parts,
    )


def series_release(
    noisy: NoisySeries,
    mechanism: LandmarkNoise,
    r: Randomness,
    *,
    timestamps: Sequence[object] | None = None,
    zones: Sequence[object] | None = None,
    value_bounds: tuple[float, float] | None = None,
    sensitivity_note: str = "",
    kind: str = "series",
) -> Release:
    """The release of a noisy series (post-processing only: tables, bounds, metadata and the
    cost's parts); not charged."""
    result, marks = noisy.result, noisy.marks
    sensitivity = mechanism.sensitivity
    length = result.values.shape[-1]
    labels: list[object] = list(timestamps) if timestamps is not None else list(range(length))
    if len(labels) != length:
        raise ConfigError(f"{len(labels)} timestamp labels for a series of {length}")
    zone_labels: list[object] = (
        list(zones) if zones is not None else list(range(result.values.shape[0]))
    )
    release = series_header(
        mechanism,
        r,
        result.noise_kind,
        length,
        None if noisy.single else len(zone_labels),
        value_bounds=value_bounds,
        sensitivity_note=sensitivity_note,
        kind=kind,
    )
    release.tables = {
        "series": series_table(result, labels, None if noisy.single else zone_labels),
        "budgets": budgets_table(result, labels, marks, sensitivity),
    }
    eps_out = mechanism.outliers_epsilon
    if noisy.outliers is not None and eps_out is not None:
        release.tables["outliers"] = outliers_table(noisy.outliers, eps_out, sensitivity)
    release.extra = {
        "max_landmark_spend": float(landmark_spend(result.epsilons, marks).max()),
        "sum_epsilon_t": float(result.epsilons.sum()),
        "outliers_epsilon": float(eps_out) if eps_out is not None else None,
        "composition": "series (landmark theorem) + outliers cell, sequential"
        if eps_out is not None
        else "series (landmark theorem)",
        "warnings": list(noisy.notes),
    }
    return release


def _clamped(x: Series, value_bounds: tuple[float, float] | None) -> Series:
    """The values clamped to the declared range (an enforced bound), or as given."""
    if value_bounds is None:
        return x
    lo, hi = value_bounds
    if not lo < hi:
        raise ConfigError("value bounds need lower < upper")
    clipped = cast("Series", np.clip(x, lo, hi))  # numpy's clip keeps the array's kind
    return clipped


def series_table(
    result: SeriesResult, labels: list[object], zone_labels: list[object] | None
) -> pd.DataFrame:
    """The released values, one row per timestamp (and zone, for a series per zone); whole
    numbers for discrete Laplace noise."""
    released = result.values
    if result.noise_kind.traits.exact_pure:
        released = np.round(released).astype(np.int64)
    length = released.shape[-1]
    if zone_labels is None:
        return pd.DataFrame({"t": np.arange(length), "timestamp": labels, "value": released[0]})
    z, n = released.shape
    return pd.DataFrame(
        {
            "zone": [zone for zone in zone_labels for _ in range(n)],
            "t": np.tile(np.arange(n), z),
            "timestamp": labels * z,
            "value": released.ravel(),
        }
    )


def budgets_table(
    result: SeriesResult, labels: list[object], marks: npt.NDArray[np.int64], sensitivity: float
) -> pd.DataFrame:
    """The public per-timestamp budgets, noise scales and sampling rates (no data value)."""
    length = len(labels)
    is_mark = np.zeros(length, dtype=bool)
    is_mark[marks] = True
    with np.errstate(divide="ignore"):
        scales = np.where(result.epsilons > 0, sensitivity / result.epsilons, np.inf)
    return pd.DataFrame(
        {
            "t": np.arange(length),
            "timestamp": labels,
            "landmark": is_mark,
            "epsilon_t": result.epsilons,
            "published": result.published,
            "noise_scale": scales,
            "sampling_rate": result.rates,
        }
    )


def noisy_outliers(
    value: float, eps_out: float, kind: NoiseKind, sensitivity: float, r: Randomness
) -> float:
    """The noisy cell of the values outside the declared period (its own budget ``eps_out``,
    scale sensitivity / eps_out); a whole number for an integer series."""
    value = float(value)
    if not math.isfinite(value):
        raise InputError("the outliers cell must hold a finite number")
    whole = kind.traits.exact_pure
    if whole and value != round(value):
        raise InputError("the outliers cell of an integer series must be a whole number")
    exact = np.array([round(value)], dtype=np.int64) if whole else np.array([value])
    noisy = add_noise(landmark_noise(kind, eps_out, sensitivity), exact, r)
    return round(float(noisy[0])) if whole else float(noisy[0])


def outliers_table(cell: float, eps_out: float, sensitivity: float) -> pd.DataFrame:
    """The one noisy cell of the values outside the declared period, with its own budget."""
    return pd.DataFrame(
        {
            "cell": ["outside the period"],
            "value": [cell],
            "epsilon": [eps_out],
            "noise_scale": [sensitivity / eps_out],
        }
    )


def known_notes(
    caught: list[warnings.WarningMessage], scheme: Scheme, marks: npt.NDArray[np.int64]
) -> list[str]:
    """Only known, data-independent notes reach the metadata (a warning raised while working
    on the exact series could quote a data value)."""
    notes = [SKIP_WARNING] if any(str(w.message) == SKIP_WARNING for w in caught) else []
    if scheme is Scheme.EVENT and marks.size:
        notes.append("event-level scheme: the landmarks are NOT protected as a whole")
    return notes
