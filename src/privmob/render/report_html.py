"""One self-contained HTML file for a mobility report (inline CSS, SVG, a few lines of JS).
Rendered from the report's JSON document only. Its two large maps draw a web basemap that the
viewer's browser fetches when online (``basemap=False``: none, and no external address in the
page); everything else works offline.

Uncertainty in every picture, from the noisy values and public parameters only (SPEC invariant
6, post-processing): bars carry +-margin whiskers, lines a +-margin band. One rule says what is
signal (:func:`privmob.privacy.signal.is_signal`): a value above the noise floor of its family
(the cells its caption talks about: a chart's bars, a map's tiles, all the panels of the small
maps, a histogram's bins; the level none of their noise reaches with 95% probability). Only
signal is coloured (bars, tiles), drawn (flows) and ranked, and the caption states the same
floor; the rest is grey or hatched. The small maps share one colour scale. Cumulative shares
carry a band (the true curve if no cell's noise exceeds the floor) and are not drawn when no
cell clears the floor; a five-number summary is marked unreliable when no bin of its histogram
clears the histogram's floor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

import numpy as np

from privmob.privacy.signal import is_signal, signal_mask
from privmob.render import svg
from privmob.render.basemap import Basemap
from privmob.render.map_labels import LABEL_JS, tile_names

TITLES = {
    "dataset_statistics": "Dataset statistics",
    "missing_values": "Missing values",
    "trips_over_time": "Trips over time",
    "trips_per_weekday": "Trips per weekday",
    "trips_per_hour": "Trips per hour",
    "visits_per_tile": "Visits per tile",
    "visits_per_time_tile": "Visits per tile and time window",
    "od_flows": "Origin-destination flows",
    "travel_time": "Travel time",
    "jump_length": "Jump length",
    "trips_per_user": "Trips per user",
    "time_between_trips": "Time between trips",
    "radius_of_gyration": "Radius of gyration",
    "user_tile_count": "Tiles per user",
    "mobility_entropy": "Mobility entropy",
}
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;
background:#fafafa;color:#222}
header{background:#08306b;color:#fff;padding:16px 28px}
header h1{margin:0 0 4px;font-size:22px}
main{max-width:1200px;margin:0 auto;padding:12px 20px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:14px 0;padding:12px 18px}
h2{font-size:17px;margin:4px 0 8px}
.meta{color:#555;font-size:12px;margin-bottom:6px}
.warn{background:#fde0dc;color:#8b0000;padding:8px 12px;border-radius:4px;font-weight:600}
.not-for-publication{position:sticky;top:0;z-index:10;text-align:center;border:2px solid #8b0000}
.row{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
table{border-collapse:collapse;font-size:12.5px}
td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:right}
th{background:#f3f6fa}
td:first-child,th:first-child{text-align:left}
.small-maps{display:grid;grid-template-columns:repeat(6,1fr);gap:4px}
.small-maps div{font-size:11px;text-align:center}
.small-maps svg{width:100%;height:auto}
nav a{color:#c6dbef;margin-right:10px;font-size:12px}
#js-errors:empty{display:none}
#js-errors{background:#fde0dc;padding:6px}
"""

JS = """
window.__pmErrors=[];
window.addEventListener('error',function(e){var d=document.getElementById('js-errors');
window.__pmErrors.push(String(e.message));if(d){d.textContent+=String(e.message)+'\\n';}});
document.addEventListener('DOMContentLoaded',function(){document.body.setAttribute(
'data-rendered',String(document.querySelectorAll('svg').length));});
"""


def _f(v: Any) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.4g}"
    if isinstance(v, (int, float)):
        return f"{int(v):,}"
    return escape(str(v))


def _below(v: Any, margin: Any, floor: float | None = None) -> str:
    """A noisy count, or "below the margin" when it is not signal (:func:`is_signal`): at or
    below ``floor``, the noise floor of its family, or without one its 95% margin (a family
    of one). Display only: the JSON keeps every noisy value."""
    if not isinstance(v, (int, float)):
        return _f(v)
    if floor is not None and not is_signal(v, floor):
        return f"below the noise floor ({int(floor):,})"
    if floor is None and isinstance(margin, (int, float)) and not is_signal(v, margin):
        return f"below the margin (±{int(margin):,})"
    return _f(v)


