"""Smoothing of the night minima by exponential least-squares fits (seed 004 5.4.2):
post-processing of the noisy series."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _exp_fit(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64] | None:
    """Least-squares fit of ``a * exp(b * x)`` to ``y`` (Levenberg-Marquardt from the log-linear
    fit; each accepted step lowers the squared error), or None if it is not finite.

    Written here rather than taken from ``scipy.optimize.curve_fit``: importing scipy.optimize
    costs 0.3-0.4 s at every ``privmob density`` start (idle; 1.3 s in a loaded profile), more
    than the fit of a week of nights.
    A window has 3 or 5 points, so the arithmetic is on Python floats (the 2 x 2 normal
    equations solved in closed form): 0.22 ms a 5-point window against 0.89 ms with numpy calls.
    """
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    n = len(xs)
    if n < 2:
        return None
    # the log-linear fit (least squares of log y on x) as the starting point
    logs = [math.log(max(v, 1e-9)) for v in ys]
    mx, ml = sum(xs) / n, sum(logs) / n
    sxx = sum((u - mx) ** 2 for u in xs)
    if sxx == 0:
        return None
    b = sum((u - mx) * (v - ml) for u, v in zip(xs, logs, strict=True)) / sxx
    a = _exp(ml - b * mx)

    def sq_error(a: float, b: float) -> float:
        try:
            return math.fsum((a * _exp(b * u) - v) ** 2 for u, v in zip(xs, ys, strict=True))
        except (OverflowError, ValueError):
            return math.inf

    err, damping = sq_error(a, b), 1e-3
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(err)):
        return None
    for _ in range(200):
        e = [_exp(b * u) for u in xs]
        j1 = [a * u * eu for u, eu in zip(xs, e, strict=True)]
        res = [a * eu - v for eu, v in zip(e, ys, strict=True)]
        n00 = sum(eu * eu for eu in e)
        n01 = sum(eu * ju for eu, ju in zip(e, j1, strict=True))
        n11 = sum(ju * ju for ju in j1)
        g0 = sum(eu * r for eu, r in zip(e, res, strict=True))
        g1 = sum(ju * r for ju, r in zip(j1, res, strict=True))
        while damping < 1e12:
            m00, m11 = n00 * (1 + damping), n11 * (1 + damping)
            det = m00 * m11 - n01 * n01
            if det != 0 and math.isfinite(det):
                da, db = (n01 * g1 - m11 * g0) / det, (n01 * g0 - m00 * g1) / det
                new = sq_error(a + da, b + db)
            else:  # a singular system (e.g. exp underflowed): only more damping can help
                da = db = new = math.nan
            if math.isfinite(new) and new <= err:
                break
            damping *= 10.0
        else:
            break  # no step lowers the error: a (local) minimum
        a, b, improved = a + da, b + db, err - new
        err, damping = new, max(damping / 10.0, 1e-12)
        # MINPACK's default tolerances (as curve_fit): relative error reduction or step
        if improved <= 1.5e-8 * err or (
            abs(da) <= 1.5e-8 * abs(a) and abs(db) <= 1.5e-8 * max(abs(b), 1.0)
        ):
            break
    with np.errstate(all="ignore"):
        fit = a * np.exp(b * np.asarray(x, dtype=np.float64))
    return fit if np.all(np.isfinite(fit)) else None


def smooth_nights(series: npt.NDArray[np.float64], first_hour: int = 0) -> npt.NDArray[np.float64]:
    """Replace each night's 0:00-4:00 and 4:00-6:00 values by exponential least-squares fits.

    ``first_hour`` is the hour of day of slot 0. Post-processing of noisy series only.
    """
    out = np.array(series, dtype=np.float64, copy=True)
    hours = (np.arange(out.shape[-1]) + first_hour) % 24
    starts = np.nonzero(hours == 0)[0]
    for s in starts:
        for lo, hi, keep in ((0, 4, range(0, 4)), (4, 6, range(4, 7))):
            idx = np.arange(s + lo, s + hi + 1)
            if idx[-1] >= out.shape[-1]:
                continue
            x = np.arange(idx.size, dtype=np.float64)
            for row in np.atleast_2d(out):
                fit = _exp_fit(x, row[idx])
                if fit is not None:
                    sel = [s + h for h in keep]
                    row[sel] = fit[[h - lo for h in keep]]
    return out
