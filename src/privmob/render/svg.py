"""Inline SVG charts and maps for HTML reports and notebook displays (no CDN, no script
from elsewhere; a map's optional web basemap is fetched by the viewer's browser only:
:mod:`privmob.render.basemap`).

Every function returns an SVG string drawn from released values and public geometry only.
Maps are ``<svg class='pm-map'>`` with their drawing in a ``<g class='pm-zoom'>`` (the
report's few lines of inline JS zoom and pan it: :data:`ZOOM_JS`) and a fixed legend
(``<g class='pm-legend'>``) that states units and class breaks. Axis labels are thinned so
that they never overlap, whatever the number of bins (e.g. a year of days).

Uncertainty is drawn, never hidden: given the 95% margin of error of the noise (public), bar
charts carry whiskers of +-margin, line charts a band of +-margin. What is coloured follows one
rule (:func:`privmob.privacy.signal.is_signal`): a value is signal iff it is above its
family's noise floor (``floor``: the level the noise of none of the cells the caption talks
about reaches with 95% probability; without it, the 95% margin of one cell, the floor of a
family of one). Everything else is grey (bars) or hatched (tiles) in the ``pm-below`` style,
and the caption states the same floor. Small multiples share one colour scale (``vmax``);
cumulative-share curves carry a band that holds the true curve when no cell's noise exceeds
the floor, and are not drawn when no cell clears it. This reads only the noisy values and
public parameters (post-processing, SPEC invariant 6).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np

from privmob.privacy.signal import is_signal, signal_mask
from privmob.render.basemap import Basemap, attribution_svg, basemap_svg, resolve, tiles_group
from privmob.render.map_labels import labels_svg, tile_labels, tile_names

#: fill of a value within its 95% margin of 0 (cannot be told from empty): never a palette colour
BELOW = "#d9d9d9"
PALETTE = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#084594"]
SERIES = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
FONT = "font-family='system-ui,sans-serif' font-size='11'"
#: Width of one character of FONT, generous (digits and '-' of system-ui at 11 px are ~6.2).
CHAR_PX = 6.6

#: Wheel zoom (around the cursor), drag pan and double-click reset for every svg.pm-map;
#: plain DOM, no external script.
ZOOM_JS = """
document.addEventListener('DOMContentLoaded',function(){
document.querySelectorAll('svg.pm-map').forEach(function(svg){
var g=svg.querySelector('g.pm-zoom');if(!g)return;var s=1,tx=0,ty=0,drag=null;
function pt(e){var r=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal;
return [(e.clientX-r.left)*vb.width/r.width,(e.clientY-r.top)*vb.height/r.height];}
function apply(){g.setAttribute('transform','translate('+tx+','+ty+') scale('+s+')');}
svg.addEventListener('wheel',function(e){e.preventDefault();var p=pt(e);
var f=e.deltaY<0?1.25:0.8,n=Math.min(40,Math.max(1,s*f));f=n/s;
tx=p[0]-(p[0]-tx)*f;ty=p[1]-(p[1]-ty)*f;s=n;apply();},{passive:false});
svg.addEventListener('mousedown',function(e){drag=pt(e);});
window.addEventListener('mouseup',function(){drag=null;});
svg.addEventListener('mousemove',function(e){if(!drag)return;var p=pt(e);
tx+=p[0]-drag[0];ty+=p[1]-drag[1];drag=p;apply();});
svg.addEventListener('dblclick',function(){s=1;tx=0;ty=0;apply();});});});
"""


def label_step(labels: Sequence[str], spacing: float, every: int = 1) -> int:
    """The smallest step >= ``every`` so that labels drawn every ``step`` positions, each
    centred ``spacing`` px apart from the next position, do not overlap."""
    chars = max((len(str(x)) for x in labels), default=1)
    need = chars * CHAR_PX + 6
    return max(every, math.ceil(need / max(spacing, 1e-9)))


def _fmt(v: float) -> str:
    if isinstance(v, (int, np.integer)) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.3g}"


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(v))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if v <= m * mag:
            return m * mag
    return 10.0 * mag


def within_margin(value: float, margin: float | None) -> bool:
    """True when a noisy count is at or below ``margin`` (its 95% margin, or its family's
    noise floor), i.e. not signal by :func:`privmob.privacy.signal.is_signal`: it cannot be
    told from noise (post-processing of the noisy value and public parameters). Never drawn
    in a full colour."""
    return margin is not None and not is_signal(value, margin)


def _margins(margin: float | Sequence[float] | None, n: int) -> list[float] | None:
    if margin is None:
        return None
    if isinstance(margin, (int, float, np.integer, np.floating)):
        return [float(margin)] * n
    return [float(m) for m in margin]


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    width: int = 560,
    height: int = 220,
    highlight_last: bool = False,
    label_every: int = 1,
    title: str = "",
    margin: float | Sequence[float] | None = None,
    floor: float | None = None,
) -> str:
    """Vertical bars; negative noisy values are drawn at zero and shown in the tooltip.

    With ``margin`` (the 95% margin of error, one figure or one per bar): whiskers of
    +-margin on every bar. ``floor``: the noise floor of the bars (the family the caption
    talks about); a bar at or below it is grey (``class='pm-below'``), and a line above the
    plot says so. Without ``floor`` each bar's own margin is its floor (a family of one)."""
    n = max(len(values), 1)
    margins = _margins(margin, len(values))
    left, bottom, top = 48, 36, 12 if margins is None else 26
    pw, ph = width - left - 8, height - bottom - top
    tops = [v + (margins[i] if margins else 0) for i, v in enumerate(values)]
    vmax = _nice_max(max([0, *tops]))
    bw = pw / n
    label_every = label_step(labels, bw, label_every)
    parts = [_svg_open(width, height, title)]
    parts += _y_grid(left, top, width, ph, vmax)

    def y_of(v: float) -> float:
        return top + ph - ph * min(max(v, 0), vmax) / vmax

    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        h = ph * max(v, 0) / vmax
        x = left + i * bw
        m = margins[i] if margins else None
        below = within_margin(v, m if floor is None else floor)
        color = BELOW if below else "#bbb" if highlight_last and i == n - 1 else "#4292c6"
        cls = " class='pm-below'" if below else " class='pm-bar'"
        tip = f"{escape(str(lab))}: {_fmt(v)}" + ("" if m is None else f" ± {_fmt(m)}")
        if below and floor is not None:
            tip += f" (at or below the noise floor {_fmt(floor)}: cannot be told from noise)"
        elif below:
            tip += " (below the margin: cannot be told from empty)"
        parts.append(
            f"<rect{cls} x='{x + 0.5:.1f}' y='{top + ph - h:.1f}' width='{max(bw - 1, 0.5):.1f}' "
            f"height='{h:.1f}' fill='{color}'><title>{tip}</title></rect>"
        )
        if m is not None and m > 0:
            cx, y0, y1 = x + bw / 2, y_of(v - m), y_of(v + m)
            cap = min(bw / 4, 4)
            parts.append(
                f"<path class='pm-margin' d='M{cx:.1f},{y0:.1f}V{y1:.1f}M{cx - cap:.1f},"
                f"{y1:.1f}h{2 * cap:.1f}M{cx - cap:.1f},{y0:.1f}h{2 * cap:.1f}' "
                "stroke='#333' stroke-width='1' fill='none'/>"
            )
        if i % label_every == 0 and _fits(str(lab), x + bw / 2, width):
            parts.append(
                f"<text class='pm-xlabel' x='{x + bw / 2:.1f}' y='{height - bottom + 14}' "
                f"text-anchor='middle' {FONT}>{escape(str(lab))}</text>"
            )
    if margins and floor is not None:
        most, fl = _most(margins), _fmt(floor)
        words = _first_fitting(
            (
                f"whiskers: 95% margin of error ({most}); grey bars: at or below the noise "
                f"floor {fl} of the {len(values)} bars, cannot be told from noise",
                f"whiskers: 95% margin ({most}); grey: at or below the noise floor {fl}",
                f"{most} (95%); grey: ≤ noise floor {fl}",
            ),
            width - left,
        )
        parts.append(f"<text class='pm-uncertainty' x='{left}' y='14' {FONT}>{words}</text>")
    elif margins:
        most = _most(margins)
        words = _first_fitting(
            (
                f"whiskers: 95% margin of error ({most}); grey bars: at or below the margin, "
                "cannot be told from empty",
                f"whiskers: 95% margin ({most}); grey: at or below it, cannot be told from empty",
                f"whiskers: 95% margin ({most}); grey: at or below it",
                f"{most} (95%)",
            ),
            width - left,
        )
        parts.append(f"<text class='pm-uncertainty' x='{left}' y='14' {FONT}>{words}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _most(margins: Sequence[float]) -> str:
    """The whiskers' margin as a header says it: one figure, or "up to" the largest when the
    bars have margins of their own (a mean's, a series' bins)."""
    most = _fmt(max(margins))
    return f"±{most}" if len(set(margins)) == 1 else f"up to ±{most}"


def _first_fitting(texts: Sequence[str], room: float) -> str:
    """The first of ``texts`` whose width fits ``room`` px (the last one otherwise)."""
    return next((t for t in texts if len(t) * CHAR_PX <= room), texts[-1])


def _y_grid(left: float, top: float, width: int, ph: float, vmax: float) -> list[str]:
    """The value axis of a chart: five grid lines from 0 to ``vmax`` across the plot (which
    starts at ``left``, ``top`` and is ``ph`` high), each with its value at the left."""
    parts = []
    for t in range(5):
        y = top + ph - ph * t / 4
        parts.append(
            f"<line x1='{left}' x2='{width - 8}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>"
        )
        parts.append(
            f"<text x='{left - 4}' y='{y + 4:.1f}' text-anchor='end' {FONT}>"
            f"{_fmt(vmax * t / 4)}</text>"
        )
    return parts


def line_chart(
    x_labels: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    width: int = 560,
    height: int = 220,
    label_every: int = 1,
    y_max: float | None = None,
    title: str = "",
    margin: float | None = None,
    floor: float | None = None,
    bands: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    band_note: str = "",
) -> str:
    """One polyline per series over shared x labels, with a legend. With ``margin`` (the 95%
    margin of error of every value), each line carries a band of +-margin
    (``class='pm-band'``) and a line under the legend says so. ``floor``: the noise floor of
    all the values drawn (their family); it is drawn as a dashed line (``pm-floor``), and a
    series none of whose values clears it is drawn grey and dashed (``class='pm-below'``).
    ``bands``: an explicit (low, high) band per series name, said by ``band_note``."""
    n = len(x_labels)
    noted = margin or bands
    left, bottom, top = 48, 36, 36 if noted else 24
    pw, ph = width - left - 8, height - bottom - top
    allv = [v + (margin or 0) for s in series.values() for v in s]
    allv += [v for _, hi in (bands or {}).values() for v in hi]
    vmax = y_max if y_max is not None else _nice_max(max([0, *allv, floor or 0]))
    label_every = label_step(x_labels, pw / max(n - 1, 1), label_every)
    parts = [_svg_open(width, height, title)]
    parts += _y_grid(left, top, width, ph, vmax)

    def xy(i: int, v: float) -> tuple[float, float]:
        x = left + (pw * i / max(n - 1, 1))
        return x, top + ph - ph * max(min(v, vmax), 0) / vmax

    for j, (name, vals) in enumerate(series.items()):
        below = floor is not None and not signal_mask(list(vals), floor).any()
        color = BELOW if below else SERIES[j % len(SERIES)]
        edges = None
        if bands and name in bands:
            edges = (list(bands[name][0]), list(bands[name][1]))
        elif margin:
            edges = ([v - margin for v in vals], [v + margin for v in vals])
        if edges is not None:
            hi = [xy(i, v) for i, v in enumerate(edges[1])]
            lo = [xy(i, v) for i, v in enumerate(edges[0])][::-1]
            band = " ".join(f"{x:.1f},{y:.1f}" for x, y in hi + lo)
            parts.append(
                f"<polygon class='pm-band' points='{band}' fill='{color}' fill-opacity='0.13' "
                "stroke='none'/>"
            )
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(vals)))
        style = " class='pm-below' stroke-dasharray='4 3'" if below else " class='pm-line'"
        parts.append(
            f"<polyline{style} points='{pts}' fill='none' stroke='{color}' stroke-width='2'>"
            f"<title>{escape(name)}{' (no value clears the noise floor)' if below else ''}"
            "</title></polyline>"
        )
        parts.append(
            f"<rect x='{left + 8 + j * 130}' y='6' width='10' height='10' fill='{color}'/>"
            f"<text x='{left + 22 + j * 130}' y='15' {FONT}>{escape(name)}</text>"
        )
    if floor is not None:
        _, yf = xy(0, floor)
        parts.append(
            f"<line class='pm-floor' x1='{left}' x2='{width - 8}' y1='{yf:.1f}' y2='{yf:.1f}' "
            "stroke='#999' stroke-dasharray='2 3'/>"
        )
    words = []
    if bands:
        words.append(band_note or "bands: 95% range")
    elif margin:
        words.append(f"bands: 95% margin of error (±{_fmt(margin)})")
    if floor is not None:
        words.append(f"dotted line: noise floor {_fmt(floor)}; grey lines: none above it")
    if words:
        text = _first_fitting(["; ".join(words), words[0]], width - left - 8)
        parts.append(
            f"<text class='pm-uncertainty' x='{left + 8}' y='29' {FONT}>{escape(text)}</text>"
        )
    for i, lab in enumerate(x_labels):
        x, _ = xy(i, 0)
        if i % label_every == 0 and _fits(str(lab), x, width):
            parts.append(
                f"<text class='pm-xlabel' x='{x:.1f}' y='{height - bottom + 14}' "
                f"text-anchor='middle' {FONT}>{escape(str(lab))}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _fits(label: str, x: float, width: float) -> bool:
    """A label centred at x stays inside the chart's width."""
    return x + len(label) * CHAR_PX / 2 <= width


def box_plot(
    five: dict[str, float],
    lo: float,
    hi: float,
    unit: str,
    width: int = 560,
    *,
    unreliable: bool = False,
) -> str:
    """A five-number summary drawn on the declared range [lo, hi]; ``unreliable`` draws it
    grey and dashed (``class='pm-unreliable'``) and says so in its title."""
    height, left, right = 64, 20, 20
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return left + (width - left - right) * (min(max(v, lo), hi) - lo) / span

    mn, q1, md, q3, mx = (five[k] for k in ("min", "q25", "median", "q75", "max"))
    text = ", ".join(f"{k} {_fmt(v)}" for k, v in five.items())
    if unreliable:
        text += " (unreliable: the histogram is within its margin of 0)"
    fill, edge, mid = ("#eee", "#999", "#999") if unreliable else ("#c6dbef", "#2171b5", "#084594")
    dash = " stroke-dasharray='4 3'" if unreliable else ""
    return (
        _svg_open(width, height, f"five-number summary ({unit}): {text}")
        + (f"<g class='pm-unreliable'{dash}>" if unreliable else "<g>")
        + f"<line x1='{x(mn):.1f}' x2='{x(mx):.1f}' y1='26' y2='26' stroke='#555'/>"
        + f"<rect x='{x(q1):.1f}' y='14' width='{max(x(q3) - x(q1), 1):.1f}' height='24' "
        f"fill='{fill}' stroke='{edge}'/>"
        + f"<line x1='{x(md):.1f}' x2='{x(md):.1f}' y1='14' y2='38' stroke='{mid}' "
        "stroke-width='3'/>"
        + "".join(
            f"<line x1='{x(v):.1f}' x2='{x(v):.1f}' y1='18' y2='34' stroke='#555'/>"
            for v in (mn, mx)
        )
        + "</g>"
        + f"<text x='{left}' y='58' {FONT}>{_fmt(lo)} {escape(unit)}</text>"
        + f"<text x='{width - right}' y='58' text-anchor='end' {FONT}>{_fmt(hi)} "
        f"{escape(unit)}</text></svg>"
    )


def _share(part: np.ndarray, rest: np.ndarray) -> np.ndarray:
    total = part + rest
    return np.asarray(np.divide(part, total, out=np.zeros_like(part), where=total > 0))


def share_band(
    values: Sequence[float] | np.ndarray,
    floor: float,
    *,
    ranked: bool = False,
    points: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cumulative share of the noisy ``values`` (negatives clipped) and a band that holds
    the true curve whenever no cell's noise exceeds ``floor`` (the noise floor of the
    ``values``: with 95% probability, by its union bound). Each true count is then in
    [max(v - floor, 0), max(v + floor, 0)], and the share of the first k cells (``ranked``:
    of the k largest) is bounded by putting the low ends on one side and the high ends on the
    other. Post-processing of the noisy values and the public floor; returns (curve, low,
    high), one point per cell, or per index of ``points`` (the same values there).

    Each end is sorted and summed in place, one array at a time: the report's od_flows has 4
    million cells over 2,000 tiles, and ten arrays of them live at once took 0.34 GB."""
    v = np.asarray(values, dtype=float)

    def running(x: np.ndarray) -> tuple[np.ndarray, float]:
        """``x`` (a fresh array, ``ranked``: largest first) summed up to each cell, and its
        total; at ``points`` only."""
        if ranked:  # -sort(-x), in place
            np.negative(x, out=x)
            x.sort()
            np.negative(x, out=x)
        total = x.sum()
        np.cumsum(x, out=x)
        return (x if points is None else x[points]), total

    s_c, c_sum = running(np.clip(v, 0, None))
    s_lo, lo_sum = running(np.clip(v - floor, 0, None))
    s_hi, hi_sum = running(np.clip(v + floor, 0, None))
    curve = _share(s_c, c_sum - s_c)
    low = _share(s_lo, hi_sum - s_hi)
    high = _share(s_hi, lo_sum - s_lo)
    high[(s_hi + lo_sum - s_lo) <= 0] = 1.0  # nothing known: the band spans [0, 1]
    return curve, low, high


def _no_curve(what: str, floor: float, width: int) -> str:
    """Said instead of a cumulative curve whose cells are all below their floor."""
    text = (
        f"no cumulative share drawn: no {what} clears the noise floor {_fmt(floor)}, so its "
        "curve would be drawn from noise"
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' class='pm-no-curve' width='{width}' "
        f"height='24' viewBox='0 0 {width} 24' role='img'><title>{escape(text)}</title>"
        f"<text class='pm-uncertainty' x='8' y='16' {FONT}>{escape(text)}</text></svg>"
    )


def _band_note(floor: float) -> str:
    return f"band: the true curve if no cell's noise exceeds the noise floor {_fmt(floor)} (95%)"


def cumulative(
    edges: Sequence[float],
    counts: Sequence[float],
    unit: str,
    *,
    floor: float | None = None,
    width: int = 560,
) -> str:
    """Cumulative share over the declared bins (negative noisy counts clipped, post-processing).

    ``floor``: the noise floor of the histogram's bins (the family its caption talks about):
    the curve carries the band of :func:`share_band`, and when no bin clears the floor no
    curve is drawn, a line says why (``svg.pm-no-curve``)."""
    name = f"cumulative share (upper bin edge, {unit})"
    labels = [_fmt(e) for e in edges[1:]]
    every = max(1, len(labels) // 8)
    if floor is None:
        c = np.clip(np.asarray(counts, dtype=float), 0, None)
        cum = np.cumsum(c) / (c.sum() or 1.0)
        return line_chart(
            labels, {name: cum.tolist()}, y_max=1.0, label_every=every, height=180, width=width
        )
    if not signal_mask(list(counts), floor).any():
        return _no_curve("bin", floor, width)
    curve, low, high = share_band(list(counts), floor)
    return line_chart(
        labels,
        {name: curve.tolist()},
        y_max=1.0,
        label_every=every,
        height=180,
        width=width,
        bands={name: (low.tolist(), high.tolist())},
        band_note=_band_note(floor),
    )


def cumulative_ranking(
    values: Sequence[float] | np.ndarray, what: str, *, floor: float | None = None, width: int = 760
) -> str:
    """Cumulative share of the total held by the k largest ``values`` (k = 1 .. n, at most 60
    points). ``floor``: the noise floor of the ``values`` (the ranking's family): the curve
    carries the band of :func:`share_band`, and is not drawn (a line says why) when no value
    clears it."""
    # one float array throughout, never a Python list of the values: the report's od_flows
    # has 4 million cells over 2,000 tiles (a list of floats: 0.13 GB, and each step's copy)
    v = np.asarray(values, dtype=float)
    if floor is not None and not signal_mask(v, floor).any():
        return _no_curve(what[:-1] if what.endswith("s") else what, floor, width)
    n = len(v)
    pts = np.unique(np.linspace(0, n - 1, min(n, 60)).astype(int))
    if floor is None:
        c = -np.sort(-np.clip(v, 0, None))
        curve, low, high = (np.cumsum(c) / (c.sum() or 1.0))[pts], None, None
    else:
        curve, low, high = share_band(v, floor, ranked=True, points=pts)
    name = f"cumulative share by {what} rank"
    bands = None
    if low is not None and high is not None:
        bands = {name: (low.tolist(), high.tolist())}
    return line_chart(
        [str(i + 1) for i in pts],
        {name: curve.tolist()},
        y_max=1.0,
        label_every=max(1, len(pts) // 8),
        height=170,
        width=width,
        bands=bands,
        band_note=_band_note(floor) if floor is not None else "",
    )


# -- maps ---------------------------------------------------------------------------------


class Projection:
    """Equirectangular projection scaled by cos(mean latitude), fitted to a box."""

    def __init__(self, outlines: list[Any], width: int, height: int, pad: int = 8) -> None:
        xs = [p[0] for tile in outlines for ring in tile for p in ring]
        ys = [p[1] for tile in outlines for ring in tile for p in ring]
        self.x0, self.x1, self.y0, self.y1 = min(xs), max(xs), min(ys), max(ys)
        self.kx = math.cos(math.radians((self.y0 + self.y1) / 2))
        w = max((self.x1 - self.x0) * self.kx, 1e-9)
        h = max(self.y1 - self.y0, 1e-9)
        self.s = min((width - 2 * pad) / w, (height - 2 * pad) / h)
        self.pad = pad
        self.width = int(w * self.s + 2 * pad)
        self.height = int(h * self.s + 2 * pad)

    def __call__(self, lng: float, lat: float) -> tuple[float, float]:
        return (
            self.pad + (lng - self.x0) * self.kx * self.s,
            self.pad + (self.y1 - lat) * self.s,
        )


def _path(proj: Projection, rings: list[Any]) -> str:
    d = []
    for ring in rings:
        pts = [proj(x, y) for x, y in ring]
        d.append("M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in pts) + "Z")
    return "".join(d)


class TileOutlines:
    """The tiles of ``tess`` (its ``outlines``) fitted to a ``width`` x ``height`` map: the
    projection and each tile's SVG path, computed once. Several maps of one size (a report's
    small maps, one per time window) pass the same one to :func:`choropleth`."""

    def __init__(self, tess: dict[str, Any], width: int, height: int) -> None:
        self.outlines = tess["outlines"]
        self.size = (width, height)
        self.proj = Projection(self.outlines, width, height)
        self.paths = [_path(self.proj, rings) for rings in self.outlines]


def _color(v: float, vmax: float, lo: float = 0.0) -> str:
    """The palette colour of ``v`` among classes of equal width from ``lo`` to ``vmax``."""
    if vmax <= lo or v <= lo:
        return PALETTE[0]
    i = min(int(len(PALETTE) * (v - lo) / (vmax - lo)), len(PALETTE) - 1)
    return PALETTE[max(i, 1)]


def choropleth(
    tess: dict[str, Any],
    values: Sequence[float],
    *,
    width: int = 560,
    height: int = 420,
    title: str = "",
    legend: bool = True,
    unit: str = "",
    margin: float | None = None,
    tiles: TileOutlines | None = None,
    labels: bool = True,
    basemap: bool | Basemap | None = None,
    floor: float | None = None,
    vmax: float | None = None,
    legend_label: str | None = None,
) -> str:
    """Tiles coloured by value (8 classes of equal width up to the largest value that is
    signal, from ``floor`` when it is given); each tile's name and value on hover; a legend
    with the class breaks and ``unit``.

    Only signal is coloured (:func:`privmob.privacy.signal.is_signal`): ``floor`` is the noise
    floor of the tiles the caption talks about (without it, ``margin``, the 95% margin of
    error of a tile: a family of one). A tile at or below it is hatched grey
    (``class='pm-below'``), never given a palette colour, and the legend shows the hatch and
    the floor. ``vmax``: the top of the colour scale, shared by the small multiples of one
    figure (default: the largest signal value here); ``legend_label`` replaces the legend's
    words (e.g. "one scale for all 12 maps"). ``tiles``: the outlines of ``tess`` fitted to
    this size already (:class:`TileOutlines`).

    Every tile's tooltip names it (:func:`~privmob.render.map_labels.tile_names`: its own name,
    else its id and centre); ``labels`` draws the names that fit inside their tiles
    (:mod:`privmob.render.map_labels`). ``basemap`` (``True``: OpenStreetMap): web tiles under
    the translucent tiles, fetched by the browser, with their attribution
    (:mod:`privmob.render.basemap`); ``False``: none, no external address; ``None``: the
    surrounding :func:`~privmob.render.basemap.drawing_basemap`'s (none outside one)."""
    if tiles is None or tiles.outlines is not tess["outlines"] or tiles.size != (width, height):
        tiles = TileOutlines(tess, width, height)
    proj = tiles.proj
    limit = margin if floor is None else floor  # the one rule's threshold for these tiles
    signal = signal_mask(list(values), limit)
    if vmax is None:
        vmax = max([0.0, *(float(v) for v, s in zip(values, signal, strict=True) if s)])
    # the classes span the signal only: from the floor (nothing at or below it is coloured)
    low = float(floor) if floor is not None and 0 < floor < vmax else 0.0
    legend_h = (40 if limit is None else 54) if legend else 0
    hatch = f"pm-hatch-{zlib.crc32(f'{title}{width}x{height}'.encode()):08x}"
    parts = [_map_open(proj, legend_h, title)]
    bm = resolve(basemap)
    names = tile_names(tess)
    if limit is not None:
        parts.append(
            f"<defs><pattern id='{hatch}' patternUnits='userSpaceOnUse' width='6' height='6' "
            f"patternTransform='rotate(45)'><rect width='6' height='6' fill='{BELOW}'/>"
            "<line x1='0' y1='0' x2='0' y2='6' stroke='#fff' stroke-width='2'/></pattern></defs>"
        )
    parts.append(basemap_svg(proj, bm))
    over, under = tiles_group(bm)
    parts.append(over)
    for i, path in enumerate(tiles.paths):
        v = values[i]
        below = not signal[i]
        fill = f"url(#{hatch})" if below else _color(v, vmax, low)
        note = ""
        if below and floor is not None:
            pm = "" if margin is None else f" ± {_fmt(margin)}"
            note = f"{pm}, at or below the noise floor {_fmt(floor)}"
        elif below and margin is not None:
            note = f" ± {_fmt(margin)}, below the margin"
        cls = "pm-below" if below else "pm-tile"
        parts.append(
            f"<path class='{cls}' d='{path}' fill='{fill}' stroke='#888' "
            f"stroke-width='0.5' vector-effect='non-scaling-stroke'>"
            f"<title>{escape(names[i])}: {_fmt(v)} {escape(unit)}{note}</title></path>"
        )
    parts.append(under)
    if labels:
        parts.append(labels_svg(proj, tiles.outlines, tile_labels(tess)))
    parts.append("</g></g>" + attribution_svg(proj, bm))
    if legend:
        if vmax > 0 or limit is None:
            parts.append(_legend(vmax, proj.height + 4, proj.width, unit, legend_label, low))
        else:  # nothing is signal: no colour class to explain
            y = proj.height + 4
            level = "the 95% margin" if floor is None else "the noise floor"
            words = _first_fitting(
                [f"no tile is above {level}: none is coloured", "none coloured"],
                proj.width - 16,
            )
            parts.append(
                f"<g class='pm-legend'><rect x='0' y='{y - 4}' width='{proj.width}' "
                f"height='40' fill='#fff'/><text x='8' y='{y + 12}' {FONT}>{words}</text></g>"
            )
        if limit is not None:
            y = proj.height + 44
            if floor is not None:
                words = _first_fitting(
                    [
                        f"at or below the noise floor {_fmt(floor)}: cannot be told from noise",
                        f"≤ noise floor {_fmt(floor)}",
                    ],
                    proj.width - 36,
                )
            else:
                words = f"at or below the 95% margin ±{_fmt(limit)}: cannot be told from empty"
                if len(words) * CHAR_PX > proj.width - 36:
                    words = f"≤ margin ±{_fmt(limit)}"
            parts.append(
                f"<g class='pm-legend-below'><rect x='0' y='{y - 4}' width='{proj.width}' "
                f"height='14' fill='#fff'/><rect x='8' y='{y - 2}' width='16' height='9' "
                f"fill='url(#{hatch})' stroke='#ccc'/><text x='28' y='{y + 6}' {FONT}>"
                f"{escape(words)}</text></g>"
            )
    parts.append("</svg>")
    return "".join(parts)


