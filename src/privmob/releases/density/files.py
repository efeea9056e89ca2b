"""The files a density release publishes beside its tables (``Session.density`` and
``privmob density`` alike): ``density.geojson``, the zones with their 168 released counts.

Each writer has the signature of the lifecycle's writers (``privmob.session.base.Writer``):
(release, folder, tessellation) -> paths, and reads only the released (noisy) table and the
public zones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from privmob.releases.release import Release
from privmob.releases.stamp import json_stamp

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

#: the file of :func:`write_density_geojson`
GEOJSON = "density.geojson"


def write_density_geojson(release: Release, folder: Path, zones: Tessellation) -> list[Path]:
    """``density.geojson`` in ``folder``: each zone with its 168 released counts (``counts``),
    their mean and its peak hour (noisy values), stamped as the release is (with the warning
    when it is not for publication)."""
    wide = release.tables["density"].pivot(index="zone", columns="hour", values="count")
    gdf = zones.gdf
    values = wide.reindex(gdf["tile_id"]).to_numpy()
    feats = json.loads(gdf[["tile_id", "geometry"]].to_json())
    for feature, row in zip(feats["features"], values, strict=True):
        feature["properties"] = {
            "zone": feature["properties"]["tile_id"],
            "mean": float(np.mean(row)),
            "peak_hour": int(np.argmax(row)),
            "counts": [int(v) for v in row],
        }
    feats["privmob"] = json_stamp(release)
    path = Path(folder) / GEOJSON
    path.write_text(json.dumps(feats))
    return [path]


#: every file a density release publishes beside its tables, for the lifecycle's ``writers``
FILES = (write_density_geojson,)
