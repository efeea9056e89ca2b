"""Is there any signal? Warnings from public parameters (before) and noisy values (after).

Before a release, :func:`expected_signal` states from the noise scale alone (public: bound,
epsilon, noise kind) the relative error of a cell of a given true count, and the smallest count
that reaches a given relative error. After it, :func:`signal_check` looks at the *noisy*
published values only (post-processing) and warns when most cells are within their 95% margin
of 0, i.e. cannot be told from an empty cell: with 10 users (Cabspotting) or 2 (GeoLife) every
user-level count is noise, and the reader must be told in words, not only by the margins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privmob.privacy.mechanisms import Noise

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

    @property
    def share(self) -> float:
        return self.below_margin / self.cells if self.cells else 1.0

    def to_dict(self) -> dict[str, object]:
        return {
            "cells": self.cells,
            "cells_below_margin": self.below_margin,
            "share_below_margin": round(self.share, 4),
            "margin_of_error_95": self.margin,
            "warning": self.warning,
            "computed_from": "noisy published values and the public margin only",
        }


def signal_check(noisy: np.ndarray, margin: int, unit: str = "user") -> SignalCheck:
    """Share of noisy cells with |value| <= margin (post-processing of noisy values only)."""
    v = np.asarray(noisy)
    cells = int(v.size)
    below = int(np.count_nonzero(np.abs(v) <= margin))
    mostly = cells > 0 and below > MOSTLY * cells
    text = (
        WARNING.format(share=below / cells, cells=cells, margin=int(margin), unit=unit)
        if mostly
        else None
    )
    return SignalCheck(cells, below, int(margin), text)


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

    def to_dict(self) -> dict[str, object]:
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
