"""A web basemap under the SVG maps, fetched by the *browser* that views the page.

privmob itself never downloads anything: a map drawn with a basemap holds ``<image>`` elements
that point at raster web tiles (OpenStreetMap's by default) and a visible attribution
("© OpenStreetMap contributors"). Viewed online, the browser draws the streets under the
tiles; viewed offline (or when the tile server does not answer) the images stay empty and the
map is what it is without them: tile outlines, colours, labels and legend on a plain
background, the page complete.

Offline (``basemap=False``, ``Session(offline_maps=True)``, ``privmob report
--offline-maps``, or the environment variable ``PRIVMOB_OFFLINE_MAPS=1`` for a whole process)
draws no image, no attribution and no link: the page then names no external address at all,
so viewing it sends no request anywhere.

Web tiles are Web Mercator; the maps are an equirectangular projection scaled by the cosine of
the middle latitude (:class:`privmob.render.svg.Projection`). Each web tile is placed by
projecting its own corners, so it meets the tiles exactly at every web-tile corner (inside a
web tile, at city scale, the two projections differ by well under a pixel).

What the tile server learns is the area viewed (the public tessellation's extent) and the
viewer's address, never a released value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from html import escape
from typing import Any

#: Environment variable that turns every basemap off (any value but "", "0", "false", "no").
OFFLINE_ENV = "PRIVMOB_OFFLINE_MAPS"
#: Most web tiles drawn under one map (a coarser zoom level is used beyond it).
MAX_TILES = 48


@dataclass(frozen=True)
class Basemap:
    """A raster web-tile source: its URL template (``{z}``, ``{x}``, ``{y}``), the attribution
    shown on every map that draws it, the page the attribution links to and its zoom range."""

    url: str = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    attribution: str = "© OpenStreetMap contributors"
    link: str = "https://www.openstreetmap.org/copyright"
    max_zoom: int = 19


#: OpenStreetMap's standard tiles (the default basemap).
OSM = Basemap()


def offline_by_environment() -> bool:
    """Is the basemap turned off for this process (``PRIVMOB_OFFLINE_MAPS``)?"""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("", "0", "false", "no")


#: The basemap of maps drawn without one named (:func:`drawing_basemap`; none by default).
_CURRENT: ContextVar[Basemap | None] = ContextVar("privmob_basemap", default=None)


def resolve(basemap: bool | Basemap | None) -> Basemap | None:
    """The basemap a map draws: ``True`` the default one (:data:`OSM`), a :class:`Basemap`
    itself, ``False`` none, ``None`` the one of the surrounding :func:`drawing_basemap` (none
    outside it); none at all under ``PRIVMOB_OFFLINE_MAPS``."""
    if offline_by_environment() or basemap is False:
        return None
    if basemap is None:
        return _CURRENT.get()
    return OSM if basemap is True else basemap


@contextmanager
def drawing_basemap(basemap: bool | Basemap | None) -> Iterator[None]:
    """Within it, maps drawn without a ``basemap`` of their own draw this one (a release's
    display sets it once for all its pictures)."""
    token = _CURRENT.set(resolve(basemap))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _tile_xy(lng: float, lat: float, z: int) -> tuple[float, float]:
    """Web Mercator tile coordinates (fractional) of a point at zoom ``z``."""
    n = 2**z
    lat = max(min(lat, 85.0511), -85.0511)
    y = (1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n
    return (lng + 180) / 360 * n, y


def _tile_corner(x: int, y: int, z: int) -> tuple[float, float]:
    """(lng, lat) of the north-west corner of web tile (x, y) at zoom ``z``."""
    n = 2**z
    return x / n * 360 - 180, math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * y / n))))


def _view(proj: Any) -> tuple[float, float, float, float]:
    """(west, south, east, north) of the map's drawing area (the inverse projection of its
    corners)."""
    west = proj.x0 - proj.pad / (proj.kx * proj.s)
    east = proj.x0 + (proj.width - proj.pad) / (proj.kx * proj.s)
    north = proj.y1 + proj.pad / proj.s
    south = proj.y1 - (proj.height - proj.pad) / proj.s
    return west, south, east, north


def zoom_level(proj: Any, basemap: Basemap) -> int:
    """The web zoom level whose tiles show at about their own size (256 px) on this map, made
    coarser until at most :data:`MAX_TILES` tiles cover it."""
    per_degree = proj.kx * proj.s  # map pixels per degree of longitude
    z = round(math.log2(max(per_degree * 360 / 256, 1e-9)))
    z = max(0, min(basemap.max_zoom, z))
    west, south, east, north = _view(proj)
    while z > 0:
        (x0, y0), (x1, y1) = _tile_xy(west, north, z), _tile_xy(east, south, z)
        if (math.floor(x1) - math.floor(x0) + 1) * (math.floor(y1) - math.floor(y0) + 1) <= (
            MAX_TILES
        ):
            break
        z -= 1
    return z


def basemap_svg(proj: Any, basemap: Basemap | None) -> str:
    """The web tiles under a map (``<g class='pm-basemap'>`` of ``<image>``, inside the
    zoomable group, before the tiles), on a plain background that is all an offline viewer
    sees; '' without a basemap."""
    if basemap is None:
        return ""
    z = zoom_level(proj, basemap)
    n = 2**z
    west, south, east, north = _view(proj)
    (fx0, fy0), (fx1, fy1) = _tile_xy(west, north, z), _tile_xy(east, south, z)
    out = [
        f"<g class='pm-basemap'><rect width='{proj.width}' height='{proj.height}' fill='#f2efe9'/>"
    ]
    for ty in range(max(math.floor(fy0), 0), min(math.floor(fy1), n - 1) + 1):
        for tx in range(math.floor(fx0), math.floor(fx1) + 1):
            lng0, lat0 = _tile_corner(tx, ty, z)
            lng1, lat1 = _tile_corner(tx + 1, ty + 1, z)
            (x0, y0), (x1, y1) = proj(lng0, lat0), proj(lng1, lat1)
            href = basemap.url.format(z=z, x=tx % n, y=ty)
            out.append(
                f"<image href='{escape(href)}' x='{x0:.2f}' y='{y0:.2f}' "
                f"width='{x1 - x0:.2f}' height='{y1 - y0:.2f}' preserveAspectRatio='none'/>"
            )
    out.append("</g>")
    return "".join(out)


#: Fill opacity of the tiles over a basemap (the streets show through).
TILE_OPACITY = 0.72


def tiles_group(basemap: Basemap | None, opacity: float = TILE_OPACITY) -> tuple[str, str]:
    """The opening and closing of the group around a map's tiles: translucent (``opacity``)
    over a basemap so that the streets show through, plain (no group) without one."""
    if basemap is None:
        return "", ""
    return f"<g class='pm-over-basemap' fill-opacity='{opacity}'>", "</g>"


def attribution_svg(proj: Any, basemap: Basemap | None) -> str:
    """The basemap's attribution in the map's lower right corner (outside the zoomable group,
    always visible), linked to its page; '' without a basemap."""
    if basemap is None:
        return ""
    text = basemap.attribution
    w = len(text) * 5.6 + 8
    x, y = proj.width - w, proj.height - 14
    return (
        f"<g class='pm-attribution'><rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='14' "
        f"fill='#fff' fill-opacity='0.8'/><a href='{escape(basemap.link)}' target='_blank'>"
        f"<text x='{proj.width - 4}' y='{y + 10}' text-anchor='end' fill='#333' "
        "font-family='system-ui,sans-serif' font-size='9.5'>"
        f"{escape(text)}</text></a></g>"
    )
