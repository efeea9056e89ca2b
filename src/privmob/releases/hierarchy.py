"""OD matrices over a hierarchy of public zones (issue 40, item 5): ``od --hierarchy borough``.

The tiles are grouped into coarser public zones by a column of the tessellation (the NYC taxi
zones' ``borough``) or, for H3 cells, by their parents (``h3:6``): never by the data. Each
level is released as an OD matrix of its own (borough x borough per period, zone x zone per
period) and the levels make one tree: a borough pair is the sum of its zone pairs. The budget
is split across the levels (:func:`level_noises`: ``epsilon`` in all, charged once, by the one
gate, before any noise; each level its share), every level gets its own noise, and
:mod:`privmob.privacy.hierarchy` makes them consistent by weighted least squares and then
non-negative (post-processing: noisy values, the public tree and public variances only).

Guarantee: each user keeps at most T trips; every trip lies in one cell of each level, so each
level's count vector has L1 (and L2) sensitivity T, and level l, with noise of scale
T / (share_l x epsilon) (discrete Laplace; the discrete Gaussian: rho split by the shares),
is (share_l x epsilon)-DP; the levels compose to epsilon (rho), the cost of the same release
without a hierarchy. The outliers cells are released with the finest level's noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.json_types import JSON, JSONObject
from privmob.lazy_imports import np, pd
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.hierarchy import Tree, consistent, default_shares, margin_95, non_negative
from privmob.privacy.mechanisms import Noise, NoiseKind, rho_for_epsilon
from privmob.privacy.samplers import Randomness
from privmob.releases.metadata import json_list, json_object
from privmob.surface import spelled

if TYPE_CHECKING:
    import geopandas as gpd
    import numpy.typing as npt

    from privmob.data.tessellation import Tessellation
    from privmob.releases.counts import CountDomain, Finish
    from privmob.releases.release import Release

#: the name of the finest level (the tessellation's own tiles) in weights and tables
FINEST = "tile"
#: what ``params.hierarchy.method`` says
METHOD = (
    "each level released with its own noise from its share of epsilon; weighted least squares "
    "over the public tree (Hay et al. 2010, one variance per level: closed form, bottom-up then "
    "top-down), then non-negative: the coarsest level clamped at 0 and, top-down, the cells "
    "under each cell moved to the nearest non-negative values (weighted by 1 / variance) with "
    "the same sum. Post-processing: noisy values, the public tree and public variances only"
)
MARGIN_RULE = (
    "margin_95 of a cell: from the variance of its least-squares estimate (closed form over "
    "the tree, before non-negativity); Laplace noise: ln 20 x sqrt(variance / 2), the 95% "
    "margin of a Laplace variable of that variance; discrete Gaussian: 1.96 sd"
)


@dataclass(frozen=True)
class ZoneLevels:
    """The public groups of the tiles, coarsest first: ``names[l]`` (a column of the
    tessellation or ``h3:<resolution>``), its group ``labels[l]`` and the group index of every
    tile ``of_tile[l]``; each group of level l lies in one group of level l - 1."""

    names: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    of_tile: tuple[npt.NDArray[np.int64], ...]

    @property
    def level_names(self) -> tuple[str, ...]:
        """Every level's name, the finest (:data:`FINEST`) last."""
        return (*self.names, FINEST)


def spellings(hierarchy: str | Sequence[str] | None) -> tuple[str, ...]:
    """``--hierarchy borough,district`` or ``hierarchy="borough"`` (or a sequence of level
    names, coarsest first) as a spec holds it; none: ``()``."""
    if hierarchy is None:
        return ()
    items = hierarchy.split(",") if isinstance(hierarchy, str) else hierarchy
    return tuple(str(x).strip() for x in items if str(x).strip())


def split_note(levels: ZoneLevels, shares: Sequence[float], noises: Sequence[Noise]) -> str:
    """The plan's words on the split of the budget across ``levels``."""
    return ", ".join(
        f"{n} {s:.0%} (scale {noise.scale:.3g})"
        for n, s, noise in zip(levels.level_names, shares, noises, strict=True)
    )


