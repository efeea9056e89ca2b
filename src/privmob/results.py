"""Releases as values: one surface for every release the Session returns.

``to_pandas()`` (the long table), ``to_geodataframe()`` (tiles as polygons, OD flows as lines,
EPSG:4326), ``metadata`` (typed), ``write(folder)`` (the release's Parquet files and
``metadata.json``, through :func:`privmob.releases.base.write_release`) and ``_repr_html_`` for
notebooks. Everything here reads only the released (noisy) tables and the public tessellation.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from privmob.privacy.costs import Cost, Unit


@dataclass(frozen=True)
class ReleaseMetadata:
    """What a release protects and how: the fields of its ``metadata.json``, typed."""

    kind: str
    unit: Unit
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

    def to_geodataframe(self) -> Any:
        """The release as a map layer in EPSG:4326, the same as the CLI's ``--format`` layers
        (:func:`privmob.render.layers.release_layer`): OD flows as LineStrings between the
        tiles' representative points with origin and destination ids and names, zone tables
        as the tiles' polygons with their noisy values and 95% margins. Raises
        :class:`~privmob.errors.ConfigError` for a release without tiles."""
        from privmob.render.layers import release_layer

        return release_layer(self.release, self.tessellation)

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

    def _svg_map(self) -> str:
        from privmob.releases.report.inputs import Tiles
        from privmob.render import svg

        tiles = Tiles.from_tessellation(self.tessellation)
        tess = {
            "outlines": tiles.outlines,
            "names": tiles.names,
            "lat": tiles.lat,
            "lng": tiles.lng,
        }
        table = self.to_pandas()
        index = {t: i for i, t in enumerate(tiles.ids)}
        if {"origin", "destination", "count"} <= set(table.columns):
            totals = table.groupby(["origin", "destination"], sort=False)["count"].sum()
            moe = self.metadata.margin_of_error_95 or 0.0
            top = totals[totals > moe].nlargest(10)  # flows that clear the noise only
            flows = [(index[str(o)], index[str(d)], float(v)) for (o, d), v in top.items()]  # type: ignore[misc,has-type]
            return svg.flow_map(tess, flows, title=f"largest flows above +/-{moe:.0f}")
        key = next((c for c in ("zone", "tile") if c in table.columns), None)
        if key is None or "count" not in table.columns:
            return ""
        values = [0.0] * len(tiles.ids)
        for z, v in table.groupby(key)["count"].sum().items():
            if str(z) in index:
                values[index[str(z)]] = float(v)
        return svg.choropleth(tess, values, title=self.kind)

    def _repr_html_(self) -> str:
        m = self.metadata
        warning = "" if m.for_publication else "<p><b>NOT FOR PUBLICATION</b> (fixed seed)</p>"
        moe = m.margin_of_error_95
        rows = [
            ("release", m.kind),
            ("privacy unit", m.unit.value),
            ("bounds", ", ".join(f"{k}={v}" for k, v in m.bounds.items() if v is not None)),
            ("cost", m.cost.describe()),
            ("noise", str(m.noise.get("kind", m.noise.get("mechanism", "")))),
            ("95% margin of error", "" if moe is None else f"+/-{moe:,.1f}"),
        ]
        settings = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        try:
            picture = self._svg_map()
        except Exception:
            picture = ""
        return (
            f"<div>{warning}<table>{settings}</table>"
            f"{self.to_pandas().head(10).to_html(index=False)}{picture}</div>"
        )

    def __repr__(self) -> str:
        rows = len(self.release.table)
        return f"<{self.kind} release: {self.metadata.cost.describe()}, {rows:,} rows>"
