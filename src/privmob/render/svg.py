"""Inline SVG charts and maps for offline HTML reports (no CDN, no tile server, no JS).

Every function returns an SVG string drawn from released values and public geometry only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import numpy as np

PALETTE = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#084594"]
SERIES = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
FONT = "font-family='system-ui,sans-serif' font-size='11'"


def _fmt(v: float) -> str:
    if isinstance(v, (int, np.integer)) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.3g}"


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * mag:
            return m * mag
    return 10 * mag


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    width: int = 560,
    height: int = 220,
    highlight_last: bool = False,
    label_every: int = 1,
    title: str = "",
) -> str:
    """Vertical bars; negative noisy values are drawn at zero and shown in the tooltip."""
    n = max(len(values), 1)
    left, bottom, top = 48, 36, 12
    pw, ph = width - left - 8, height - bottom - top
    vmax = _nice_max(max([0, *values]))
    bw = pw / n
    parts = [_svg_open(width, height, title)]
    for t in range(5):
        y = top + ph - ph * t / 4
        parts.append(
            f"<line x1='{left}' x2='{width - 8}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>"
        )
        parts.append(
            f"<text x='{left - 4}' y='{y + 4:.1f}' text-anchor='end' {FONT}>"
            f"{_fmt(vmax * t / 4)}</text>"
        )
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        h = ph * max(v, 0) / vmax
        x = left + i * bw
        color = "#bbb" if highlight_last and i == n - 1 else "#4292c6"
        parts.append(
            f"<rect x='{x + 0.5:.1f}' y='{top + ph - h:.1f}' width='{max(bw - 1, 0.5):.1f}' "
            f"height='{h:.1f}' fill='{color}'><title>{escape(str(lab))}: {_fmt(v)}</title></rect>"
        )
        if i % label_every == 0:
            parts.append(
                f"<text x='{x + bw / 2:.1f}' y='{height - bottom + 14}' text-anchor='middle' "
                f"{FONT}>{escape(str(lab))}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    x_labels: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    width: int = 560,
    height: int = 220,
    label_every: int = 1,
    y_max: float | None = None,
    title: str = "",
) -> str:
    """One polyline per series over shared x labels, with a legend."""
    n = len(x_labels)
    left, bottom, top = 48, 36, 24
    pw, ph = width - left - 8, height - bottom - top
    allv = [v for s in series.values() for v in s]
    vmax = y_max if y_max is not None else _nice_max(max([0, *allv]))
    parts = [_svg_open(width, height, title)]
    for t in range(5):
        y = top + ph - ph * t / 4
        parts.append(
            f"<line x1='{left}' x2='{width - 8}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>"
        )
        parts.append(
            f"<text x='{left - 4}' y='{y + 4:.1f}' text-anchor='end' {FONT}>"
            f"{_fmt(vmax * t / 4)}</text>"
        )

    def xy(i: int, v: float) -> tuple[float, float]:
        x = left + (pw * i / max(n - 1, 1))
        return x, top + ph - ph * max(min(v, vmax), 0) / vmax

    for j, (name, vals) in enumerate(series.items()):
        color = SERIES[j % len(SERIES)]
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(vals)))
        parts.append(f"<polyline points='{pts}' fill='none' stroke='{color}' stroke-width='2'/>")
        parts.append(
            f"<rect x='{left + 8 + j * 130}' y='6' width='10' height='10' fill='{color}'/>"
            f"<text x='{left + 22 + j * 130}' y='15' {FONT}>{escape(name)}</text>"
        )
    for i, lab in enumerate(x_labels):
        if i % label_every == 0:
            x, _ = xy(i, 0)
            parts.append(
                f"<text x='{x:.1f}' y='{height - bottom + 14}' text-anchor='middle' {FONT}>"
                f"{escape(str(lab))}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def box_plot(five: dict[str, float], lo: float, hi: float, unit: str, width: int = 560) -> str:
    """A five-number summary drawn on the declared range [lo, hi]."""
    height, left, right = 64, 20, 20
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return left + (width - left - right) * (min(max(v, lo), hi) - lo) / span

    mn, q1, md, q3, mx = (five[k] for k in ("min", "q25", "median", "q75", "max"))
    text = ", ".join(f"{k} {_fmt(v)}" for k, v in five.items())
    return (
        _svg_open(width, height, f"five-number summary ({unit}): {text}")
        + f"<line x1='{x(mn):.1f}' x2='{x(mx):.1f}' y1='26' y2='26' stroke='#555'/>"
        + f"<rect x='{x(q1):.1f}' y='14' width='{max(x(q3) - x(q1), 1):.1f}' height='24' "
        "fill='#c6dbef' stroke='#2171b5'/>"
        + f"<line x1='{x(md):.1f}' x2='{x(md):.1f}' y1='14' y2='38' stroke='#084594' "
        "stroke-width='3'/>"
        + "".join(
            f"<line x1='{x(v):.1f}' x2='{x(v):.1f}' y1='18' y2='34' stroke='#555'/>"
            for v in (mn, mx)
        )
        + f"<text x='{left}' y='58' {FONT}>{_fmt(lo)} {escape(unit)}</text>"
        + f"<text x='{width - right}' y='58' text-anchor='end' {FONT}>{_fmt(hi)} "
        f"{escape(unit)}</text></svg>"
    )


def cumulative(edges: Sequence[float], counts: Sequence[float], unit: str) -> str:
    """Cumulative share over the declared bins (negative noisy counts clipped, post-processing)."""
    c = np.clip(np.asarray(counts, dtype=float), 0, None)
    total = c.sum() or 1.0
    cum = np.cumsum(c) / total
    labels = [_fmt(e) for e in edges[1:]]
    every = max(1, len(labels) // 8)
    return line_chart(
        labels,
        {f"cumulative share (upper bin edge, {unit})": cum.tolist()},
        y_max=1.0,
        label_every=every,
        height=180,
    )


# -- maps ---------------------------------------------------------------------------------


class Projection:
    """Equirectangular projection scaled by cos(mean latitude), fitted to a box."""

    def __init__(self, outlines: list, width: int, height: int, pad: int = 8) -> None:
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


def _path(proj: Projection, rings: list) -> str:
    d = []
    for ring in rings:
        pts = [proj(x, y) for x, y in ring]
        d.append("M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in pts) + "Z")
    return "".join(d)


def _color(v: float, vmax: float) -> str:
    if vmax <= 0 or v <= 0:
        return PALETTE[0]
    i = min(int(len(PALETTE) * v / vmax), len(PALETTE) - 1)
    return PALETTE[max(i, 1)]


def choropleth(
    tess: dict,
    values: Sequence[float],
    *,
    width: int = 560,
    height: int = 420,
    title: str = "",
    legend: bool = True,
) -> str:
    """Tiles coloured by value (8 classes of equal width up to the largest noisy value)."""
    proj = Projection(tess["outlines"], width, height)
    vmax = max([0, *values])
    parts = [_svg_open(proj.width, proj.height + (22 if legend else 0), title)]
    for i, rings in enumerate(tess["outlines"]):
        parts.append(
            f"<path d='{_path(proj, rings)}' fill='{_color(values[i], vmax)}' stroke='#888' "
            f"stroke-width='0.5'><title>{escape(tess['names'][i])}: "
            f"{_fmt(values[i])}</title></path>"
        )
    if legend:
        parts.append(_legend(vmax, proj.height + 4))
    parts.append("</svg>")
    return "".join(parts)


def _legend(vmax: float, y: float) -> str:
    out = []
    for i, c in enumerate(PALETTE):
        out.append(
            f"<rect x='{8 + i * 40}' y='{y}' width='40' height='8' fill='{c}' stroke='#ccc'/>"
        )
    out.append(f"<text x='8' y='{y + 18}' {FONT}>0</text>")
    out.append(f"<text x='{8 + 8 * 40}' y='{y + 18}' text-anchor='end' {FONT}>{_fmt(vmax)}</text>")
    return "".join(out)


def flow_map(
    tess: dict,
    flows: list[tuple[int, int, float]],
    *,
    width: int = 560,
    height: int = 420,
    title: str = "",
) -> str:
    """OD flows as arrows between tile centroids (width by value); self-flows as circles."""
    proj = Projection(tess["outlines"], width, height)
    parts = [_svg_open(proj.width, proj.height, title)]
    parts.append(
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='5' "
        "markerHeight='5' orient='auto-start-reverse'><path d='M0,0L10,5L0,10z' "
        "fill='#d62728'/></marker></defs>"
    )
    for rings in tess["outlines"]:
        parts.append(
            f"<path d='{_path(proj, rings)}' fill='#f4f4f4' stroke='#aaa' stroke-width='0.5'/>"
        )
    vmax = max([f[2] for f in flows] + [1])
    for o, d, v in sorted(flows, key=lambda f: f[2]):
        if v <= 0:
            continue
        w = 0.5 + 5 * v / vmax
        x1, y1 = proj(tess["lng"][o], tess["lat"][o])
        x2, y2 = proj(tess["lng"][d], tess["lat"][d])
        label = f"{escape(tess['names'][o])} → {escape(tess['names'][d])}: {_fmt(v)}"
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
            f"<path d='M{x1:.1f},{y1:.1f}Q{mx:.1f},{my:.1f} {x2:.1f},{y2:.1f}' fill='none' "
            f"stroke='#d62728' stroke-opacity='0.6' stroke-width='{w:.1f}' "
            f"marker-end='url(#arrow)'><title>{label}</title></path>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _svg_open(width: int, height: int, title: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img'><title>{escape(title)}</title>"
    )
