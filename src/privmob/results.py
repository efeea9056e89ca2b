"""Releases as values: one surface for every release the Session returns.

``to_pandas()`` (the long table), ``to_geodataframe()`` (tiles as polygons, OD flows as lines,
EPSG:4326), ``metadata`` (typed), ``write(folder)`` (the release's Parquet files and
``metadata.json``, through :func:`privmob.releases.base.write_release`) and ``_repr_html_`` for
notebooks. Everything here reads only the released (noisy) tables and the public tessellation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from privmob.lazy_imports import lazy_module
from privmob.releases.metadata import ReleaseMetadata as ReleaseMetadata

if TYPE_CHECKING:
    import pandas as pd

    from privmob.data.tessellation import Tessellation
    from privmob.releases.release import Release
else:
    pd = lazy_module("pandas")


class ReleaseResult:
    """A charged release and the public tessellation it was counted over."""

    def __init__(
        self,
        release: Release,
        tessellation: Tessellation | None,
        written: list[Path] | None = None,
        *,
        basemap: bool = True,
    ) -> None:
        self.release = release
        self.tessellation = tessellation
        #: the maps of :meth:`html` / :meth:`write_html` draw a web basemap (fetched by the
        #: browser that shows them); False (``Session(offline_maps=True)``): none, no request
        self.basemap = basemap
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
        """What the release protects and how (its ``metadata.json``, typed)."""
        return self.release.typed_metadata()

    def to_pandas(self) -> pd.DataFrame:
        """The main table in long form (a copy)."""
        return self.release.table.copy()

    def top_flows(self, n: int = 50, *, level: str | None = None) -> pd.DataFrame:
        """The ``n`` largest flows of an OD release, largest first, each with its 95% margin
        (``margin_95``), the interval ``low``..``high`` and ``clear`` (above its margin);
        ``level``: a coarser level of a hierarchy (``"borough"``), default the tiles. Over
        every period of the release (filter ``period`` to rank within one)."""
        from privmob.releases.hierarchy import FINEST, level_names, table_name, top_flows

        if self.kind != "od":
            raise TypeError(f"a {self.kind} release has no flows; top_flows is for od")
        name = "od" if level in (None, FINEST) else table_name(str(level))
        if name not in self.release.tables:
            levels = level_names(self.release)
            raise KeyError(
                f"no level {level!r} in this release (levels: {', '.join(levels) or FINEST})"
            )
        margin = self.release.noise.margin_of_error_95
        return top_flows(self.release.tables[name], n, margin)

    def to_geodataframe(self, *, all_flows: bool = False) -> Any:
        """The release as a map layer in EPSG:4326, the same as the CLI's ``--format`` layers
        (:func:`privmob.render.layers.release_layer`): OD flows as LineStrings between the
        tiles' representative points with origin and destination ids and names, zone tables
        as the tiles' polygons with their noisy values, 95% margins and ``below_margin``
        flags. OD flows: only those above the noise floor unless ``all_flows`` (every non-zero
        cell). Raises :class:`~privmob.errors.ConfigError` for a release without tiles."""
        from privmob.errors import ConfigError
        from privmob.render.layers import release_layer

        if self.tessellation is None:
            raise ConfigError(f"a {self.kind} release counted without tiles has no map layer")
        return release_layer(self.release, self.tessellation, keep_all=all_flows)

    def write(self, folder: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write the release (one Parquet file per table and ``metadata.json``)."""
        from privmob.releases.base import write_release

        return write_release(self.release, folder, overwrite=overwrite)

    def write_html(
        self, path: str | Path, *, overwrite: bool = False, basemap: bool | None = None
    ) -> dict[str, Path]:
        """A mobility report as HTML (with ``report.json`` and its tables beside it);
        ``basemap`` (default :attr:`basemap`): web tiles under its large maps, fetched by the
        viewer's browser; ``False``: none, and the page names no external address."""
        if self.kind != "report":
            raise TypeError(f"a {self.kind} release has no HTML report; use write()")
        from privmob.render.report_files import write_report

        on = self.basemap if basemap is None else basemap
        return write_report(self.release, path, overwrite=overwrite, basemap=on)

    def html(self, *, period: Any = None, basemap: bool | None = None) -> str:
        """The display of the release (:mod:`privmob.render.release_html`): its settings (the
        95% margin and the bounds, per trip at trip level), a picture of **one** period or
        slice (``period``, default the first: an OD matrix of 306 days is never shown summed;
        for a count table, the label of its other dimensions, e.g. ``"7"`` for hour 7) with
        its uncertainty (only values above the noise floor coloured and ranked), and the first
        rows with zone names beside ids. Every kind draws itself: flows, zone maps, bars by
        hour or any dimension, a series' line with its band, a report's key sections.
        ``basemap`` (default :attr:`basemap`): web tiles under the maps, fetched by the
        notebook's browser, with their attribution; ``False``: none, no external address."""
        from privmob.render.release_html import release_html

        on = self.basemap if basemap is None else basemap
        return release_html(self.release, self.tessellation, period=period, basemap=on)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        rows = len(self.release.table)
        return f"<{self.kind} release: {self.metadata.cost.describe()}, {rows:,} rows>"
