"""Input adapters for the report: the tessellation as public tiles, and trip points as an
engine table ``uid, tid, datetime, lat, lng, tile``.

Interim: the foundation's privmob.data.sources / privmob.data.tessellation replace the loading
part once merged; the report itself only needs the table and :class:`Tiles`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from privmob.errors import InputError


@dataclass(frozen=True)
class Tiles:
    """The public tessellation as the report needs it: ids, names, centroids, outlines."""

    ids: list[str]
    names: list[str]
    lat: np.ndarray
    lng: np.ndarray
    outlines: list[list[list[list[float]]]]  # per tile: rings of [lng, lat]

    @property
    def k(self) -> int:
        return len(self.ids)

    @classmethod
    def from_geodataframe(cls, gdf: gpd.GeoDataFrame, simplify_m: float = 30.0) -> Tiles:
        if "tile_id" not in gdf.columns:
            raise InputError("the tessellation has no tile_id column", column="tile_id")
        gdf = gdf.to_crs(4326) if gdf.crs is not None else gdf.set_crs(4326)
        metric = gdf.to_crs(gdf.estimate_utm_crs())
        cents = metric.geometry.centroid.to_crs(4326)
        simple = metric.geometry.simplify(simplify_m).to_crs(4326)
        outlines = []
        for geom in simple:
            polys = list(geom.geoms) if geom.geom_type == "MultiPolygon" else [geom]
            rings = [
                [[round(x, 6), round(y, 6)] for x, y in p.exterior.coords]
                for p in polys
                if not p.is_empty
            ]
            outlines.append(rings)
        name_col = next((c for c in ("tile_name", "zone", "name") if c in gdf.columns), None)
        ids = [str(t) for t in gdf["tile_id"]]
        names = [str(n) for n in gdf[name_col]] if name_col else ids
        return cls(ids, names, cents.y.to_numpy(), cents.x.to_numpy(), outlines)


def read_tessellation(path: str | Path, id_column: str | None = None) -> gpd.GeoDataFrame:
    try:
        gdf = gpd.read_file(path)
    except Exception as exc:
        raise InputError(f"cannot read the tessellation {path}: {exc}", source=str(path)) from exc
    if id_column:
        gdf = gdf.rename(columns={id_column: "tile_id"})
    elif "tile_id" not in gdf.columns:
        for cand in ("LocationID", "locationid", "id", "ID"):
            if cand in gdf.columns:
                gdf = gdf.rename(columns={cand: "tile_id"})
                break
    if "tile_id" not in gdf.columns:
        raise InputError(
            f"{path} has no tile_id column", source=str(path), hint="pass --tile-id COLUMN"
        )
    return gdf.reset_index(drop=True)


def assign_tiles(points: pd.DataFrame, gdf: gpd.GeoDataFrame) -> np.ndarray:
    """Tile index (0..k-1) of each point, -1 outside every tile or without coordinates."""
    out = np.full(len(points), -1, dtype=np.int32)
    ok = points["lat"].notna().to_numpy() & points["lng"].notna().to_numpy()
    if not ok.any():
        return out
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(points.loc[ok, "lng"], points.loc[ok, "lat"]), crs=4326
    )
    poly = gdf[["geometry"]].to_crs(4326).reset_index(drop=True)
    poly["tile_idx"] = np.arange(len(poly), dtype=np.int32)
    joined = gpd.sjoin(pts, poly, how="left", predicate="intersects")
    # a point on a shared border: the smallest tile index wins (deterministic)
    first = joined.groupby(level=0)["tile_idx"].min()
    vals = first.reindex(range(len(pts))).fillna(-1).astype(np.int32).to_numpy()
    out[np.flatnonzero(ok)] = vals
    return out


def register_trip_points(
    con: Any, frame: pd.DataFrame, gdf: gpd.GeoDataFrame, name: str = "pm_points"
) -> str:
    """Register trip points (uid, tid, datetime, lat, lng) with their tile index in DuckDB."""
    missing = [c for c in ("uid", "tid", "datetime", "lat", "lng") if c not in frame.columns]
    if missing:
        raise InputError(
            f"trip points need the columns uid, tid, datetime, lat, lng; missing {missing}",
            column=missing[0],
        )
    df = pd.DataFrame(
        {
            "uid": frame["uid"].astype(str),
            "tid": frame["tid"].astype(str),
            "datetime": pd.to_datetime(frame["datetime"], errors="coerce"),
            "lat": pd.to_numeric(frame["lat"], errors="coerce"),
            "lng": pd.to_numeric(frame["lng"], errors="coerce"),
        }
    )
    if getattr(df["datetime"].dt, "tz", None) is not None:
        df["datetime"] = df["datetime"].dt.tz_localize(None)
    df["tile"] = assign_tiles(df, gdf)
    con.register(f"{name}_df", df)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {name}_df")
    con.unregister(f"{name}_df")
    return name


def read_trip_points(path: str | Path) -> pd.DataFrame:
    """Trip points from CSV/TSV (header) or Parquet."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p} does not exist", source=str(p))
    try:
        if p.suffix == ".parquet":
            return pd.read_parquet(p)
        return pd.read_csv(p, sep=None, engine="python") if p.suffix == ".tsv" else pd.read_csv(p)
    except Exception as exc:
        raise InputError(f"cannot read {p}: {exc}", source=str(p)) from exc


def trip_points_from_checkins(events: pd.DataFrame, same_day: bool = True) -> pd.DataFrame:
    """Trip points from check-ins (uid, datetime, lat, lng): each pair of consecutive
    check-ins of a user (on the same calendar day when ``same_day``) is a trip of two points.

    Non-private preparation: runs before bounding, one user's trips depend on that user only.
    """
    ev = events[["uid", "datetime", "lat", "lng"]].copy()
    ev["datetime"] = pd.to_datetime(ev["datetime"], errors="coerce", utc=True).dt.tz_localize(None)
    ev = ev.dropna(subset=["datetime"]).sort_values(["uid", "datetime"], kind="stable")
    nxt = ev.groupby("uid", sort=False).shift(-1)
    ok = nxt["datetime"].notna()
    if same_day:
        ok &= nxt["datetime"].dt.normalize() == ev["datetime"].dt.normalize()
    a = ev[ok].reset_index(drop=True)
    b = nxt[ok].reset_index(drop=True)
    tid = a["uid"].astype(str) + "-" + pd.Series(range(len(a)), dtype="int64").astype(str)
    start = pd.DataFrame(
        {"uid": a["uid"], "tid": tid, "datetime": a["datetime"], "lat": a["lat"], "lng": a["lng"]}
    )
    end = pd.DataFrame(
        {"uid": a["uid"], "tid": tid, "datetime": b["datetime"], "lat": b["lat"], "lng": b["lng"]}
    )
    return pd.concat([start, end], ignore_index=True)