def zone_levels(tessellation: Tessellation, spellings: Sequence[str]) -> ZoneLevels:
    """The groups of ``tessellation``'s tiles named by ``spellings`` (coarsest first), from the
    public tessellation alone; a ConfigError when a column is missing, a tile has no value or
    the levels do not nest."""
    names, labels, of_tile = [], [], []
    columns = tessellation.attributes
    for spelling in spellings:
        name = str(spelling).strip()
        if name in names or name == FINEST:
            raise ConfigError(f"the hierarchy names {name!r} twice (the tiles are its last level)")
        values = _h3_parents(tessellation, name) if name.startswith("h3:") else None
        if values is None:
            if name not in columns:
                seen = ", ".join(sorted(columns)) or "none besides the tile id"
                raise ConfigError(
                    f"the tessellation has no column {name!r} to group its tiles by",
                    hint=f"its columns: {seen}; name one of them in "
                    f"{spelled('--hierarchy', 'hierarchy=')} (or h3:<resolution> for H3 cells)",
                )
            values = columns[name]
        missing = [t for t, v in zip(tessellation.tile_ids, values, strict=True) if v is None]
        if missing:
            raise ConfigError(
                f"tile {missing[0]!r} has no {name!r} ({len(missing)} tile(s) without one)",
                hint=f"give every tile a {name} in the tessellation file: the groups are public "
                "and fixed before any data is read",
            )
        text = [str(v) for v in values]
        groups = tuple(sorted(set(text)))
        index = {g: i for i, g in enumerate(groups)}
        names.append(name)
        labels.append(groups)
        of_tile.append(np.array([index[v] for v in text], dtype=np.int64))
    for lv in range(1, len(names)):
        pairs = set(zip(of_tile[lv].tolist(), of_tile[lv - 1].tolist(), strict=True))
        if len(pairs) != len(labels[lv]):
            raise ConfigError(
                f"the levels do not nest: a {names[lv]} lies in more than one {names[lv - 1]}",
                hint="list the levels coarsest first, each inside the one before",
            )
    return ZoneLevels(tuple(names), tuple(labels), tuple(of_tile))


def _h3_parents(tessellation: Tessellation, name: str) -> list[str]:
    """The parent at resolution ``h3:<r>`` of every tile (tile ids must be H3 cells)."""
    from privmob.extras import require

    try:
        resolution = int(name.split(":", 1)[1])
    except ValueError:
        raise ConfigError(f"{name!r}: give h3:<resolution>, e.g. h3:6") from None
    h3 = require("h3", "an H3 hierarchy")
    parents = []
    for tile in tessellation.tile_ids:
        if not (isinstance(tile, str) and h3.is_valid_cell(tile)):
            raise ConfigError(
                f"{name}: tile {tile!r} is not an H3 cell",
                hint="h3:<resolution> groups the cells of an H3 tessellation "
                "(privmob tessellate --h3); name a column of the tessellation instead",
            )
        if h3.get_resolution(tile) <= resolution:
            raise ConfigError(
                f"{name}: tile {tile!r} is at resolution {h3.get_resolution(tile)}, not finer",
                hint="a parent level must be coarser than the tiles",
            )
        parents.append(h3.cell_to_parent(tile, resolution))
    return parents


@dataclass(frozen=True)
class OdTree:
    """The tree of an OD release's released cells (:func:`od_tree`): level l's cells are
    (period, origin group, destination group), row-major, the finest level's the released
    OD cells of the flat domain in their order."""

    tree: Tree
    #: each released finest cell's flat index in the domain
    cells: npt.NDArray[np.int64]


def od_tree(levels: ZoneLevels, k: int, n_periods: int, same_tile: bool) -> OdTree:
    """The public tree of an OD domain over ``levels``."""
    o, d = np.divmod(np.arange(k * k, dtype=np.int64), k)
    keep = np.ones(k * k, dtype=bool) if same_tile else o != d
    o, d = o[keep], d[keep]
    period = np.repeat(np.arange(n_periods, dtype=np.int64), len(o))
    cells = period * k * k + np.tile(o * k + d, n_periods)
    sizes = [n_periods * len(g) ** 2 for g in levels.labels] + [len(cells)]
    parents = []
    for lv in range(1, len(levels.names)):  # group pairs under group pairs
        b, up = len(levels.labels[lv]), _up(levels, lv)
        pb = len(levels.labels[lv - 1])
        gp, go, gd = np.unravel_index(np.arange(sizes[lv]), (n_periods, b, b))
        parents.append(gp * pb * pb + up[go] * pb + up[gd])
    if levels.names:
        g, b = levels.of_tile[-1], len(levels.labels[-1])
        parents.append(period * b * b + np.tile(g[o] * b + g[d], n_periods))
    return OdTree(Tree(tuple(sizes), tuple(parents)), cells)


