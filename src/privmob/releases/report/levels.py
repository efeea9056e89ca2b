"""The report's od_flows over a hierarchy of public zones (``report --hierarchy borough``,
issue 40 item 5), with :mod:`privmob.releases.hierarchy`'s levels, split, noise and estimates.

Guarantee: od_flows' share of epsilon (``eps``, pure: the report refuses a hierarchy under
zCDP composition) is split across the levels by :func:`~privmob.releases.hierarchy.level_shares`;
each level's count vector has L1 sensitivity M (one trip lies in one cell of each level), and
level l's Laplace noise of scale M / (share_l x eps) makes it (share_l x eps)-DP, so the levels
compose to ``eps``: od_flows costs what it costs without a hierarchy, charged once by the
report's gate before any noise. The outliers cell gets the finest level's noise. The consistent
non-negative estimates are post-processing of the noisy levels, the public tree and the public
variances.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from privmob.json_types import JSONObject
from privmob.lazy_imports import np, pd
from privmob.privacy.mechanisms import Noise
from privmob.privacy.samplers import Randomness
from privmob.releases.kinds import same_tile_flag

from . import analyses as an
from .config import ReportConfig

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.releases.hierarchy import OdTree, ZoneLevels

#: the report's table of a coarser level: ``od_flows_by_borough``
PREFIX = "od_flows_by_"


def level_table(level: str) -> str:
    """The table (and file) of a coarser level in the report: ``od_flows_by_borough``."""
    from privmob.releases.hierarchy import table_name

    return PREFIX + table_name(level).removeprefix("od_")


@dataclass(frozen=True)
class OdLevels:
    """od_flows' levels in a report: the public groups, the split of od_flows' epsilon, each
    level's noise (coarsest first, the tiles' last) and the public tree of its cells; from
    public parameters alone (the tessellation, M, epsilon), before any data is read."""

    levels: ZoneLevels
    shares: tuple[float, ...]
    noises: tuple[Noise, ...]
    tree: OdTree
    epsilon: float
    weights_given: bool = False

    @classmethod
    def plan(cls, cfg: ReportConfig, levels: ZoneLevels, k: int) -> OdLevels:
        from privmob.releases.hierarchy import level_noises, level_shares, od_tree

        same = same_tile_flag(cfg.same_tile)
        shares = level_shares(levels, k, same, cfg.noise_kind, dict(cfg.hierarchy_weights))
        eps = cfg.epsilon_for("od_flows")
        delta1 = an.sensitivity("od_flows", cfg)
        noises, _ = level_noises(cfg.noise_kind, eps, 0.0, delta1, shares, cfg.unit)
        tree = od_tree(levels, k, 1, same)
        return cls(levels, tuple(shares), noises, tree, eps, bool(cfg.hierarchy_weights))

    def note(self) -> str:
        """The plan's line on the split."""
        from privmob.releases.hierarchy import split_note

        split = split_note(self.levels, self.shares, self.noises)
        return (
            f"od_flows over a hierarchy: its epsilon {self.epsilon:.4g} split across the "
            f"levels, {split}; charged once, the report's cost unchanged"
        )

    def describe(self) -> JSONObject:
        """What the metadata says of the levels (public: the same for any data)."""
        from privmob.releases.hierarchy import FINEST, describe
        from privmob.releases.metadata import json_list, json_object

        out = describe(
            self.levels, self.shares, self.noises, self.epsilon, self.tree, self.weights_given
        )
        for lv in json_list(out["levels"]):
            entry = json_object(lv)
            name = str(entry["level"])
            entry["table"] = "od_flows" if name == FINEST else level_table(name)
        return out


def od_flows_levels(
    exact: npt.NDArray[np.int64], cfg: ReportConfig, plan: OdLevels, rng: Randomness
) -> tuple[
    npt.NDArray[np.float64], an.AnalysisResult, dict[str, pd.DataFrame], dict[str, list[float]]
]:
    """od_flows over the levels of ``plan``: the finest level's consistent estimates over the
    flat od_flows vector (k x k cells, the outliers cell last, as noised; the diagonal 0 when
    not released), its result, the tables of the coarser levels (origin, destination, trips,
    margin_95, least_squares) and od_flows' own extra columns (margin_95, least_squares) in
    its table's row order (the released cells, row-major as :func:`od_tree` orders them, then
    the outliers row: the finest noise's margin and its noisy value)."""
    from privmob.releases.hierarchy import LevelsNoisy, coarse_sums, estimate, level_tables

    eps, delta1 = plan.epsilon, an.sensitivity("od_flows", cfg)
    # the finest level as od_flows is noised without a hierarchy (its noise, every cell)
    noisy, res = an.counts("od_flows", exact, eps, delta1, cfg, rng, plan.noises[-1])
    coarse = tuple(
        n.add(x, rng).astype(np.int64)
        for n, x in zip(plan.noises[:-1], coarse_sums(plan.tree, exact), strict=True)
    )
    est = estimate(LevelsNoisy(noisy, coarse), plan.noises, plan.tree)
    fine = np.zeros(len(exact), dtype=np.float64)
    fine[plan.tree.cells] = est.values[-1]
    fine[-1] = noisy[-1]
    tables = {}
    for name, table in level_tables(est, plan.levels, ["all"]).items():
        level = name.removeprefix("od_")
        tables[PREFIX + level] = table.drop(columns="period").rename(columns={"count": "trips"})
    res.values = {"hierarchy": plan.describe()}
    columns = {
        "margin_95": [*est.margins[-1].tolist(), plan.noises[-1].margin_of_error(0.95)],
        "least_squares": [*est.least_squares[-1].tolist(), float(noisy[-1])],
    }
    return fine, res, tables, columns
