"""Releases as GIS layers: a release's noisy table joined to the public tessellation.

Post-processing only: the functions read a release's published (noisy) table and the public
tiles; nothing else. Every layer is a GeoDataFrame in EPSG:4326 that GeoPandas, QGIS and
kepler.gl open directly.

- :func:`od_flows_layer`: one LineString per OD cell, from the origin tile's representative
  point to the destination's, with ``origin``/``destination`` ids (their type kept), names and
  the noisy ``count`` with its ``margin_of_error_95`` and ``below_margin`` flag.
- :func:`tile_values_layer`: one polygon per row of a table keyed by tile (population,
  density's (zone, hour), series-counts' (zone, t)), with the noisy value, its margin and the
  ``below_margin`` flag (the value is at or below its 95% margin: within the margin of 0, or
  negative, which only noise makes).
- :func:`release_layer`: the layer of a :class:`~privmob.releases.release.Release` by its kind
  (:func:`layer_of`; a count table's by the dimensions it counts: OD lines for origin x
  destination, polygons for one tile dimension, the other dimensions as columns).
  An OD layer holds, by default, only the flows above the noise floor (the level the noise of
  none of the release's cells reaches with 95% probability): a line of noise drawn on a map
  reads as a flow. ``keep_all=True`` keeps every non-zero cell. Tables keep every cell.
- :func:`layer_size` / :func:`write_layers`: the size of a layer file, estimated from the public
  tessellation and the number of features before anything is written; a layer above
  :data:`MAX_LAYER_BYTES` (or the limit given) is refused with what to change.
- :func:`write_layers` writes a release's layer as GeoParquet, GeoJSON and/or CSV (WKT), each
  file stamped as the release's tables are (:mod:`privmob.releases.stamp`): GeoParquet in its
  key-value metadata, GeoJSON in a top-level ``privmob`` member, CSV in ``privmob_*`` columns;
  beside them ``<stem>.qml``, their QGIS style (:mod:`privmob.render.qml`).

Rows whose key is not a tile (the outliers cells) have no geometry and are left out of the
layer; they stay in the release's Parquet tables. Everything here is post-processing of the
noisy values and public parameters (SPEC invariant 6).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.data.csv_cells import write_csv
from privmob.data.tessellation import Tessellation
from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module
from privmob.releases.kinds import BY_ANY_NAME, COUNT_SPEC, Kind, Layer, each_kind
from privmob.releases.stamp import json_stamp, restamp_parquet, stamp
from privmob.surface import spelled

if TYPE_CHECKING:
    import geopandas as gpd
    import numpy as np
    import pandas as pd
    import shapely
else:
    np = lazy_module("numpy")
    shapely = lazy_module("shapely")
    gpd = lazy_module("geopandas")
    pd = lazy_module("pandas")

#: Output formats of ``--format``: ``parquet`` is the release's own tables (always written).
FORMATS = ("parquet", "geoparquet", "geojson", "csv")
#: Per release kind (and its earlier names, for releases read back): the main table, its tile
#: key (None: origin/destination) and the layer's file stem; from the registry of kinds.
LAYER_TABLES: dict[str, tuple[str, str | None, str]] = {}


def _layer_table(kind: Kind) -> None:
    layer = kind.layer
    if layer is not None:
        for name in (kind.name, *kind.old_kinds):
            LAYER_TABLES[name] = (layer.table, layer.key, layer.stem)


each_kind(_layer_table)  # and each kind registered later (privmob.releases.kinds.register)


def layer_of(kind: str, by: Sequence[str] | None = None) -> Layer | None:
    """The map layer of a release of ``kind`` (its registry entry, :mod:`privmob.releases.
    kinds`); ``by``: the dimensions a count table counts (``privmob counts``: its layer
    follows its tile dimensions). ``None``: the release has no map layer."""
    entry = BY_ANY_NAME.get(kind)
    return None if entry is None else entry.layer_of(tuple(by or ()))


def no_layer(kind: str, by: Sequence[str] | None = None) -> ConfigError:
    """The refusal of layers for a release that has none (what has layers, what to do)."""
    with_layers = sorted({n for n, k in BY_ANY_NAME.items() if k.layer and n == k.name})
    entry = BY_ANY_NAME.get(kind)
    if by is not None and entry is not None and entry.spec == COUNT_SPEC and not entry.counts:
        return ConfigError(
            f"a {kind} release by {', '.join(by)} has no map layer: it counts by no tile",
            hint="a count table has a map layer when it counts by origin and destination "
            "(lines) or by one of origin, destination, tile or zone (polygons); leave out "
            + spelled("--format", "formats=")
            + ": the tables are written as Parquet",
        )
    return ConfigError(
        f"a {kind} release has no map layer",
        hint=f"layers exist for {', '.join(with_layers)} and count tables by a tile; leave out "
        + spelled("--format", "formats=")
        + ": the tables are written as Parquet",
    )


def _layer(kind: str | Layer) -> Layer:
    """A layer, or the registered layer of ``kind`` (refused when it has none)."""
    if isinstance(kind, Layer):
        return kind
    layer = layer_of(kind)
    if layer is None:
        raise no_layer(kind)
    return layer


def tile_indexes(keys: Sequence[Any] | pd.Series, tess: Tessellation) -> np.ndarray:
    """Tile index of each key (-1 when not a tile). A key matches a tile id of the same type,
    or its text form (tables that mix tile ids with outlier labels hold ids as text)."""
    keys = pd.Series(np.asarray(keys, dtype=object))
    idx = tess.indexes_of(keys.to_numpy())
    missing = idx < 0
    if missing.any():
        by_text = pd.Index([str(t) for t in tess.tile_ids])
        idx[missing] = by_text.get_indexer(pd.Index(keys[missing].astype(str)))
    return idx.astype(np.int64)


def _names(tess: Tessellation) -> np.ndarray:
    """Each tile's name: its own, else its id and centroid (``tile 18 (40.7181, -74.0431)``,
    as on the maps: :func:`privmob.render.map_labels.tessellation_names`)."""
    from privmob.render.map_labels import tessellation_names

    return np.asarray(tessellation_names(tess), object)


def od_flows_layer(
    table: pd.DataFrame,
    tess: Tessellation,
    *,
    margin: float | None = None,
    drop_zero: bool = True,
    floor: float | None = None,
    keys: Sequence[str] = ("period",),
) -> gpd.GeoDataFrame:
    """OD flows as LineStrings between the tiles' representative points (EPSG:4326).

    ``table``: an OD release's ``od`` table (period, origin, destination, count). Columns out:
    period, origin, destination (ids, type kept), origin_name, destination_name, count,
    margin_of_error_95 and below_margin (when ``margin`` is given), geometry. ``drop_zero``
    leaves out cells whose noisy count is 0 (a daily 263-zone matrix has 1.9M cells, mostly
    0); ``floor`` (the noise floor, :func:`privmob.privacy.signal.noise_floor`) leaves out
    the cells at or below it. ``keys``: the table's other key columns, kept first (an OD
    release's ``period``; a count table's other dimensions). A cell from a tile to itself
    has no line (one of length 0 is no valid geometry; the table keeps the cell).
    """
    keep = table["count"] != 0 if drop_zero else pd.Series(True, index=table.index)
    if floor is not None:
        keep &= table["count"] > floor
    df = table[keep]
    o = tile_indexes(df["origin"], tess)
    d = tile_indexes(df["destination"], tess)
    ok = (o >= 0) & (d >= 0) & (o != d)
    df, o, d = df[ok], o[ok], d[ok]
    points = shapely.get_coordinates(tess.gdf.geometry.representative_point().to_numpy())
    names = _names(tess)
    coords = np.stack([points[o], points[d]], axis=1)  # (n, 2, 2)
    out = pd.DataFrame(
        {
            **{k: df[k].to_numpy() for k in keys},
            "origin": df["origin"].to_numpy(),
            "destination": df["destination"].to_numpy(),
            "origin_name": names[o],
            "destination_name": names[d],
            "count": df["count"].to_numpy(),
        }
    )
    if margin is not None:
        out["margin_of_error_95"] = margin
        out["below_margin"] = out["count"].to_numpy() <= margin
    return gpd.GeoDataFrame(out, geometry=shapely.linestrings(coords), crs=4326)


def tile_values_layer(
    table: pd.DataFrame,
    tess: Tessellation,
    *,
    key: str = "zone",
    margin: float | np.ndarray | pd.Series | None = None,
) -> gpd.GeoDataFrame:
    """The rows of a tile-keyed table as polygons (EPSG:4326), with their noisy values.

    Adds ``tile_id`` (typed as in the tessellation), ``tile_name`` and, when ``margin`` is
    given (one figure, or one per row of ``table``), ``margin_of_error_95`` and
    ``below_margin`` (the row's ``count`` or ``value`` is at or below its margin).
    """
    idx = tile_indexes(table[key], tess)
    ok = idx >= 0
    out = table[ok].reset_index(drop=True).drop(columns=["tile_id", "tile_name"], errors="ignore")
    if margin is not None:
        m = np.asarray(margin, dtype=float)
        out["margin_of_error_95"] = m[ok] if m.ndim else float(m)
        value = next((c for c in ("count", "value") if c in out.columns), None)
        if value is not None:
            v = pd.to_numeric(out[value], errors="coerce").to_numpy(dtype=float)
            out["below_margin"] = v <= out["margin_of_error_95"].to_numpy(dtype=float)
    ids = np.asarray(tess.tile_ids, dtype=object)
    out.insert(0, "tile_id", pd.Series(ids[idx[ok]]).infer_objects())
    out.insert(1, "tile_name", _names(tess)[idx[ok]])
    geoms = tess.gdf.geometry.to_numpy()[idx[ok]]
    return gpd.GeoDataFrame(out, geometry=geoms, crs=4326)


def release_layer(release: Any, tess: Tessellation, *, keep_all: bool = False) -> gpd.GeoDataFrame:
    """The map layer of a release whose kind has one (``releases/kinds.py``; a count table's
    from its dimensions, :func:`layer_of`).

    An OD layer keeps only the flows above the release's noise floor unless ``keep_all``
    (then every non-zero cell, each with its ``below_margin`` flag)."""
    by = release.params.get("by")
    layer = layer_of(release.kind, by)
    if layer is None:
        raise no_layer(release.kind, by)
    table = release.tables[layer.table]
    margin = release.noise.get("margin_of_error_95")
    if layer.key is None:
        floor = None if keep_all else flow_floor(release)
        keys = [c for c in table.columns if c not in ("origin", "destination", "count")]
        return _whose_margin(od_flows_layer(table, tess, margin=margin, floor=floor, keys=keys))
    if layer.margin == "budgets":
        if "zone" not in table.columns:
            raise ConfigError("a single (zone-less) series has no map layer")
        return tile_values_layer(table, tess, margin=_series_margins(release, table))
    return _whose_margin(tile_values_layer(table, tess, key=layer.key, margin=margin))


def _whose_margin(layer: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """Beside a mean, the count's 95% margin is named as the count's
    (``count_margin_of_error_95``): it does not describe the mean, whose own margin is
    ``mean_margin_95``; ``below_margin`` stays the count's (a mean is not shown there)."""
    if "mean" in layer.columns and "margin_of_error_95" in layer.columns:
        return layer.rename(columns={"margin_of_error_95": "count_margin_of_error_95"})
    return layer


def flow_floor(release: Any) -> float | None:
    """The noise floor of an OD release's cells (or a count table's by origin and
    destination): with 95% probability the noise of none of its released cells reaches it
    (from the noise distribution and the public domain)."""
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.privacy.signal import noise_floor

    try:
        noise = Noise(NoiseKind(release.noise["kind"]), float(release.noise["scale"]))
    except (KeyError, TypeError, ValueError):
        return None
    layer = layer_of(release.kind, release.params.get("by"))
    table = release.tables[layer.table if layer is not None else "od"]
    cells = int(release.domain.get("od_cells") or len(table))
    return float(noise_floor(noise, cells))


def _series_margins(release: Any, table: pd.DataFrame) -> np.ndarray:
    """Per-row 95% margin of a series-counts release, from its per-timestamp noise scale."""
    from privmob.privacy.mechanisms import Noise, NoiseKind

    kind = NoiseKind(release.noise["kind"])
    scales = release.tables["budgets"].set_index("t")["noise_scale"]
    by_t = {
        t: float(Noise(kind, s).margin_of_error()) if np.isfinite(s) and s > 0 else np.nan
        for t, s in scales.items()
    }
    return table["t"].map(by_t).to_numpy(dtype=float)


def parse_formats(values: Iterable[str] | None) -> list[str]:
    """``--format`` values (repeated and/or comma-separated) as a checked list."""
    out: list[str] = []
    for v in values or ["parquet"]:
        for f in str(v).split(","):
            f = f.strip().lower()
            if f and f not in out:
                if f not in FORMATS:
                    raise ConfigError(
                        f"unknown output format {f!r}",
                        hint=f"use one or more of {', '.join(FORMATS)} (e.g. "
                        + spelled("--format geojson", 'formats=["geojson"]')
                        + ")",
                    )
                out.append(f)
    return out


_SUFFIX = {"geoparquet": ".geoparquet", "geojson": ".geojson", "csv": ".csv"}


def layer_paths(kind: str | Layer, outdir: str | Path, formats: Iterable[str]) -> list[Path]:
    """The layer files :func:`write_layers` writes for a release of ``kind`` (or ``layer``)."""
    stem = Path(outdir) / _layer(kind).stem
    return [stem.with_suffix(_SUFFIX[f]) for f in parse_formats(formats) if f != "parquet"]


#: The largest layer file written without asking (bytes); ``max_bytes`` / ``--max-layer-size``
#: changes it. A map layer is for looking at: above this size GIS tools struggle, and the
#: release's Parquet tables hold every cell anyway.
MAX_LAYER_BYTES = 200 * 10**6
#: estimated bytes per vertex and per feature's attributes, by format (GeoJSON writes full
#: float coordinates, the CSV's WKT 7 decimals, GeoParquet WKB doubles, compressed a little)
_VERTEX_BYTES = {"geojson": 40, "csv": 24, "geoparquet": 16}
_ROW_BYTES = {"geojson": 260, "csv": 110, "geoparquet": 40}


def layer_size(kind: str | Layer, tess: Tessellation, features: int, fmt: str) -> int:
    """Estimated bytes of a layer file of ``features`` features of a ``kind`` release (or of
    ``layer``), from the public tessellation (its vertices per tile) and the feature count."""
    per_vertex, per_row = _VERTEX_BYTES[fmt], _ROW_BYTES[fmt]
    if _layer(kind).key is None:  # lines: two vertices each
        return int(features * (2 * per_vertex + per_row))
    vertices = shapely.get_num_coordinates(tess.gdf.geometry.to_numpy())
    per_tile = float(np.mean(vertices)) * per_vertex + per_row
    return int(features * per_tile)


def planned_features(kind: str | Layer, tess: Tessellation, output_rows: int) -> int:
    """The most features a layer of a release can have, from its plan (public): a tile
    table's rows that are tiles, an OD matrix's cells (all of them, before any is dropped)."""
    if _layer(kind).key is None:
        return int(output_rows)
    periods = max(1, round(output_rows / max(tess.k, 1)))
    return int(min(output_rows, periods * tess.k))


def check_layer_size(
    kind: str | Layer,
    features: int,
    tess: Tessellation,
    formats: Iterable[str],
    max_bytes: int | None,
) -> dict[str, int]:
    """The estimated size of each layer file; refuses (ConfigError, exit 2) one above
    ``max_bytes`` (default :data:`MAX_LAYER_BYTES`) with what to change."""
    limit = MAX_LAYER_BYTES if max_bytes is None else int(max_bytes)
    sizes = {f: layer_size(kind, tess, features, f) for f in formats if f != "parquet"}
    big = {f: b for f, b in sizes.items() if b > limit}
    if big:
        fmt, size = max(big.items(), key=lambda kv: kv[1])
        stem = _layer(kind).stem
        raise ConfigError(
            f"the {stem} layer would be about {size / 1e6:,.0f} MB as {fmt} ({features:,} "
            f"features), over the layer size limit of {limit / 1e6:,.0f} MB",
            hint=f"leave out {spelled('--format', 'formats=')} (the Parquet tables hold every "
            "cell), use a coarser tessellation or fewer periods, or raise the limit with "
            + spelled("--max-layer-size", "max_layer_size="),
        )
    return sizes


def write_layers(
    release: Any,
    tess: Tessellation,
    outdir: str | Path,
    formats: Iterable[str],
    *,
    keep_all: bool = False,
    max_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the release's layer as ``<stem>.geoparquet`` / ``.geojson`` / ``.csv`` (WKT
    geometry) in ``outdir`` (stems: ``od_flows``, ``population_tiles``, ``density_tiles``,
    ``series_tiles``, ``counts_tiles`` / ``counts_flows``), for the formats asked for beside
    ``parquet`` (the release's own tables, written by
    :func:`~privmob.releases.base.write_release`).

    ``keep_all``: an OD layer keeps every non-zero cell, not only the flows above the noise
    floor. Each file's size is estimated before it is written; a layer above ``max_bytes``
    (default :data:`MAX_LAYER_BYTES`) is cut to the features with the largest values that fit
    (:func:`cut_to_fit`: post-processing of a charged release, stated in its metadata),
    never refused: a refusal here would come after the noise. ``progress`` is told each file
    written. Beside the layer files, ``<stem>.qml``: their QGIS style (:mod:`privmob.render.
    qml`: the value's classes, ``below_margin`` hatched), which QGIS applies on opening them;
    it is returned last.
    """
    wanted = [f for f in parse_formats(formats) if f != "parquet"]
    if not wanted:
        return []
    layer = release_layer(release, tess, keep_all=keep_all)
    kind = layer_of(release.kind, release.params.get("by"))
    assert kind is not None  # release_layer refused a release without one
    layer = cut_to_fit(release, layer, kind, tess, wanted, max_bytes)
    sizes = {f: layer_size(kind, tess, len(layer), f) for f in wanted}
    paths = layer_paths(kind, outdir, wanted)
    write_layer_files(release, layer, paths, wanted, sizes, progress)
    # the QGIS style beside the layer files (same stem): classes of the value, below_margin
    # hatched; staged, sealed and published with them (the QGIS style module brings XML and
    # URL libraries: imported here, after the plan, not with the layer options: issue 43)
    from privmob.render.qml import style_path, write_style

    style = write_style(layer, style_path(paths[0]), lines=kind.key is None, stamp=stamp(release))
    if release.params.get("hierarchy"):  # an OD release's coarser levels (od --hierarchy)
        from privmob.releases.hierarchy import level_layers

        for stem, coarse in level_layers(release, tess):
            coarse_paths = [Path(outdir) / f"{stem}{_SUFFIX[f]}" for f in wanted]
            coarse_sizes = {f: layer_size(kind, tess, len(coarse), f) for f in wanted}
            write_layer_files(release, coarse, coarse_paths, wanted, coarse_sizes, progress)
            paths += coarse_paths
    return [*paths, style]


def write_layer_files(
    release: Any,
    layer: gpd.GeoDataFrame,
    paths: list[Path],
    wanted: list[str],
    sizes: dict[str, int],
    progress: Callable[[str], None] | None,
) -> None:
    """Write ``layer`` to ``paths`` (one per format of ``wanted``), each file stamped."""
    for fmt, path in zip(wanted, paths, strict=True):
        if progress is not None:
            size = sizes[fmt] / 1e6
            about = f"~{size:,.1f} MB" if size >= 0.1 else "<0.1 MB"
            progress(f"writing the map layer {path.name} ({len(layer):,} features, {about})")
        if fmt == "geoparquet":
            layer.to_parquet(path, index=False)
            restamp_parquet(path, release)
        elif fmt == "geojson":
            doc = json.loads(layer.to_json(drop_id=True, to_wgs84=True, default=_json_value))
            doc["privmob"] = json_stamp(release)
            path.write_text(json.dumps(doc), encoding="utf-8")
        else:
            plain = pd.DataFrame(layer.drop(columns="geometry"))
            plain["geometry_wkt"] = shapely.to_wkt(layer.geometry.to_numpy(), rounding_precision=7)
            for key, value in stamp(release).items():  # each row carries the stamp
                plain[key.replace(".", "_")] = value
            write_csv(plain, path)


def cut_to_fit(
    release: Any,
    layer: gpd.GeoDataFrame,
    kind: Layer,
    tess: Tessellation,
    formats: Iterable[str],
    max_bytes: int | None,
) -> gpd.GeoDataFrame:
    """``layer``, or, when its largest file would be above ``max_bytes``, its features with the
    largest values that fit (ties in table order), the cut stated in ``release.extra``'s
    ``map_layer``. Post-processing of noisy values: called only once the release is charged."""
    limit = MAX_LAYER_BYTES if max_bytes is None else int(max_bytes)
    n = len(layer)
    biggest = max((layer_size(kind, tess, n, f) for f in formats), default=0)
    if n == 0 or biggest <= limit:
        return layer
    fits = max(int(limit // (biggest / n)), 0)
    column = next((c for c in ("count", "value", "mean") if c in layer.columns), None)
    order = (
        np.argsort(-layer[column].to_numpy(dtype=np.float64), kind="stable")
        if column is not None
        else np.arange(n)
    )
    kept = layer.iloc[np.sort(order[:fits])]
    release.extra["map_layer"] = {
        "features": int(fits),
        "left_out": int(n - fits),
        "max_layer_size_bytes": limit,
        "rule": f"the {fits:,} features with the largest {column or 'table order'} kept to fit "
        "the layer size limit; the Parquet tables hold every cell",
    }
    return kept


def _json_value(obj: Any) -> Any:
    """Timestamps (series labels) as ISO 8601 text in GeoJSON properties."""
    return obj.isoformat() if hasattr(obj, "isoformat") else str(obj)