def _margin(a: dict[str, Any]) -> Any:
    """The 95% margin of an analysis' counts (one noise scale per analysis)."""
    m = a.get("margin_of_error_95", {})
    return m.get("counts", m.get("histogram"))


def _floor(a: dict[str, Any], cells: int) -> int:
    """The noise floor of an analysis' counts over ``cells`` cells (public parameters only)."""
    return noise_floor(a["noise"]["counts"], cells)


def _ranked(values: Sequence[float] | np.ndarray, floor: float, n: int = 10) -> list[int]:
    """Indexes of the (at most ``n``) largest values above the noise floor: a ranking never
    lists a value that noise alone could have produced."""
    v = np.asarray(values, dtype=float)
    order = np.argsort(-v, kind="stable")
    return [int(i) for i in order[signal_mask(v[order], floor)][:n]]


def _table(header: list[str], rows: Sequence[Sequence[Any]]) -> str:
    h = "".join(f"<th>{escape(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{_f(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _meta(a: dict[str, Any]) -> str:
    sens = ", ".join(f"{k} {v}" for k, v in a["sensitivity"].items())
    moe = ", ".join(f"{k} ±{v:,}" for k, v in a["margin_of_error_95"].items())
    mech = "".join(  # zCDP composition only: each part's mechanism and why
        f" · {escape(part)}: {escape(_mechanism(m))}" for part, m in a.get("mechanisms", {}).items()
    )
    return (
        f"<div class='meta'>ε = {a['epsilon']:.4g} · L1 sensitivity: {escape(sens)} · "
        f"95% margin of error: {escape(moe)}{mech}</div>"
    )


def _mechanism(m: dict[str, Any]) -> str:
    if m["mechanism"] == "discrete-gaussian":
        said = f"discrete Gaussian σ = {m['sigma']:.4g}, ρ = {m['rho']:.4g}"
    else:
        said = f"discrete Laplace scale {m['scale']:.4g}"
    return f"{said} ({m['why']})"


def _section(
    name: str, a: dict[str, Any], doc: dict[str, Any], basemap: bool | Basemap | None = None
) -> str:
    tess = doc["tessellation"]
    names = tile_names(tess)  # readable: a tile without a name is its id and where it is
    body = ""
    out = _below(a.get("outliers"), _margin(a))  # the analysis' outliers cell, if any
    if name == "dataset_statistics":
        moe = a["margin_of_error_95"]
        rows = [
            [
                k.replace("_", " "),
                _below(a[k], moe.get(k)),
                f"±{moe[k]:,}" if k in moe else "derived",
            ]
            for k in ("users", "trips", "complete_trips", "incomplete_trips", "trip_ends")
        ]
        body = _table(["statistic", "noisy value", "95% margin"], rows)
    elif name == "missing_values":
        cols = ("datetime", "lat", "lng")
        m = _margin(a)
        floor = _floor(a, len(cols)) if "noise" in a else None
        body = _table(
            ["column", "trips with a missing value"],
            [[c, _below(v, m, floor)] for c, v in zip(cols, a["counts"], strict=True)],
        )
    elif name == "trips_over_time":
        labels = [t[:10] for t in doc["domain"]["time_bins"]]
        every = max(1, len(labels) // 10)
        body = svg.bar_chart(
            labels,
            a["counts"],
            label_every=every,
            width=760,
            title="trips per " + a["resolution"],
            margin=_margin(a),
            floor=_floor(a, len(a["counts"])),
        )
        body += (
            f"<p class='meta'>per {a['resolution']}; trips outside the declared period: {out}</p>"
        )
    elif name == "trips_per_weekday":
        body = svg.bar_chart(
            list(WEEKDAYS),
            a["counts"],
            title="trips per weekday",
            margin=_margin(a),
            floor=_floor(a, len(a["counts"])),
        )
    elif name == "trips_per_hour":
        c = np.asarray(a["counts"]).reshape(2, 2, 24)
        series = {
            "weekday start": c[0, 0].tolist(),
            "weekday end": c[1, 0].tolist(),
            "weekend start": c[0, 1].tolist(),
            "weekend end": c[1, 1].tolist(),
        }
        body = svg.line_chart(
            [str(h) for h in range(24)],
            series,
            width=760,
            label_every=2,
            title="trips per hour",
            margin=_margin(a),
            floor=_floor(a, c.size),
        )
    elif name == "visits_per_tile":
        vals = a["counts"]
        floor = _floor(a, len(vals))
        ranked = _ranked(vals, floor)
        rank = (
            _table(
                ["rank", "tile", "visits"],
                [[i + 1, names[j], vals[j]] for i, j in enumerate(ranked)],
            )
            if ranked
            else ""
        )
        listed = (
            f"tiles above the noise floor {_f(floor)}"
            if ranked
            else f"no tile clears the noise floor {_f(floor)}; none is ranked"
        )
        body = (
            "<div class='row'>"
            + svg.choropleth(
                tess,
                vals,
                title="visits per tile",
                unit="visits",
                margin=_margin(a),
                floor=floor,
                basemap=basemap,
            )
            + f"<div>{rank}<p class='meta pm-ranking-note'>ranking: {listed} (with 95% "
            f"probability the noise of none of the {len(vals):,} tiles reaches it)<br>"
            f"outside the tessellation: {out}</p></div></div>"
        )
        body += svg.cumulative_ranking(vals, "tiles", floor=floor)
    elif name == "visits_per_time_tile":
        nw = len(doc["params"]["time_windows"])
        k = len(tess["ids"])
        c = np.asarray(a["counts"]).reshape(k, 2, nw)
        tw = doc["params"]["time_windows"]
        labels = [f"{tw[i]:02d}-{tw[(i + 1) % nw]:02d}h" for i in range(nw)]
        cells = []
        small = svg.TileOutlines(tess, 190, 160)  # the same outlines on every small map
        # one family (every cell of every small map), one floor, one colour scale
        floor = _floor(a, c.size)
        signal = signal_mask(c, floor)
        vmax = float(c[signal].max()) if signal.any() else 0.0
        maps = 2 * nw
        for dt, dname in ((0, "weekday"), (1, "weekend")):
            for w in range(nw):
                vals = c[:, dt, w].tolist()
                m = svg.choropleth(
                    tess,
                    vals,
                    width=190,
                    height=160,
                    title=f"{dname} {labels[w]}",
                    unit="visits",
                    margin=_margin(a),
                    tiles=small,
                    floor=floor,
                    vmax=vmax,
                    legend_label=f"one scale for all {maps} maps",
                    basemap=False,  # small multiples compare windows: no streets under them
                )
                here = signal[:, dt, w]
                top = f"max {_f(max(np.asarray(vals)[here]))}" if here.any() else "none above"
                cells.append(f"<div>{dname} {labels[w]} ({top}){m}</div>")
        scale = (
            f"one colour scale for all {maps} maps: 8 classes of equal width from the floor "
            f"{_f(floor)} to {_f(vmax)} visits"
            if vmax > 0
            else "no map colours a tile"
        )
        body = (
            f"<p class='meta pm-ranking-note'>{scale}; coloured: the tiles above the noise "
            f"floor {_f(floor)} of all the {c.size:,} cells (with 95% probability the noise of "
            "none of them reaches it), hatched: the others</p>"
            f"<div class='small-maps'>{''.join(cells)}</div>"
            f"<p class='meta'>outside the tessellation or without time: {out}</p>"
        )
    elif name == "od_flows":
        k = len(tess["ids"])
        c = np.asarray(a["counts"])
        # the noise floor: with 95% probability no cell's noise reaches it (the 1 - 0.05/N
        # margin of one cell, union bound over the N cells); a flow below it may be noise
        # alone, so only flows above it are drawn and ranked (post-processing of public
        # parameters and noisy values)
        floor = _floor(a, c.size)
        drawn = [(j // k, j % k, float(c[j])) for j in _ranked(c, floor)]
        if drawn:
            which = "the largest flow" if len(drawn) == 1 else f"the {len(drawn)} largest flows"
            caption = f"map and ranking: {which} above the noise floor {_f(floor)}"
        else:
            caption = f"no flow clears the noise floor {_f(floor)}; none is drawn or ranked"
        rank = (
            _table(
                ["rank", "origin", "destination", "trips"],
                [[r + 1, names[o], names[d], v] for r, (o, d, v) in enumerate(drawn)],
            )
            if drawn
            else ""
        )
        body = (
            "<div class='row'>"
            + svg.flow_map(
                tess,
                drawn,
                title="largest OD flows",
                note="" if drawn else f"no flow clears the noise floor {_f(floor)}",
                floor=floor,
                basemap=basemap,
            )
            + f"<div>{rank}<p class='meta pm-ranking-note'>trips with an end outside the "
            f"tessellation: {out}<br>{caption} (with 95% probability the noise of none "
            f"of the {c.size:,} cells reaches it)</p></div></div>"
            + svg.cumulative_ranking(c.ravel().astype(float), "OD pairs", floor=floor)
        )
    else:
        edges, counts = a["edges"], a["counts"]
        labels = [_f(e) for e in edges[:-1]] + ["outliers"]
        every = max(1, len(labels) // 12)
        five = a["five_number_summary"]
        m = _margin(a)
        # the quantiles are chosen from the histogram's bins: when no bin clears the
        # histogram's noise floor (the margin that none of its bins' noise reaches with 95%
        # probability), the histogram cannot be told from an empty one and its quantiles
        # describe noise (post-processing of noisy values and public parameters)
        bins = [float(v) for v in [*counts, a["outliers"]]]
        floor = noise_floor(a["noise"]["histogram"], len(bins))
        unreliable = not signal_mask(bins, floor).any()
        caveat = (
            "<p class='warn pm-unreliable' style='max-width:300px'>unreliable: no bin of the "
            f"histogram clears its noise floor {_f(floor)} (95% margin over its {len(bins)} "
            "bins), so these quantiles describe noise</p>"
            if unreliable
            else ""
        )
        header = ["", f"{a['unit']} (unreliable)" if unreliable else a["unit"]]
        body = (
            "<div class='row'><div>"
            + svg.bar_chart(
                labels,
                [*counts, a["outliers"]],
                highlight_last=True,
                label_every=every,
                title=f"histogram ({a['unit']})",
                margin=m,
                floor=floor,
            )
            + "</div><div>"
            + _table(header, [[k, v] for k, v in five.items()])
            + caveat
            + "</div></div>"
            + svg.box_plot(five, edges[0], edges[-1], a["unit"], unreliable=unreliable)
            + svg.cumulative(edges, counts, a["unit"], floor=floor)
        )
        body += (
            f"<p class='meta'>bins of width {_f(a['bins']['width'])} {escape(a['unit'])} "
            f"from {_f(edges[0])} to {_f(edges[-1])} (declared); outliers: "
            f"{out}</p>"
        )
    return f"<section id='{name}'><h2>{TITLES[name]}</h2>{_meta(a)}{body}</section>"


def noise_floor(noise: dict[str, Any], cells: int, confidence: float = 0.95) -> int:
    """Smallest m such that, with probability >= ``confidence``, no one of ``cells``
    independent noise draws exceeds m in absolute value (union bound;
    :func:`privmob.privacy.signal.noise_floor` of a noise described as in the JSON)."""
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.privacy.signal import noise_floor as floor_of

    return floor_of(Noise(NoiseKind(noise["kind"]), float(noise["scale"])), cells, confidence)


def _composition_rows(doc: dict[str, Any]) -> list[list[Any]]:
    """The settings rows of a zCDP report (none for a pure one)."""
    noise = doc["privacy"].get("noise") or {}
    if "composition" not in noise:
        return []
    return [
        ["δ", doc["privacy"]["cost"]["delta"]],
        ["composition", f"{noise['composition']}; ρ of the Gaussian parts {noise['rho']:.6g}"],
        ["conversion", noise["conversion"]],
    ]


def render_report_html(doc: dict[str, Any], *, basemap: bool | Basemap | None = True) -> str:
    """The HTML page of a report document (from :func:`report_document` or its JSON).

    ``basemap``: the large maps (visits per tile, OD flows) draw web tiles under the zones,
    fetched by the viewer's browser when the page is viewed online, with their attribution
    (:mod:`privmob.render.basemap`; offline the maps are complete without them). ``False``:
    no basemap, and the page names no external address at all."""
    p = doc["params"]
    an = doc["analyses"]
    # a release not for publication says so on top of the page, before anything else
    note = doc.get("warning") or ("" if doc.get("for_publication", True) else "NOT FOR PUBLICATION")
    banner = (
        f"<div class='warn not-for-publication' role='alert'>{escape(note)}</div>" if note else ""
    )
    no_signal = (doc.get("signal") or {}).get("warning")
    warn = f"<p class='warn'>{escape(no_signal)}</p>" if no_signal else ""
    budget_rows = [
        [
            TITLES[n],
            an[n]["epsilon"],
            p["weights"][n],
            ", ".join(f"{k} {v}" for k, v in an[n]["sensitivity"].items()),
            ", ".join(f"±{v:,}" for v in an[n]["margin_of_error_95"].values()) or "—",
        ]
        for n in p["analyses"]
    ]
    entries = doc.get("ledger_entries") or [doc.get("ledger_entry") or {}]
    entry = entries[-1]
    settings = _table(
        ["setting", "value"],
        [
            ["ε (total)", doc["privacy"]["cost"]["epsilon"]],
            *_composition_rows(doc),
            ["unit of privacy", p["unit"]],
            ["max trips per user (M)", _bound_text(p)],
            ["study period", f"{p['period'][0]} to {p['period'][1]} (declared)"],
            ["noise", f"{p['noise']} (secure sampler)" if doc["for_publication"] else p["noise"]],
            ["time windows", ", ".join(str(h) for h in p["time_windows"])],
            ["tiles", doc["domain"]["tiles"]],
            [
                "ledger entry",
                f"#{entry.get('id', '?')} dataset {entry.get('dataset', '?')} "
                f"at {entry.get('created_at', '?')}",
            ],
            ["software", f"privmob {doc['software']['version']}"],
        ],
    )
    nav = "".join(f"<a href='#{n}'>{TITLES[n]}</a>" for n in p["analyses"])
    sections = _left_out(p) + "".join(_section(n, an[n], doc, basemap) for n in p["analyses"])
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>privmob mobility report</title><style>{CSS}</style>"
        f"<script>{JS}{svg.ZOOM_JS}{LABEL_JS}</script>"
        f"</head><body>{banner}<div id='js-errors'></div>"
        f"<header><h1>Differentially private mobility report</h1><nav>{nav}</nav></header><main>"
        f"{warn}<section id='privacy'><h2>Privacy settings</h2><div class='row'>{settings}"
        f"<div>{_table(['analysis', 'ε', 'weight', 'L1 sensitivity', '95% margin'], budget_rows)}"
        "</div></div><p class='meta'>Every count carries noise, zero cells and outliers cells "
        "included; quantiles are declared bin midpoints chosen by the exponential "
        "mechanism; all domains (tiles, time bins, histogram bins) are public.</p></section>"
        f"{sections}</main>"
        f"<script type='application/json' id='report-data'>{_embed(doc)}</script>"
        "</body></html>"
    )


def _left_out(params: dict[str, Any]) -> str:
    """One line per analysis the report left out, with the reason (a trip-level report's
    per-user analyses); nothing when none was."""
    lines = "".join(
        f"<li class='pm-omitted' data-analysis='{escape(n)}'><b>{TITLES[n]}</b>: left out "
        f"({escape(reason)})</li>"
        for n, reason in (params.get("omitted_analyses") or {}).items()
    )
    if not lines:
        return ""
    return (
        f"<section id='left-out'><h2>Left out</h2><ul>{lines}</ul><p class='meta'>"
        f"{escape(params.get('budget_split', ''))}</p></section>"
    )


def _embed(doc: dict[str, Any]) -> str:
    small = {k: v for k, v in doc.items() if k != "tessellation"}
    return json.dumps(small).replace("</", "<\\/")


def _bound_text(p: dict[str, Any]) -> Any:
    """M (as given), and how it was chosen when it was chosen privately (``-T auto``)."""
    chosen = p.get("bound_choice")
    if not chosen:
        return p["max_trips_per_user"]
    lo, hi = chosen["candidates"]
    return (
        f"{p['max_trips_per_user']} (chosen privately: the {chosen['quantile']:g}-quantile of "
        f"trips per user over {lo}..{hi}, ε {chosen['epsilon_choice']:g})"
    )