def _up(levels: ZoneLevels, lv: int) -> npt.NDArray[np.int64]:
    """The group of level ``lv - 1`` of each group of level ``lv``."""
    up = np.zeros(len(levels.labels[lv]), dtype=np.int64)
    up[levels.of_tile[lv]] = levels.of_tile[lv - 1]
    return up


def level_shares(
    levels: ZoneLevels, k: int, same_tile: bool, noise: NoiseKind, weights: Mapping[str, float]
) -> tuple[float, ...]:
    """The share of the budget of each level (coarsest first): ``weights`` (a positive weight
    for every level, :data:`FINEST` for the tiles; normalised) or, without them,
    :func:`~privmob.privacy.hierarchy.default_shares` on one period's public tree."""
    names = levels.level_names
    if not weights:
        one = od_tree(levels, k, 1, same_tile).tree
        return default_shares(one, noise.traits.variance_power)
    unknown = sorted(set(weights) - set(names))
    absent = [n for n in names if n not in weights]
    if unknown or absent:
        raise ConfigError(
            f"the hierarchy's weights name {', '.join(unknown or absent)}, "
            f"{'not a level' if unknown else 'and leave it out'}",
            hint=f"give a weight to every level: {', '.join(f'{n}=1' for n in names)}",
        )
    w = [float(weights[n]) for n in names]
    if not all(x > 0 and np.isfinite(x) for x in w):
        raise ConfigError("every level's weight must be a finite number > 0")
    return tuple(x / sum(w) for x in w)


def level_noises(
    kind: NoiseKind | str,
    epsilon: float,
    delta: float,
    t_bound: int,
    shares: Sequence[float],
    unit: PrivacyUnit,
) -> tuple[tuple[Noise, ...], Cost]:
    """Each level's noise (L1 and L2 sensitivity ``t_bound``) from its share of the budget,
    and the one cost of them all: ``epsilon`` (Laplace kinds: scale T / (share x epsilon),
    rounded up) or, for the discrete Gaussian, the rho of (epsilon, delta) split by the
    shares, stated as (epsilon, delta)."""
    from privmob.privacy.costs import zcdp_to_epsilon
    from privmob.privacy.discrete_gaussian import scale_up, sigma_for_rho
    from privmob.privacy.mechanisms import calibrate

    kind = NoiseKind(kind)
    calibrate(kind, epsilon, l1_sensitivity=t_bound, delta=delta, unit=unit)  # the checks
    if kind.traits.zcdp:
        rho = rho_for_epsilon(epsilon, delta)
        noises = tuple(Noise(kind, sigma_for_rho(t_bound, rho * s)) for s in shares)
        return noises, Cost(zcdp_to_epsilon(rho, delta), delta, rho, unit)
    noises = tuple(Noise(kind, scale_up(t_bound, epsilon * s)) for s in shares)
    return noises, Cost(epsilon, 0.0, None, unit)


@dataclass(frozen=True)
class LevelsNoisy:
    """What :class:`LevelsNoise` drew: the flat noisy vector of the finest level (as the
    default noise step's) and the noisy cells of each coarser level, coarsest first."""

    fine: npt.NDArray[np.int64]
    coarse: tuple[npt.NDArray[np.int64], ...]


