"""Post-processing of noisy counts and what it does to them (issue 17, seed 003).

Every function here reads noisy values or public parameters only (the noise distribution,
the threshold, the number of cells), never exact data, so nothing here changes a release's
privacy guarantee.

The default is to publish the noisy integers as drawn: each cell is unbiased, and so is any
sum of cells. Suppressing below a threshold ``tau`` (``tau = 0``: negative counts become 0)
makes sparse matrices readable but biases every cell upwards: a cell whose true count is 0
is published with expected value E[N 1{N >= max(tau, 1)}] > 0, and a matrix of many empty
cells gets a total far above the truth (the Citi Bike trip-level matrix, clamped at 0, summed
to 87,777 for 11,798 trips). :func:`zero_cell_bias` states that bias from the noise alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module
from privmob.privacy.mechanisms import Noise

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

UNCLAMPED = "noisy integers as drawn (unbiased; negative values kept)"


def check_tau(tau: int | None) -> int | None:
    """``tau`` is None (no suppression) or a whole number >= 0."""
    if tau is None:
        return None
    if tau < 0 or int(tau) != tau:
        raise ConfigError(
            f"the suppression threshold tau must be a whole number >= 0, got {tau}",
            hint="leave it out to publish the noisy counts as drawn (unbiased)",
        )
    return int(tau)


#: the element type of noisy values: integers, or reals (continuous noise)
_Value = TypeVar("_Value", "np.int64", "np.float64")


def suppress(noisy: npt.NDArray[_Value], tau: int | None) -> npt.NDArray[_Value]:
    """Post-processing: with ``tau`` set, values below tau (and negative values) become 0;
    with ``tau`` None the noisy values are returned unchanged (a copy)."""
    out = np.array(noisy, copy=True)
    if tau is None:
        return out
    out[out < max(int(tau), 0)] = 0
    out[out < 0] = 0
    return out


def noise_pmf(
    noise: Noise, half_width: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Support -half_width..half_width and the probabilities of the integer noise on it."""
    k = np.arange(-half_width, half_width + 1, dtype=np.float64)
    w = noise.kind.traits.pmf_weights(k, noise.scale)
    return k, w / w.sum()


def zero_cell_bias(noise: Noise, tau: int | None) -> float:
    """Expected published value of a cell whose true count is 0 (its bias).

    0 without suppression; E[N 1{N >= max(tau, 1)}] with it. Depends on the noise and tau only.
    """
    if tau is None:
        return 0.0
    half = int(max(tau, 0) + 60 * max(noise.scale, 1.0)) + 10
    k, p = noise_pmf(noise, half)
    kept = k >= max(int(tau), 1)
    return float((k[kept] * p[kept]).sum())


def describe(noise: Noise, tau: int | None, cells: int) -> JSONObject:
    """Metadata: the rule, the expected bias per empty cell and over ``cells`` empty cells."""
    bias = zero_cell_bias(noise, tau)
    if tau is None:
        rule = UNCLAMPED
    elif tau == 0:
        rule = "negative noisy counts set to 0 (clamped: inflates totals)"
    else:
        rule = f"noisy counts below {tau} set to 0 (suppressed: inflates totals)"
    return {
        "rule": rule,
        "tau": tau,
        "expected_bias_per_empty_cell": round(bias, 6),
        "expected_total_if_all_cells_empty": round(bias * cells, 3),
        "note": (
            "the expected value of each published cell equals its true count"
            if tau is None
            else "a cell whose true count is well above tau + the margin is nearly unbiased; "
            "an empty cell is published with the expected value above"
        ),
    }
