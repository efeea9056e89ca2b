"""Tile names on maps: a readable name for every tile (tooltips, flows, rankings) and the labels
drawn on a map where they fit.

- :func:`tile_names`: the tessellation's own names; for a tile without one (a square grid, H3
  cells, zones read without a name column) its id and where it is, the rounded latitude and
  longitude of its centre (``tile 18 (40.7181, -74.0431)``, ``88283082b9fffff (37.7749,
  -122.4194)``): never a bare number.
- :func:`tile_labels` / :func:`labels_svg`: the short text drawn on the map (the name, or the
  id of an unnamed tile, which the tables use), placed at the tile's representative point only
  when its box lies inside the tile's projected outline and overlaps no label already placed
  (larger tiles first); labels that fit only once the reader zooms in (2, 4 or 8 times) appear
  then (:data:`LABEL_JS`), at their size on screen.

Public geometry and names only: no released value decides where a label goes.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import shapely

    from privmob.data.tessellation import Tessellation
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")
    shapely = lazy_module("shapely")

#: Font of the labels (smaller than the legend's); width of one character of it, generous.
LABEL_FONT = "font-family='system-ui,sans-serif' font-size='9'"
LABEL_CHAR_PX = 5.4
LABEL_HEIGHT_PX = 11.0


def _named(tess: dict[str, Any]) -> list[bool]:
    """Per tile: does the tessellation give it a name of its own (not its id)? (Tiles given
    by names alone, without ids, are named.)"""
    names = tess["names"]
    ids = tess.get("ids")
    if ids is None:
        return [True] * len(names)
    if tess.get("has_names") is False:
        return [False] * len(ids)
    return [str(n) != str(t) for n, t in zip(names, ids, strict=True)]


def tile_names(tess: dict[str, Any]) -> list[str]:
    """A readable name per tile: its own name, else its id and its centre's latitude and
    longitude rounded to 4 decimals (about 10 m), e.g. ``tile 18 (40.7181, -74.0431)``."""
    out = []
    for i, named in enumerate(_named(tess)):
        if named:
            out.append(str(tess["names"][i]))
            continue
        tid = str(tess["ids"][i])
        what = f"tile {tid}" if tid.lstrip("-").isdigit() else tid
        out.append(f"{what} ({float(tess['lat'][i]):.4f}, {float(tess['lng'][i]):.4f})")
    return out


def tessellation_names(tess: Tessellation) -> list[str]:
    """:func:`tile_names` of a :class:`~privmob.data.tessellation.Tessellation` (its own names,
    else each tile's id and centroid): the names of the map layers' ``tile_name``,
    ``origin_name`` and ``destination_name``."""
    names = tess.tile_names
    if names is not None:
        return list(names)
    ids = [str(t) for t in tess.tile_ids]
    cents = tess.centroids()
    tiles = {"ids": ids, "names": ids, "lat": cents[:, 1], "lng": cents[:, 0], "has_names": False}
    return tile_names(tiles)


def tile_labels(tess: dict[str, Any]) -> list[str]:
    """The text drawn on a tile: its own name, or its id (as in the tables) when it has none."""
    return [
        str(tess["names"][i]) if named else str(tess["ids"][i])
        for i, named in enumerate(_named(tess))
    ]


#: The zoom levels at which labels are placed: a label that does not fit at level 1 (the map
#: as drawn) may fit once the reader zooms in 2, 4 or 8 times (labels keep their size on screen).
LEVELS = (1, 2, 4, 8)

#: The most labels on one map (larger tiles and lower zoom levels first): a 10,000-cell grid
#: would otherwise carry 10,000 labels that no one reads.
MAX_LABELS = 400

Placement = tuple[int, float, float, int]  # tile index, x, y (map pixels), zoom level
Box = tuple[float, float, float, float]

#: Placements already computed, per projection (a report's small maps share one).
_PLACED: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], list[Placement]]]
_PLACED = weakref.WeakKeyDictionary()


def _projected(proj: Any, outlines: Sequence[Any]) -> list[tuple[shapely.Polygon, int]]:
    """Each tile's largest part in map pixels, with its index, larger tiles first (all rings
    projected and built at once)."""
    rings = [(i, ring) for i, parts in enumerate(outlines) for ring in parts if len(ring) > 3]
    if not rings:
        return []
    xy = np.concatenate([np.asarray(r, dtype=float) for _, r in rings])
    which = np.repeat(np.arange(len(rings)), [len(r) for _, r in rings])
    px, py = proj(xy[:, 0], xy[:, 1])
    polys = shapely.polygons(shapely.linearrings(np.column_stack([px, py]), indices=which))
    bad = ~shapely.is_valid(polys)
    if bad.any():
        polys[bad] = shapely.make_valid(polys[bad])
    areas = shapely.area(polys)
    best: dict[int, int] = {}
    for k, (i, _) in enumerate(rings):
        if areas[k] > 0 and (i not in best or areas[k] > areas[best[i]]):
            best[i] = k
    order = sorted(best.items(), key=lambda kv: -areas[kv[1]])
    return [(polys[k], i) for i, k in order]


def label_box(text: str, x: float, y: float, level: float = 1) -> Box:
    """The box of a label centred at (x, y) in map pixels, seen at zoom ``level`` (the text
    keeps its size on screen, so its box in map pixels shrinks as 1 / level)."""
    w, h = len(text) * LABEL_CHAR_PX / level, LABEL_HEIGHT_PX / level
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def place_labels(
    proj: Any, outlines: Sequence[Any], texts: Sequence[str], levels: Sequence[int] = LEVELS
) -> list[Placement]:
    """(tile index, x, y, level) of each label that fits: at the first zoom ``level`` where
    its box (text width x one line, :func:`label_box`), centred at the tile's representative
    point in map pixels, lies inside the tile's projected outline (its largest part) and
    overlaps no label placed before it (those of lower levels, seen at this one); larger tiles
    are placed first. A label of level 1 is drawn as the map is; the others appear when the
    reader zooms in that far (:data:`LABEL_JS`). At most :data:`MAX_LABELS`."""
    cache = _PLACED.setdefault(proj, {})
    key = (*texts, *map(str, levels))
    if key in cache:
        return cache[key]
    shapes = _projected(proj, outlines)
    polys = [poly for poly, _ in shapes]
    tile = np.array([i for _, i in shapes], dtype=np.int64)
    bounds = shapely.bounds(np.asarray(polys, dtype=object)) if polys else np.zeros((0, 4))
    span_x, span_y = bounds[:, 2] - bounds[:, 0], bounds[:, 3] - bounds[:, 1]
    chars = np.array([len(texts[i]) for i in tile], dtype=float)
    points: dict[int, shapely.Point] = {}
    placed: list[Placement] = []
    open_ = chars > 0  # tiles (in size order) still without a label
    for level in levels:
        if len(placed) >= MAX_LABELS:
            break
        bucket = _BUCKET_PX / level
        taken: dict[tuple[int, int], list[Box]] = {}
        for i, x, y, _ in placed:
            _take(label_box(texts[i], x, y, level), taken, bucket)
        wide = span_x >= chars * LABEL_CHAR_PX / level
        fits = open_ & wide & (span_y >= LABEL_HEIGHT_PX / level)
        for k in np.flatnonzero(fits):
            i, poly = int(tile[k]), polys[k]
            pt = points.get(i) or points.setdefault(i, poly.representative_point())
            box = label_box(texts[i], pt.x, pt.y, level)
            if _overlaps(box, taken, bucket) or not poly.contains(shapely.box(*box)):
                continue
            _take(box, taken, bucket)
            placed.append((i, pt.x, pt.y, level))
            open_[k] = False
            if len(placed) >= MAX_LABELS:
                break
    cache[key] = placed
    return placed


_BUCKET_PX = 32.0


def _cells(box: Box, bucket: float) -> list[tuple[int, int]]:
    """The buckets (squares of side ``bucket``) a label box touches."""
    x0, y0, x1, y1 = (int(v // bucket) for v in box)
    return [(cx, cy) for cx in range(x0, x1 + 1) for cy in range(y0, y1 + 1)]


def _take(box: Box, taken: dict[tuple[int, int], list[Box]], bucket: float) -> None:
    for cell in _cells(box, bucket):
        taken.setdefault(cell, []).append(box)


def _overlaps(box: Box, taken: dict[tuple[int, int], list[Box]], bucket: float) -> bool:
    """Does ``box`` overlap a label box placed before (looked up in the buckets it touches)?"""
    x0, y0, x1, y1 = box
    return any(
        x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1
        for cell in _cells(box, bucket)
        for b in taken.get(cell, ())
    )


def labels_svg(proj: Any, outlines: Sequence[Any], texts: Sequence[str]) -> str:
    """The labels that fit (:func:`place_labels`) as ``<text class='pm-label'>`` with a white
    halo, in a group that lets the pointer through to the tiles (their tooltips). A label of a
    zoom level above 1 carries it (``data-zoom``) and is hidden until the reader zooms that far
    (:data:`LABEL_JS`; without script, as in a notebook, only the level-1 labels show)."""
    out = [f"<g class='pm-labels' pointer-events='none' {LABEL_FONT}>"]
    for i, x, y, level in place_labels(proj, outlines, texts):
        hidden = "" if level == 1 else f" data-zoom='{level}' display='none'"
        out.append(
            f"<text class='pm-label' x='{x:.1f}' y='{y:.1f}' text-anchor='middle' "
            "dominant-baseline='central' fill='#222' stroke='#fff' stroke-width='2.5' "
            f"stroke-opacity='0.85' paint-order='stroke'{hidden}>{escape(texts[i])}</text>"
        )
    out.append("</g>")
    return "".join(out)


#: Keeps labels at their size on screen when a map is zoomed (svg.ZOOM_JS scales its g.pm-zoom)
#: and shows those of the zoom levels reached; plain DOM, no external script.
LABEL_JS = """
document.addEventListener('DOMContentLoaded',function(){
document.querySelectorAll('svg.pm-map g.pm-zoom').forEach(function(g){
var ls=g.querySelectorAll('text.pm-label');if(!ls.length)return;
function upd(){var m=/scale\\(([0-9.]+)\\)/.exec(g.getAttribute('transform')||'');
var s=m?parseFloat(m[1]):1;ls.forEach(function(t){
var z=parseFloat(t.getAttribute('data-zoom')||'1');
t.setAttribute('display',s>=z?'inline':'none');
t.setAttribute('font-size',(9/s).toFixed(3));t.setAttribute('stroke-width',(2.5/s).toFixed(3));});}
new MutationObserver(upd).observe(g,{attributes:true,attributeFilter:['transform']});});});
"""
