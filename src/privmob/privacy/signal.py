"""Is there any signal? Warnings from public parameters (before) and noisy values (after).

Before a release, :func:`expected_signal` states from the noise scale alone (public: bound,
epsilon, noise kind) the relative error of a cell of a given true count, and the smallest count
that reaches a given relative error. After it, :func:`signal_check` looks at the *noisy*
published values only (post-processing) and warns when most cells are within their 95% margin
of 0 *because of the margin*, i.e. cannot be told from an empty cell: with 10 users
(Cabspotting) or 2 (GeoLife) every user-level count is noise, and the reader must be told in
words, not only by the margins. Sparse data are not noise: at epsilon 50 (margin +-0) 99% of an
OD matrix's cells are 0 because they are empty, and its used cells clear the noise floor; then
the check says the data are sparse and does not warn.

:func:`noise_floor` is the level that the noise of none of N cells reaches with 95% probability
(union bound): rankings, "top flows" and map layers show only values above it.
:func:`is_signal` is the one rule every picture, ranking and caption applies: a noisy value is
signal iff it is above the noise floor of its *family* (the cells its caption talks about: the
tiles of a map, the bars of a chart, the bins of a histogram, the cells of all the panels of
small multiples); everything else is drawn as "cannot be told from noise".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.privacy.mechanisms import Noise

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

MOSTLY = 0.5  # warn when more than this share of cells is below its margin
WARNING = (
    "{share:.0%} of the {cells:,} cells are within their 95% margin (±{margin:,}) of 0: "
    "they cannot be told from empty cells. Too few {unit}s for {unit}-level statistics at "
    "this epsilon: coarser zones or periods, a larger epsilon, or a looser bound would help."
)


@dataclass(frozen=True)
class SignalCheck:
    """The share of published cells below their margin, and the warning if it is most."""

    cells: int
    below_margin: int
    margin: int
    warning: str | None
    #: share of the positive noisy total held by the cells above the margin (reported)
    share_above_margin: float = 0.0
    #: said instead of the warning when most cells are below the margin because they are empty
    note: str | None = None
    #: cells above the noise floor of all the cells (pure noise has none with probability 95%)
    above_noise_floor: int = 0

    @property
    def share(self) -> float:
        return self.below_margin / self.cells if self.cells else 1.0

    def to_dict(self) -> JSONObject:
        return {
            "cells": self.cells,
            "cells_below_margin": self.below_margin,
            "share_below_margin": round(self.share, 4),
            "margin_of_error_95": self.margin,
            "share_of_total_above_margin": round(self.share_above_margin, 4),
            "cells_above_noise_floor": self.above_noise_floor,
            "warning": self.warning,
            "note": self.note,
            "computed_from": "noisy published values and the public margin only",
        }


def signal_check(
    noisy: npt.ArrayLike, margin: int, unit: str = "user", noise: Noise | None = None
) -> SignalCheck:
    """Share of noisy cells with |value| <= margin, and whether the margin is why (post-
    processing of noisy values and public parameters only).

    Warns ("cannot be told from empty") only when most cells are within the margin *and* the
    margin, not the sparsity of the data, is the cause: the margin is at least 1 and no cell
    clears the noise floor of all the cells (:func:`noise_floor`: pure noise clears it with
    probability <= 5%). When a cell clears it the analysis holds signal, and its many cells
    within the margin are empty or small: a ``note`` says the data are sparse. ``noise``: the
    noise distribution (public); without it the floor is taken for Laplace tails from the
    margin (m ln(20 N) / ln 20).
    """
    v = np.asarray(noisy, dtype=float)
    cells = int(v.size)
    below = int(np.count_nonzero(np.abs(v) <= margin))
    if noise is not None:
        floor = float(noise_floor(noise, cells))
    else:
        floor = margin * math.log(20 * max(cells, 1)) / math.log(20)
    clear = int(np.count_nonzero(signal_mask(v, floor)))
    positive = float(v[v > 0].sum())
    share_above = float(v[v > margin].sum()) / positive if positive > 0 else 0.0
    mostly = cells > 0 and below > MOSTLY * cells
    text = note = None
    if mostly and margin >= 1 and clear == 0:
        text = WARNING.format(share=below / cells, cells=cells, margin=int(margin), unit=unit)
    elif mostly and clear == 0:  # a margin below 1: the cells are as small as they look
        note = (
            f"{below / cells:.0%} of the {cells:,} cells are within ±{int(margin):,} of 0 at a "
            "95% margin below 1: they are (close to) empty, not noise"
        )
    elif mostly:
        note = (
            f"{below / cells:.0%} of the {cells:,} cells are within their 95% margin (±"
            f"{int(margin):,}) of 0, but {clear:,} cells clear the noise floor "
            f"({floor:,.0f}): the data are sparse at this resolution (most cells empty or "
            "small), not drowned by the noise"
        )
    return SignalCheck(cells, below, int(margin), text, share_above, note, clear)


def beside_signal(check: SignalCheck, held: Sequence[str]) -> SignalCheck:
    """``check`` read beside the analyses of the same release that clear their noise floor
    (``held``, named): the release then has units enough, so cells all within their margin
    count something small or absent (no missing values, say), and calling them noise from
    "too few units" would be wrong. The warning becomes a note saying so; without ``held``,
    or without a warning, ``check`` as it is (noisy values and public margins only)."""
    if check.warning is None or not held:
        return check
    note = (
        f"{check.share:.0%} of the {check.cells:,} cells are within their 95% margin "
        f"(±{check.margin:,}) of 0 while {', '.join(held)} clear their noise floor: these "
        "counts are small or zero (a value within the margin cannot be told from 0), not a "
        "sign of too few units"
    )
    return dataclasses.replace(check, warning=None, note=note)


def noise_floor(noise: Noise, cells: int, confidence: float = 0.95) -> int:
    """Smallest m such that, with probability >= ``confidence``, no one of ``cells``
    independent noise draws exceeds m in absolute value (union bound). From the noise
    distribution and the public number of cells only."""
    return noise.margin_of_error(1 - (1 - confidence) / max(cells, 1))


def is_signal(value: float, floor: float | None) -> bool:
    """The one rule for signal: a noisy ``value`` is signal iff it is above ``floor``, the
    noise floor of its family (:func:`noise_floor` of the noise and the number of cells the
    caption talks about; the 95% margin of one cell is the floor of a family of one). Only
    signal is coloured, ranked or labelled; the rest cannot be told from noise. Without a
    floor (no noise scale is known) every value is shown as it is. Post-processing of the
    noisy value and public parameters."""
    return floor is None or float(value) > float(floor)


def signal_mask(values: npt.ArrayLike, floor: float | None) -> npt.NDArray[np.bool_]:
    """:func:`is_signal` of each of ``values`` (a boolean array)."""
    v = np.asarray(values, dtype=float)
    return np.ones(v.shape, dtype=bool) if floor is None else v > float(floor)


def above_noise_floor(
    values: npt.ArrayLike, noise: Noise, cells: int | None = None
) -> npt.NDArray[np.bool_]:
    """Mask of the noisy ``values`` above the noise floor of ``cells`` cells (default: as many
    as ``values``): the only ones a ranking or a "top flows" list may show (post-processing)."""
    v = np.asarray(values, dtype=float)
    return signal_mask(v, noise_floor(noise, v.size if cells is None else cells))


@dataclass(frozen=True)
class ExpectedSignal:
    """What the noise alone implies for a cell, before any data is read."""

    margin: int  # 95% margin of one cell
    std: float
    count_for_10pct: int  # smallest true count whose 95% relative error is <= 10%
    count_for_50pct: int

    def relative_error(self, count: float) -> float:
        """95% relative error of a cell whose true count is ``count``."""
        return math.inf if count <= 0 else self.margin / count

    def to_dict(self) -> JSONObject:
        return {
            "margin_of_error_95": self.margin,
            "noise_std": round(self.std, 4),
            "count_for_10pct_error": self.count_for_10pct,
            "count_for_50pct_error": self.count_for_50pct,
        }


def expected_signal(noise: Noise, confidence: float = 0.95) -> ExpectedSignal:
    """From the noise distribution (public) only."""
    m = noise.margin_of_error(confidence)
    return ExpectedSignal(m, noise.std, math.ceil(m / 0.10), math.ceil(m / 0.50))


def density_signal(
    *, noisy_total: float, tau: float, clusters: int, kept: int | None, noise_std: float | None
) -> JSONObject:
    """Flags of a density release, from noisy totals and the mechanism's public choices.

    * ``flat``: EFPA(G) kept a single Fourier coefficient (the constant), so every zone's
      series is flat over the week;
    * ``tau_unreachable``: the noisy total of all cells is below tau, so clustering merged every
      cell into one cluster and every zone gets the same weekly shape. Seed 004's default tau
      (sqrt(168) sigma / 0.01: a 1% error per hour) is meant for millions of users: at epsilon 1
      and 30 visits a week it is 2,851,054 visits, while 146 users contribute at most 4,380;
    * ``too_sparse``: the noise std on a cluster's hourly value is more than half the mean
      hourly count of a cluster (noisy total / 168 / clusters of cells): a 95% interval of an
      hourly value then spans zero or more than its size.
    """
    flags: list[str] = []
    words: list[str] = []
    if kept == 1:
        flags.append("flat")
        words.append("a single Fourier coefficient was kept: every zone's series is flat")
    if noisy_total < tau:
        flags.append("tau_unreachable")
        words.append(
            f"the noisy total ({noisy_total:,.0f}) is below tau ({tau:,.0f}): all cells share "
            "one cluster, so every zone gets the same weekly shape"
        )
    hourly = max(noisy_total, 0.0) / 168.0 / max(clusters - 1, 1)  # minus the outliers cluster
    if noise_std is not None and 2.0 * noise_std > hourly:
        flags.append("too_sparse")
        words.append(
            f"the noise per hourly value (std {noise_std:,.1f}) is more than half a cluster's "
            f"mean hourly count ({hourly:,.1f}): too few users for an hourly density at this "
            "epsilon"
        )
    return {
        "flags": list(flags),
        "clusters": clusters,
        "kept_coefficients": kept,
        "noisy_total": round(float(noisy_total), 3),
        "tau": tau,
        "warning": "; ".join(words) or None,
        "computed_from": "noisy totals and the mechanism's public choices only",
    }


#: A release whose whole epsilon is below this is warned about before it is read: a cell's
#: noise then has a scale of more than 10 times the contribution bound, so a cell needs
#: hundreds of users per unit of the bound before its count reads as more than noise.
LOW_EPSILON = 0.1


def low_epsilon_warning(epsilon: float, margin: float) -> str | None:
    """The warning of a plan of ``epsilon`` (its whole cost) below :data:`LOW_EPSILON`, said
    before anything is read (a release refuses it unless confirmed:
    :class:`privmob.session.base.PlanWarning`); from public parameters only (``margin``: the
    plan's 95% margin of one cell). None at or above the level."""
    if not 0 < epsilon < LOW_EPSILON:
        return None
    scale = (
        f"each cell's 95% margin of error is +/-{margin:,.0f}, so only cells of more than that "
        "many units read as more than noise"
        if math.isfinite(margin)
        else "each cell's noise is more than 10 times the bound"
    )
    return f"epsilon {epsilon:g} is below {LOW_EPSILON:g}: {scale}."


#: A release with more noisy cells than this is refused before it is read unless the operator
#: confirms it (``--yes``, Python ``confirm=True``; :class:`privmob.session.base.PlanWarning`):
#: 10 million cells take minutes and gigabytes (a 1 km grid's OD pairs by day over 92 days,
#: 48.7 M cells, ran 142 s with 96% of its cells indistinguishable from 0), and every cell must
#: clear the noise floor of them all to be shown.
LARGE_PLAN_CELLS = 10_000_000


def large_plan_warning(cells: int, margin: float) -> str | None:
    """The warning of a plan of more than :data:`LARGE_PLAN_CELLS` cells, said before anything
    is read, with what its cells need: the noise floor of that many cells (from the plan's 95%
    margin of one cell, Laplace tails: :func:`signal_check`'s rule) and the records the input
    would need for most cells to reach it. Public parameters only; None up to the level."""
    if cells <= LARGE_PLAN_CELLS:
        return None
    need = ""
    if math.isfinite(margin) and margin > 0:
        floor = margin * math.log(20 * cells) / math.log(20)
        need = (
            f"; a cell is shown only above the noise floor of them all (about {floor:,.0f}), "
            "so most cells stay below it unless the input holds more than "
            f"{cells * floor / 2:,.0f} counted records"
        )
    return (
        f"this plan has {cells:,} cells, more than the {LARGE_PLAN_CELLS:,} released without "
        f"asking{need}. Coarser zones or periods (a longer bin, a shorter study period) make "
        "fewer, fuller cells."
    )