@dataclass(frozen=True)
class LevelsNoise:
    """The count template's noise step of an OD release over a hierarchy: the finest level's
    noise on every released cell (the outliers cells included), each coarser level's on the
    sums of the exact released cells in each of its cells."""

    noises: tuple[Noise, ...]
    tree: OdTree

    @property
    def kind(self) -> str:
        return f"{self.noises[-1].kind} at {len(self.noises)} levels"

    def start(self, domain: CountDomain, r: Randomness) -> Finish[LevelsNoisy]:
        from privmob.releases.counts import CellNoise

        fine = CellNoise(self.noises[-1]).start(domain, r)  # the template's, on the finest level
        sizes = self.tree.tree.sizes
        coarse = [n.add_later(size, r) for n, size in zip(self.noises[:-1], sizes, strict=False)]

        def finish(exact: npt.NDArray[np.int64]) -> LevelsNoisy:
            noisy = fine(exact)
            exact_levels = coarse_sums(self.tree, exact)
            drawn = tuple(add(x) for add, x in zip(coarse, exact_levels, strict=True))
            return LevelsNoisy(noisy, drawn)

        return finish


def coarse_sums(tree: OdTree, exact: npt.NDArray[np.int64]) -> list[npt.NDArray[np.int64]]:
    """The exact count of every cell of each coarser level (coarsest first): the sums of the
    exact released cells (``exact[tree.cells]``) under it. Noised before anything is
    released."""
    sizes = tree.tree.sizes
    sums = np.asarray(exact[tree.cells], dtype=np.int64)
    out = []
    for lv in range(len(sizes) - 2, -1, -1):
        sums = np.bincount(tree.tree.parents[lv], sums, sizes[lv]).astype(np.int64)
        out.append(sums)
    out.reverse()
    return out


@dataclass(frozen=True)
class Estimates:
    """The consistent, non-negative estimates of every level (coarsest first), the consistent
    least-squares estimates before non-negativity (unbiased, may be negative) and their 95%
    margins."""

    values: tuple[npt.NDArray[np.float64], ...]
    margins: tuple[npt.NDArray[np.float64], ...]
    least_squares: tuple[npt.NDArray[np.float64], ...]


def estimate(noisy: LevelsNoisy, noises: Sequence[Noise], tree: OdTree) -> Estimates:
    """Post-processing of the noisy levels: least squares, then non-negative (see the
    module's docstring)."""
    measured = [*noisy.coarse, noisy.fine[tree.cells]]
    variances = [n.std**2 for n in noises]
    fit = consistent(tree.tree, measured, variances)
    values = non_negative(tree.tree, fit.estimates, fit.variances)
    laplace = not noises[-1].kind.traits.zcdp
    margins = tuple(margin_95(v, laplace) for v in fit.variances)
    return Estimates(values, margins, fit.estimates)


def level_tables(
    estimates: Estimates,
    levels: ZoneLevels,
    labels: list[str],
) -> dict[str, pd.DataFrame]:
    """One table per coarser level, ``od_<level>``: period, origin, destination (group
    labels), count (the consistent non-negative estimate), margin_95 and least_squares (the
    consistent estimate before non-negativity: unbiased, may be negative)."""
    tables = {}
    for lv, name in enumerate(levels.names):
        groups = np.array(levels.labels[lv], dtype=object)
        b = len(groups)
        p, o, d = np.unravel_index(np.arange(len(estimates.values[lv])), (len(labels), b, b))
        tables[table_name(name)] = pd.DataFrame(
            {
                "period": np.array(labels, dtype=object)[p].astype(str),
                "origin": groups[o].astype(str),
                "destination": groups[d].astype(str),
                "count": estimates.values[lv],
                "margin_95": estimates.margins[lv],
                "least_squares": estimates.least_squares[lv],
            }
        )
    return tables


def table_name(level: str) -> str:
    """The table (and file) of a coarser level: ``od_borough``, ``od_h3_6``."""
    return "od_" + "".join(c if c.isalnum() else "_" for c in level)


