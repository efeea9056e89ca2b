"""The density release's inputs: the public zones, tower sites, Voronoi shares and cover
(computed before any record is read), then the validated phone events."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from privmob.errors import ConfigError

if TYPE_CHECKING:  # the loaders are imported when the inputs are loaded (fast CLI --help)
    from privmob.data.tessellation import Tessellation
    from privmob.engine.base import Engine
    from privmob.engine.relation import Loaded
    from privmob.prepare.density_geometry import DensityGeometry, SiteIndex
    from privmob.privacy.people import PeopleSketch


@dataclass
class DensityInputs:
    engine: Engine
    loaded: Loaded  # the validated events (split into user buckets out of core)
    geometry: DensityGeometry
    zones: Tessellation
    week_start: datetime

    @property
    def events(self) -> str:
        """The events' relation in the engine."""
        return self.loaded.view

    # the binding of the input (Accountant.bind_input): the validated events'
    @property
    def fingerprint(self) -> str | None:
        """The events' content fingerprint (the cells table and zones are public)."""
        return self.loaded.fingerprint

    @property
    def rows(self) -> int | None:
        return self.loaded.rows

    def people_sketch(self, key: bytes) -> PeopleSketch | None:
        """The events' people sketch under a ledger's key (:mod:`privmob.privacy.people`)."""
        return self.loaded.people_sketch(key)

    def older_fingerprints(self) -> tuple[str, ...]:
        """The events' fingerprints under earlier definitions."""
        return self.loaded.older_fingerprints()


class _SitesOfCells:
    """The tessellation the cells table is loaded with: each cell's tile is its tower site
    (towers at one position share a site), the :class:`SiteIndex` built from the positions of
    every cell as they are loaded, so the table is read once for both."""

    sites: SiteIndex | None = None

    def assign(
        self, lng: npt.NDArray[np.float64], lat: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.int32]:
        from privmob.releases.density import SiteIndex

        self.sites = SiteIndex(lng, lat)
        return np.asarray(self.sites.assign(lng, lat), dtype=np.int32)


def parse_week(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(
            f"cannot read the week start '{text}'", hint="use a date such as 2007-09-10"
        ) from exc


def load_density_inputs(
    events: str | Path,
    cells: str | Path,
    zones: Path | Tessellation,
    *,
    zone_id: str | None,
    week: str,
    cover: bool,
    timezone: str,
    columns: Mapping[str, str] | None,
    step: Callable[[str], None],
    engine: str | Engine = "duckdb",
) -> DensityInputs:
    """Zones, tower sites, Voronoi shares and cover (public), then the validated events.

    ``columns``: canonical name -> the input's column name. ``engine``: a name (``duckdb``,
    ``spark``) or an engine already opened."""
    from privmob.data.sources import load_cells_table, load_events
    from privmob.data.tessellation_input import load_tessellation
    from privmob.engine import make_engine
    from privmob.releases.density import density_geometry

    week_start = parse_week(week)
    step("reading the zones")
    tess = load_tessellation(zones, id_column=zone_id)
    eng = make_engine(engine) if isinstance(engine, str) else engine
    step("reading the cells")
    by_site = _SitesOfCells()
    cells_table = load_cells_table(str(cells), engine=eng, tessellation=by_site)
    sites = by_site.sites  # set by the one assignment of the cells' positions
    assert sites is not None
    step("Voronoi cells, area shares and the minimum cover")
    geometry = density_geometry(
        sites.lng, sites.lat, tess.gdf, np.asarray(tess.tile_ids), cover=cover
    )
    step("reading and validating the events")
    loaded = load_events(
        str(events),
        engine=eng,
        tessellation=sites,
        cells=cells_table,
        columns=columns,
        timezone=timezone,
    )
    return DensityInputs(eng, loaded, geometry, tess, week_start)
