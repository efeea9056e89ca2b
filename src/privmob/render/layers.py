"""Releases as GIS layers: a release's noisy table joined to the public tessellation.

Post-processing only: the functions read a release's published (noisy) table and the public
tiles; nothing else. Every layer is a GeoDataFrame in EPSG:4326 that GeoPandas, QGIS and
kepler.gl open directly.

- :func:`od_flows_layer`: one LineString per OD cell, from the origin tile's representative
  point to the destination's, with ``origin``/``destination`` ids (their type kept), names and
  the noisy ``count`` with its ``margin_of_error_95``.
- :func:`tile_values_layer`: one polygon per row of a table keyed by tile (population,
  density's (zone, hour), series-counts' (zone, t)), with the noisy value and its margin.
- :func:`release_layer`: the layer of a :class:`~privmob.releases.release.Release` by its kind.
- :func:`write_layers`: writes a release's layer as GeoParquet, GeoJSON and/or CSV (WKT).

Rows whose key is not a tile (the outliers cells) have no geometry and are left out of the
layer; they stay in the release's Parquet tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from privmob.data.csv_cells import write_csv
from privmob.data.tessellation import Tessellation
from privmob.errors import ConfigError

#: Output formats of ``--format``: ``parquet`` is the release's own tables (always written).
FORMATS = ("parquet", "geoparquet", "geojson", "csv")
#: Per release kind: the main table, its tile key (None: origin/destination) and the layer's
#: file stem.
LAYER_TABLES = {
    "od-matrix": ("od", None, "od_flows"),
    "population": ("population", "zone", "population_tiles"),
    "density": ("density", "zone", "density_tiles"),
    "landmark-series": ("series", "zone", "series_tiles"),
}


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
    names = tess.tile_names
    return np.asarray(names if names is not None else [str(t) for t in tess.tile_ids], object)


def od_flows_layer(
    table: pd.DataFrame,
    tess: Tessellation,
    *,
    margin: float | None = None,
    drop_zero: bool = True,
) -> gpd.GeoDataFrame:
    """OD flows as LineStrings between the tiles' representative points (EPSG:4326).

    ``table``: an OD release's ``od`` table (period, origin, destination, count). Columns out:
    period, origin, destination (ids, type kept), origin_name, destination_name, count,
    margin_of_error_95 (when ``margin`` is given), geometry. ``drop_zero`` leaves out cells
    whose noisy count is 0 (a daily 263-zone matrix has 1.9M cells, mostly 0).
    """
    df = table[table["count"] != 0] if drop_zero else table
    o = tile_indexes(df["origin"], tess)
    d = tile_indexes(df["destination"], tess)
    ok = (o >= 0) & (d >= 0)
    df, o, d = df[ok], o[ok], d[ok]
    points = shapely.get_coordinates(tess.gdf.geometry.representative_point().to_numpy())
    names = _names(tess)
    coords = np.stack([points[o], points[d]], axis=1)  # (n, 2, 2)
    out = pd.DataFrame(
        {
            "period": df["period"].to_numpy(),
            "origin": df["origin"].to_numpy(),
            "destination": df["destination"].to_numpy(),
            "origin_name": names[o],
            "destination_name": names[d],
            "count": df["count"].to_numpy(),
        }
    )
    if margin is not None:
        out["margin_of_error_95"] = margin
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
    given (one figure, or one per row of ``table``), ``margin_of_error_95``.
    """
    idx = tile_indexes(table[key], tess)
    ok = idx >= 0
    out = table[ok].reset_index(drop=True).drop(columns=["tile_id", "tile_name"], errors="ignore")
    if margin is not None:
        m = np.asarray(margin, dtype=float)
        out["margin_of_error_95"] = m[ok] if m.ndim else float(m)
    ids = np.asarray(tess.tile_ids, dtype=object)
    out.insert(0, "tile_id", pd.Series(ids[idx[ok]]).infer_objects())
    out.insert(1, "tile_name", _names(tess)[idx[ok]])
    geoms = tess.gdf.geometry.to_numpy()[idx[ok]]
    return gpd.GeoDataFrame(out, geometry=geoms, crs=4326)


def release_layer(release: Any, tess: Tessellation) -> gpd.GeoDataFrame:
    """The map layer of an od-matrix, population, density or series-counts release."""
    if release.kind not in LAYER_TABLES:
        raise ConfigError(
            f"a {release.kind} release has no map layer",
            hint=f"layers exist for {', '.join(LAYER_TABLES)}",
        )
    name, key, _stem = LAYER_TABLES[release.kind]
    table = release.tables[name]
    margin = release.noise.get("margin_of_error_95")
    if key is None:
        return od_flows_layer(table, tess, margin=margin)
    if release.kind == "landmark-series":
        if "zone" not in table.columns:
            raise ConfigError("a single (zone-less) series has no map layer")
        return tile_values_layer(table, tess, margin=_series_margins(release, table))
    return tile_values_layer(table, tess, key=key, margin=margin)


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
                        hint=f"use one or more of {', '.join(FORMATS)} (e.g. --format geojson)",
                    )
                out.append(f)
    return out


_SUFFIX = {"geoparquet": ".geoparquet", "geojson": ".geojson", "csv": ".csv"}


def layer_paths(kind: str, outdir: str | Path, formats: Iterable[str]) -> list[Path]:
    """The layer files :func:`write_layers` writes for a release of ``kind``."""
    if kind not in LAYER_TABLES:
        raise ConfigError(f"a {kind} release has no map layer")
    stem = Path(outdir) / LAYER_TABLES[kind][2]
    return [stem.with_suffix(_SUFFIX[f]) for f in parse_formats(formats) if f != "parquet"]


def write_layers(
    release: Any, tess: Tessellation, outdir: str | Path, formats: Iterable[str]
) -> list[Path]:
    """Write the release's layer as ``<stem>.geoparquet`` / ``.geojson`` / ``.csv`` (WKT
    geometry) in ``outdir`` (stems: ``od_flows``, ``population_tiles``, ``density_tiles``,
    ``series_tiles``), for the formats asked for beside ``parquet`` (the release's own
    tables, written by :func:`~privmob.releases.base.write_release`)."""
    wanted = [f for f in parse_formats(formats) if f != "parquet"]
    if not wanted:
        return []
    layer = release_layer(release, tess)
    paths = layer_paths(release.kind, outdir, wanted)
    for fmt, path in zip(wanted, paths, strict=True):
        if fmt == "geoparquet":
            layer.to_parquet(path, index=False)
        elif fmt == "geojson":
            text = layer.to_json(drop_id=True, to_wgs84=True, default=_json_value)
            path.write_text(text, encoding="utf-8")
        else:
            plain = pd.DataFrame(layer.drop(columns="geometry"))
            plain["geometry_wkt"] = shapely.to_wkt(layer.geometry.to_numpy(), rounding_precision=7)
            write_csv(plain, path)
    return paths


def _json_value(obj: Any) -> Any:
    """Timestamps (series labels) as ISO 8601 text in GeoJSON properties."""
    return obj.isoformat() if hasattr(obj, "isoformat") else str(obj)