def describe(
    levels: ZoneLevels,
    shares: Sequence[float],
    noises: Sequence[Noise],
    epsilon: float,
    tree: OdTree,
    weights_given: bool,
    periods: int = 1,
) -> JSONObject:
    """``params.hierarchy`` of the release: the levels, the split and why, each level's
    noise and mean margin (public: the same for any data), the method. ``tree``: one
    period's (every period's is the same), ``periods`` of them."""
    var = consistent(
        tree.tree, [np.zeros(n) for n in tree.tree.sizes], [n.std**2 for n in noises]
    ).variances
    laplace = not noises[-1].kind.traits.zcdp
    per_level: list[JSON] = []
    for lv, name in enumerate(levels.level_names):
        occupied = tree.tree.leaves_below(lv) > 0
        per_level.append(
            {
                "level": name,
                "table": "od" if name == FINEST else table_name(name),
                "groups": len(levels.labels[lv]) if name != FINEST else None,
                "cells": int(tree.tree.sizes[lv]) * periods,
                "share": round(float(shares[lv]), 6),
                "epsilon": float(epsilon * shares[lv]),
                "noise_scale": noises[lv].scale,
                "margin_of_error_95_measured": noises[lv].margin_of_error(0.95),
                "margin_95_consistent_mean": round(
                    float(np.mean(margin_95(var[lv][occupied], laplace))), 3
                ),
            }
        )
    return {
        "levels": per_level,
        "grouping": "public: columns of the tessellation (or H3 parents), never the data",
        "split": "the weights given"
        if weights_given
        else "default: the split minimising the sum over the levels of each level's mean "
        "variance relative to the whole budget spent on that level alone",
        "cost": "one charge of epsilon for all levels (sequential composition of the shares)",
        "method": METHOD,
        "margins": MARGIN_RULE,
        "empty_by_construction": "a coarse cell with no released cell under it (e.g. a "
        "borough of one zone to itself, same-tile trips excluded) is 0 with margin 0",
    }


def top_flows(table: pd.DataFrame, n: int, margin: float | None = None) -> pd.DataFrame:
    """The ``n`` largest flows of an OD table, largest first, with their 95% margins
    (``margin_95`` of the table, else the release's one ``margin``), the interval
    ``[count - margin, count + margin]`` clamped at 0, and ``clear``: the count is above its
    margin. Post-processing of published values."""
    if n < 1:
        raise ConfigError(f"ask for at least one flow, got {n}")
    top = table.sort_values("count", ascending=False, kind="stable").head(int(n)).copy()
    m = top["margin_95"] if "margin_95" in top else pd.Series(float(margin or 0), index=top.index)
    top["margin_95"] = m.astype(float)
    top["low"] = np.maximum(top["count"] - top["margin_95"], 0.0)
    top["high"] = top["count"] + top["margin_95"]
    top["clear"] = top["count"] > top["margin_95"]
    top.insert(0, "rank", np.arange(1, len(top) + 1))
    return top.reset_index(drop=True)


def level_names(release: Release) -> list[str]:
    """The levels of an OD release over a hierarchy (``params.hierarchy.levels``), coarsest
    first, the tiles' last; none without a hierarchy."""
    levels = json_list(json_object(release.params.get("hierarchy")).get("levels"))
    return [str(json_object(lv).get("level")) for lv in levels]


def level_layers(
    release: Release, tessellation: Tessellation
) -> list[tuple[str, gpd.GeoDataFrame]]:
    """The map layer of each coarser level of an OD release over a hierarchy (its
    ``od_<level>`` table): flows as LineStrings between the representative points of the
    groups (the union of their tiles), with count, margin_95, least_squares and below_margin;
    a flow within one group has no line (the table keeps it). Stems ``od_<level>_flows``."""
    import geopandas as gpd
    import shapely

    names = [name for name in level_names(release) if name != FINEST]
    levels = zone_levels(tessellation, names)
    out = []
    for lv, name in enumerate(levels.names):
        table = release.tables[table_name(name)]
        groups = levels.labels[lv]
        shapes = [
            shapely.union_all(tessellation.geometries[levels.of_tile[lv] == g])
            for g in range(len(groups))
        ]
        points = shapely.get_coordinates(shapely.point_on_surface(np.asarray(shapes, object)))
        index = {g: i for i, g in enumerate(groups)}
        o = table["origin"].map(index).to_numpy()
        d = table["destination"].map(index).to_numpy()
        keep = o != d
        df = table[keep].copy()
        df["below_margin"] = df["count"] <= df["margin_95"]
        lines = shapely.linestrings(np.stack([points[o[keep]], points[d[keep]]], axis=1))
        out.append((f"{table_name(name)}_flows", gpd.GeoDataFrame(df, geometry=lines, crs=4326)))
    return out