def class_breaks(vmax: float, n: int = len(PALETTE), lo: float = 0.0) -> list[float]:
    """The n + 1 edges of the equal-width classes of :func:`_color` (lo .. vmax)."""
    return [lo + (vmax - lo) * i / n for i in range(n + 1)]


def _legend(
    vmax: float, y: float, width: int, unit: str, label: str | None = None, lo: float = 0.0
) -> str:
    """Colour classes with their breaks (labels thinned so they do not overlap) and the unit."""
    n = len(PALETTE)
    breaks = [_fmt(round(b)) if vmax - lo >= n else _fmt(b) for b in class_breaks(vmax, n, lo)]
    half = max(len(b) for b in breaks) * CHAR_PX / 2  # the end labels stay inside the map
    x0 = max(8.0, half + 2)
    cell = max(min(56.0, (width - 2 * x0) / n), 6.0)
    need = label_step(breaks, cell)
    step = next(d for d in (1, 2, 4, 8, n) if d >= need and n % d == 0)  # vmax always shown
    out = [
        f"<g class='pm-legend'><rect x='0' y='{y - 4}' width='{width}' height='40' fill='#fff'/>"
    ]
    for i, c in enumerate(PALETTE):
        out.append(
            f"<rect x='{x0 + i * cell:.1f}' y='{y}' width='{cell:.1f}' height='9' fill='{c}' "
            "stroke='#ccc'/>"
        )
    for i, b in enumerate(breaks):
        if i % step == 0:
            out.append(
                f"<text class='pm-break' x='{x0 + i * cell:.1f}' y='{y + 21}' "
                f"text-anchor='middle' {FONT}>{b}</text>"
            )
    if label is None:
        label = f"{unit} (noisy; classes of equal width)" if unit else "noisy value"
        if len(label) * CHAR_PX > width - 16:
            label = f"{unit} (noisy)" if unit else "noisy"
    out.append(f"<text x='8' y='{y + 33}' {FONT}>{escape(label)}</text></g>")
    return "".join(out)


