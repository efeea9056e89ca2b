"""Tile names on maps: a readable name for every tile (tooltips, flows, rankings) and the labels
drawn on a map where they fit.

- :func:`tile_names`: the tessellation's own names; for a tile without one (a square grid, H3
  cells, zones read without a name column) its id and where it is, the rounded latitude and
  longitude of its centre (``tile 18 (40.7181, -74.0431)``, ``88283082b9fffff (37.7749,
  -122.4194)``): never a bare number.
- :func:`tile_labels` / :func:`labels_svg`: the short text drawn on the map (the name, or the
  id of an unnamed tile, which the tables use), placed at the tile's representative point only
  when its box lies inside the tile's projected outline and overlaps no label already placed
  (larger tiles first).

Public geometry and names only: no released value decides where a label goes.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np
import shapely

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


def tile_labels(tess: dict[str, Any]) -> list[str]:
    """The text drawn on a tile: its own name, or its id (as in the tables) when it has none."""
    return [
        str(tess["names"][i]) if named else str(tess["ids"][i])
        for i, named in enumerate(_named(tess))
    ]


#: Placements already computed, per projection (a report's small maps share one).
_PLACED: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], list[tuple[int, float, float]]]]
_PLACED = weakref.WeakKeyDictionary()


def place_labels(
    proj: Any, outlines: Sequence[Any], texts: Sequence[str]
) -> list[tuple[int, float, float]]:
    """(tile index, x, y) of each label that fits: its box (text width x one line), centred at
    the tile's representative point in map pixels, lies inside the tile's projected outline
    (its largest part) and overlaps no label placed before it; larger tiles are placed first."""
    cache = _PLACED.setdefault(proj, {})
    key = tuple(texts)
    if key in cache:
        return cache[key]
    shapes = []
    for i, rings in enumerate(outlines):
        polys = []
        for ring in rings:
            if len(ring) > 2:
                xy = np.asarray(ring, dtype=float)
                px, py = proj(xy[:, 0], xy[:, 1])
                poly = shapely.Polygon(np.column_stack([px, py]))
                polys.append(poly if poly.is_valid else poly.buffer(0))
        polys = [p for p in polys if not p.is_empty]
        if polys:
            shapes.append((max(polys, key=lambda p: p.area), i))
    shapes.sort(key=lambda s: -s[0].area)
    placed: list[tuple[int, float, float]] = []
    taken: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}
    for poly, i in shapes:
        text = texts[i]
        w, h = len(text) * LABEL_CHAR_PX, LABEL_HEIGHT_PX
        x0, y0, x1, y1 = poly.bounds
        if not text or w > x1 - x0 or h > y1 - y0:
            continue
        pt = poly.representative_point()
        box = (pt.x - w / 2, pt.y - h / 2, pt.x + w / 2, pt.y + h / 2)
        if not poly.contains(shapely.box(*box)) or _overlaps(box, taken):
            continue
        for cell in _cells(box):
            taken.setdefault(cell, []).append(box)
        placed.append((i, pt.x, pt.y))
    cache[key] = placed
    return placed


_BUCKET_PX = 32.0


def _cells(box: tuple[float, float, float, float]) -> list[tuple[int, int]]:
    """The buckets (squares of :data:`_BUCKET_PX`) a label box touches."""
    x0, y0, x1, y1 = (int(v // _BUCKET_PX) for v in box)
    return [(cx, cy) for cx in range(x0, x1 + 1) for cy in range(y0, y1 + 1)]


def _overlaps(
    box: tuple[float, float, float, float],
    taken: dict[tuple[int, int], list[tuple[float, float, float, float]]],
) -> bool:
    """Does ``box`` overlap a label box placed before (looked up in the buckets it touches)?"""
    x0, y0, x1, y1 = box
    return any(
        x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1
        for cell in _cells(box)
        for b in taken.get(cell, ())
    )


def labels_svg(proj: Any, outlines: Sequence[Any], texts: Sequence[str]) -> str:
    """The labels that fit (:func:`place_labels`) as ``<text class='pm-label'>`` with a white
    halo, in a group that lets the pointer through to the tiles (their tooltips)."""
    out = [f"<g class='pm-labels' pointer-events='none' {LABEL_FONT}>"]
    for i, x, y in place_labels(proj, outlines, texts):
        out.append(
            f"<text class='pm-label' x='{x:.1f}' y='{y + 3:.1f}' text-anchor='middle' "
            "fill='#222' stroke='#fff' stroke-width='2.5' stroke-opacity='0.85' "
            f"paint-order='stroke'>{escape(texts[i])}</text>"
        )
    out.append("</g>")
    return "".join(out)
