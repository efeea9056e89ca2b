"""Spatio-temporal density: users present per zone and hour of a week (SPEC 4.3, seed 004).

Pipeline (each step after pre-sampling can be switched off in :class:`DensityConfig`):

1. pre-sampling in the engine (:mod:`privmob.prepare.presample`): one visit per user per hour,
   at most l per week -> L1 sensitivity l, L2 sensitivity sqrt(l);
2. towers -> zones by Voronoi area shares (:mod:`privmob.prepare.voronoi`);
3. the minimum cover of towers and zones (:mod:`privmob.prepare.cover`), public geometry only;
4. noisy totals per cover cell (budget epsilon/2), then clustering of cells on those noisy
   totals until every cluster's noisy total reaches tau;
5. EFPA or EFPAG (budget epsilon/2) on the stack of cluster series; each cell gets its
   cluster's normalised shape times its own noisy total;
6. optional smoothing of the night minima by exponential least-squares fits (post-processing);
7. cover cells -> zones (formula 1 on the reduced towers).

The LPA baseline instead adds Laplace noise of scale l/epsilon to every (cover cell, hour) count.

Outside the domain (SPEC 1, invariant 1): the parts of tower cells outside the zones form the
outliers series (a row of the cover, inside the mechanism above); the visits outside the
declared week or at no known tower are pre-sampled the same way (one per user and hour, at
most l per user) and summed into ONE out-of-domain cell released with discrete Laplace noise
of scale l / epsilon_out, its own budget (``outliers_epsilon``, default 0.1 x epsilon).

Privacy: the release is (epsilon + epsilon_out)-DP (EFPA, LPA) or (epsilon + epsilon_out,
delta)-DP (EFPAG) per user, for a user's whole week and everything they did outside it:
totals, EFPA(G) and the out-of-domain cell compose sequentially (two ledger entries: the
mechanism, epsilon; the out-of-domain cell, epsilon_out); the cover, the clustering, the
scaling and the smoothing read only public geometry and noisy values. EFPA(G) runs on the stack
of all cluster series at once (see :mod:`privmob.privacy.efpa`), which keeps the guarantee for a
user whose visits fall in several clusters.
"""

from __future__ import annotations

from privmob.prepare.density_geometry import DensityGeometry, SiteIndex, density_geometry
from privmob.prepare.presample import HOURS_PER_WEEK
from privmob.releases.density.clustering import cluster_cells
from privmob.releases.density.config import DensityConfig, DensityOptions
from privmob.releases.density.files import GEOJSON, write_density_geojson
from privmob.releases.density.mechanism import (
    DensityResult,
    noisy_out_of_domain,
    noisy_totals,
    perturb_density,
    with_outliers,
)
from privmob.releases.density.release import density_release
from privmob.releases.density.smoothing import smooth_nights

__all__ = [
    "GEOJSON",
    "HOURS_PER_WEEK",
    "DensityConfig",
    "DensityGeometry",
    "DensityOptions",
    "DensityResult",
    "SiteIndex",
    "cluster_cells",
    "density_geometry",
    "density_release",
    "noisy_out_of_domain",
    "noisy_totals",
    "perturb_density",
    "smooth_nights",
    "with_outliers",
    "write_density_geojson",
]