def _map_open(proj: Projection, extra_h: int, title: str) -> str:
    """An svg.pm-map whose drawing (clipped to the map area) is a zoomable g.pm-zoom."""
    w, h = proj.width, proj.height
    clip = f"pm-clip-{zlib.crc32(f'{title}{w}x{h}'.encode()):08x}"
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' class='pm-map' width='{w}' "
        f"height='{h + extra_h}' viewBox='0 0 {w} {h + extra_h}' role='img' "
        "style='cursor:grab'>"
        f"<title>{escape(title)} (wheel: zoom, drag: pan, double-click: reset)</title>"
        f"<clipPath id='{clip}'><rect width='{w}' height='{h}'/></clipPath>"
        f"<g clip-path='url(#{clip})'><g class='pm-zoom'>"
    )


def flow_map(
    tess: dict[str, Any],
    flows: list[tuple[int, int, float]],
    *,
    width: int = 560,
    height: int = 420,
    title: str = "",
    unit: str = "trips",
    note: str = "",
    floor: float | None = None,
    labels: bool = True,
    basemap: bool | Basemap | None = None,
) -> str:
    """OD flows as lines between tile centroids (width by value, arrow at the destination);
    self-flows as circles. Draws ``flows`` that are signal
    (:func:`privmob.privacy.signal.is_signal` with ``floor``, the noise floor of the cells the
    caption talks about; the caller states the same floor); ``note`` is printed on the map
    (e.g. why no flow is drawn). Tile names on hover
    (:func:`~privmob.render.map_labels.tile_names`), also on each flow ("origin → destination:
    value"); ``labels`` and ``basemap`` as in :func:`choropleth`; a legend of line widths in
    ``unit``."""
    proj = Projection(tess["outlines"], width, height)
    bm = resolve(basemap)
    names = tile_names(tess)
    parts = [_map_open(proj, 40, title)]
    parts.append(
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='9' "
        "markerHeight='9' markerUnits='userSpaceOnUse' orient='auto-start-reverse'>"
        "<path d='M0,0L10,5L0,10z' "
        "fill='#d62728'/></marker></defs>"
    )
    parts.append(basemap_svg(proj, bm))
    over, under = tiles_group(bm, opacity=0.45)  # flows matter here, tiles are context
    parts.append(over)
    for i, rings in enumerate(tess["outlines"]):
        parts.append(
            f"<path d='{_path(proj, rings)}' fill='#f4f4f4' stroke='#aaa' stroke-width='0.5' "
            f"vector-effect='non-scaling-stroke'><title>{escape(names[i])}</title></path>"
        )
    parts.append(under)
    if labels:
        parts.append(labels_svg(proj, tess["outlines"], tile_labels(tess)))
    drawn = [f for f in flows if f[2] > 0 and is_signal(f[2], floor)]
    vmax = max([f[2] for f in drawn] + [1])
    for o, d, v in sorted(drawn, key=lambda f: f[2]):
        w = _flow_width(v, vmax)
        x1, y1 = proj(tess["lng"][o], tess["lat"][o])
        x2, y2 = proj(tess["lng"][d], tess["lat"][d])
        label = f"{escape(names[o])} → {escape(names[d])}: {_fmt(v)} {unit}"
        if o == d:
            parts.append(
                f"<circle cx='{x1:.1f}' cy='{y1:.1f}' r='{2 + 3 * w:.1f}' fill='none' "
                f"stroke='#d62728' stroke-opacity='0.6' stroke-width='{w:.1f}'>"
                f"<title>{label}</title></circle>"
            )
            continue
        # a slight curve so that a->b and b->a do not overlap
        mx, my = (x1 + x2) / 2 + (y2 - y1) * 0.15, (y1 + y2) / 2 - (x2 - x1) * 0.15
        parts.append(
            f"<path class='pm-flow' d='M{x1:.1f},{y1:.1f}Q{mx:.1f},{my:.1f} {x2:.1f},{y2:.1f}' "
            f"fill='none' stroke='#d62728' stroke-opacity='0.6' stroke-width='{w:.1f}' "
            f"marker-end='url(#arrow)'><title>{label}</title></path>"
        )
    parts.append("</g></g>" + attribution_svg(proj, bm))
    y = proj.height + 4
    parts.append(
        f"<g class='pm-legend'><rect x='0' y='{y - 4}' width='{proj.width}' "
        "height='40' fill='#fff'/>"
    )
    if drawn:
        step = min(110.0, (proj.width - 16) / 3)
        for i, frac in enumerate((0.25, 0.5, 1.0)):
            v = vmax * frac
            x = round(8 + i * step)
            parts.append(
                f"<line x1='{x}' x2='{x + 34}' y1='{y + 6}' y2='{y + 6}' stroke='#d62728' "
                f"stroke-opacity='0.6' stroke-width='{_flow_width(v, vmax):.1f}'/>"
                f"<text class='pm-break' x='{x + 40}' y='{y + 10}' {FONT}>{_fmt(round(v))}</text>"
            )
    text = note or f"line width: {unit} (noisy)"
    if len(text) * CHAR_PX > proj.width - 16 and "noise floor" in text:
        text = "no flow clears the noise floor" if not drawn else text
    parts.append(f"<text x='8' y='{y + 30}' {FONT}>{escape(text)}</text></g></svg>")
    return "".join(parts)


def _flow_width(v: float, vmax: float) -> float:
    return 0.5 + 5 * v / vmax


def _svg_open(width: int, height: int, title: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img'><title>{escape(title)}</title>"
    )
