"""The OpenDP features privmob's publication paths use exist in the installed OpenDP (the
``opendp>=0.14`` bound): report-noisy-max (``make_noisy_max``, added in 0.14; the report's
quartiles and top-n), and float vectors without NaN (``atom_domain(nan=False)``, refused by
0.12; OpenDP's Laplace and Gaussian on real values, e.g. ``--noise laplace-rounded``).
Seeded tests take other paths, so these run without a seed (outputs are random; only their
range is checked)."""

from __future__ import annotations

import numpy as np

from privmob.privacy.mechanisms import noisy_max
from privmob.privacy.samplers import secure_gaussian, secure_laplace


def test_report_noisy_max_runs_on_opendp() -> None:
    index = noisy_max(np.array([1.0, 50.0, 2.0]), epsilon=1.0, sensitivity=1.0)
    assert index in (0, 1, 2)


def test_float_laplace_and_gaussian_run_on_opendp() -> None:
    values = np.zeros(4)
    assert np.all(np.isfinite(secure_laplace(values, 1.0)))
    assert np.all(np.isfinite(secure_gaussian(values, 1.0)))
