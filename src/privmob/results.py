"""Releases as values: one surface for every release the Session returns.

``to_pandas()`` (the long table), ``to_geodataframe()`` (tiles as polygons, OD flows as lines,
EPSG:4326), ``metadata`` (typed), ``write(folder)`` (the release's Parquet files and
``metadata.json``, through :func:`privmob.releases.base.write_release`) and ``_repr_html_`` for
notebooks. Everything here reads only the released (noisy) tables and the public tessellation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from privmob.privacy.costs import Cost, PrivacyUnit


@dataclass(frozen=True)
class ReleaseMetadata:
    """What a release protects and how: the fields of its ``metadata.json``, typed."""

    kind: str
    unit: PrivacyUnit
    bounds: dict[str, Any]
    cost: Cost
    noise: dict[str, Any]
    domain: dict[str, Any]
    params: dict[str, Any]
    for_publication: bool

    @property
    def margin_of_error_95(self) -> float | None:
        value = self.noise.get("margin_of_error_95")
        return None if value is None else float(value)


class ReleaseResult:
    """A charged release and the public tessellation it was counted over."""

    def __init__(self, release: Any, tessellation: Any, written: list[Path] | None = None) -> None:
        self.release = release
        self.tessellation = tessellation
        #: the files published with the release (when it was given an output)
        self.written: list[Path] = list(written or [])

    @property
    def kind(self) -> str:
        return str(self.release.kind)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return dict(self.release.tables)

    @property
    def metadata(self) -> ReleaseMetadata:
        r = self.release
        return ReleaseMetadata(
            kind=r.kind,
            unit=r.unit,
            bounds=dict(r.bounds),
            cost=r.cost,
            noise=dict(r.noise),
            domain=dict(r.domain),
            params=dict(r.params),
            for_publication=bool(r.for_publication),
        )

    def to_pandas(self) -> pd.DataFrame:
        """The main table in long form (a copy)."""
        return self.release.table.copy()

    def to_geodataframe(self, *, all_flows: bool = False) -> Any:
        """The release as a map layer in EPSG:4326, the same as the CLI's ``--format`` layers
        (:func:`privmob.render.layers.release_layer`): OD flows as LineStrings between the
        tiles' representative points with origin and destination ids and names, zone tables
        as the tiles' polygons with their noisy values, 95% margins and ``below_margin``
        flags. OD flows: only those above the noise floor unless ``all_flows`` (every non-zero
        cell). Raises :class:`~privmob.errors.ConfigError` for a release without tiles."""
        from privmob.render.layers import release_layer

        return release_layer(self.release, self.tessellation, keep_all=all_flows)

    def write(self, folder: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write the release (one Parquet file per table and ``metadata.json``)."""
        from privmob.releases.base import write_release

        return write_release(self.release, folder, overwrite=overwrite)

    def write_html(self, path: str | Path, *, overwrite: bool = False) -> dict[str, Path]:
        """A mobility report as HTML (with ``report.json`` and its tables beside it)."""
        if self.kind != "report":
            raise TypeError(f"a {self.kind} release has no HTML report; use write()")
        from privmob.render.report_files import write_report

        return write_report(self.release, path, overwrite=overwrite)

    def html(self, *, period: Any = None) -> str:
        """The display of the release (:mod:`privmob.render.release_html`): its settings, a
        picture of **one** period (``period``, default the first: an OD matrix of 306 days is
        never shown summed) with its uncertainty (flows and zones above the noise floor only,
        zones within their margin hatched) and the first rows with zone names beside ids."""
        from privmob.render.release_html import release_html

        return release_html(self.release, self.tessellation, period=period)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        rows = len(self.release.table)
        return f"<{self.kind} release: {self.metadata.cost.describe()}, {rows:,} rows>"
