"""What the report needs from its inputs: the public tiles (ids, names, centroids, outlines
for maps) and, for check-in data, trip points built from consecutive check-ins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from privmob.data import tessellation_cache
from privmob.data.tessellation import Tessellation, local_metric_crs
from privmob.json_types import JSON
from privmob.lazy_imports import np, pd
from privmob.privacy.costs import PrivacyUnit

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.engine.relation import Loaded
    from privmob.releases.base import Accountant


class TripPointsSource(Protocol):
    """What reads the report's input (:class:`privmob.Session`): trip points, and the
    accountant whose group size says how a trip-level release counts riders."""

    @property
    def _accountant(self) -> Accountant: ...

    def _load_trip_points(self, uid_per_trip: bool = False) -> Loaded: ...


def load_report_input(unit: PrivacyUnit, session: TripPointsSource) -> Loaded:
    """The report's input, read by ``session`` as trip points: at trip level without group
    privacy, one-row trips without a rider id make each trip its own unit."""
    return session._load_trip_points(
        unit is PrivacyUnit.TRIP and session._accountant.group_size is None
    )


@dataclass(frozen=True)
class Tiles:
    """The public tessellation as the report needs it, in the tessellation's index order."""

    ids: list[str]
    names: list[str]
    lat: npt.NDArray[np.float64]
    lng: npt.NDArray[np.float64]
    outlines: list[JSON]  # per tile: rings of [lng, lat]

    @property
    def k(self) -> int:
        return len(self.ids)

    @classmethod
    def from_tessellation(cls, tess: Tessellation, simplify_m: float = 30.0) -> Tiles:
        """Outlines simplified to ``simplify_m`` metres (public geometry, smaller HTML)."""
        ids = [str(t) for t in tess.tile_ids]
        names = [str(n) for n in tess.tile_names] if tess.tile_names else ids
        cents = tess.centroids()
        outlines = simplified_outlines(tess, simplify_m)
        return cls(ids, names, cents[:, 1].copy(), cents[:, 0].copy(), outlines)


def simplified_outlines(tess: Tessellation, simplify_m: float) -> list[JSON]:
    """Each tile's outer rings (``[lng, lat]`` rounded to 1e-6 degree) simplified to
    ``simplify_m`` metres; kept in the tessellation cache under the tessellation's fingerprint
    (public geometry; simplifying the taxi zones costs 0.07-0.1 s a run)."""
    key = tessellation_cache.derived_key("report outlines", tess.fingerprint, float(simplify_m))
    cached = tessellation_cache.read_derived(key)
    if isinstance(cached, list) and len(cached) == tess.k:
        return cached
    metric = tess.gdf.to_crs(local_metric_crs(tess.bounds))
    simple = metric.geometry.simplify(simplify_m).to_crs(4326)
    outlines: list[JSON] = []
    for geom in simple:
        polys = list(geom.geoms) if geom.geom_type == "MultiPolygon" else [geom]
        outlines.append(
            [
                [[round(x, 6), round(y, 6)] for x, y in p.exterior.coords]
                for p in polys
                if not p.is_empty
            ]
        )
    tessellation_cache.write_derived(key, outlines)
    return outlines


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
