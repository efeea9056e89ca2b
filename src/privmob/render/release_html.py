"""The notebook display of a release (``ReleaseResult._repr_html_`` and ``.html(period=...)``).

What a person sees of a release, with its uncertainty (SPEC invariant 6: everything here is
post-processing of the release's noisy tables and public parameters: the noise distribution,
the public domain and the public tessellation):

- a release of several periods (an OD matrix per day, a series per hour) is shown **one period
  at a time** (the first unless ``period`` names another), and says which and how many there
  are; density's 168 hours of the week are shown as a **stated aggregate** (their sum);
- OD flows: only flows above the noise floor of the period's cells are drawn and ranked (the
  level that the noise of none of them reaches with 95% probability), with tile names;
- zone maps colour and rank only the zones above the noise floor of the zones shown (one rule,
  :func:`privmob.privacy.signal.is_signal`; the caption states the same floor), hatch the
  others and say so in the legend; the ranking gives each zone's name beside its id;
- count tables (``counts``, ``trips-per-hour`` and the other kinds of the count template) are
  drawn along one dimension, a map when they are counted by tile, else bars with their margin
  whiskers, **one slice** of their other dimensions at a time (never their sum);
- a series is a line with its band of +-margin; a zone series (``series-counts``) a map of one
  time bin; a mobility report shows its key pictures (:mod:`privmob.render.report_html`'s own
  sections, from the report's document);
- the settings always say the 95% margin (per cell, per time bin or per analysis) and the
  bounds, per user or per trip as the release's unit is.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.privacy.signal import signal_mask
from privmob.render import svg
from privmob.render.basemap import Basemap, drawing_basemap
from privmob.render.map_labels import tile_names

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

CSS = (
    "<style>.pm-release table{border-collapse:collapse;font-size:12px;margin:4px 0}"
    ".pm-release td,.pm-release th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}"
    ".pm-release td:first-child,.pm-release th:first-child{text-align:left}"
    ".pm-release .meta{color:#555;font-size:12px}"
    ".pm-release .row{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}"
    ".pm-release .warn{background:#fde0dc;color:#8b0000;padding:6px 10px;font-weight:600}"
    ".pm-release section h2{font-size:15px;margin:10px 0 4px}</style>"
)


def _tiles(tess: Tessellation) -> dict[str, Any]:
    from privmob.releases.report.inputs import Tiles

    tiles = Tiles.from_tessellation(tess)
    return {
        "ids": tiles.ids,
        "outlines": tiles.outlines,
        "names": tiles.names,
        "lat": tiles.lat,
        "lng": tiles.lng,
        "has_names": tess.tile_names is not None,
    }


def _noise(release: Any) -> Any:
    """The release's noise distribution (public), when it has one figure."""
    from privmob.privacy.mechanisms import Noise, NoiseKind

    n = release.noise
    try:
        return Noise(NoiseKind(n["kind"]), float(n["scale"]))
    except (KeyError, TypeError, ValueError):
        return None


def _label(tiles: dict[str, Any], i: int) -> str:
    """A tile's name beside its id (when the tessellation has no names: its id and where it
    is, :func:`~privmob.render.map_labels.tile_names`)."""
    tid, name = tiles["ids"][i], tiles["names"][i]
    if tiles["has_names"] and str(name) != str(tid):
        return f"{name} ({tid})"
    return tile_names(tiles)[i]


def _rows(header: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{escape(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _pick(labels: list[Any], period: Any, what: str) -> tuple[Any, str]:
    """The period (or slice: ``what`` names it) shown, ``period`` or the first, and the
    sentence that says which; ``.html(period=...)`` shows another."""
    if not labels:
        return None, ""
    texts = [str(x) for x in labels]
    if period is None:
        chosen = labels[0]
    elif str(period) in texts:
        chosen = labels[texts.index(str(period))]
    else:
        from privmob.errors import ConfigError

        raise ConfigError(
            f"no {what} {period!r} in this release",
            hint=f"use one of {', '.join(texts[:5])}{' ...' if len(texts) > 5 else ''}",
        )
    if len(labels) == 1:
        return chosen, f"{what} {chosen}"
    i = texts.index(str(chosen)) + 1
    return chosen, (
        f"{what} {chosen} ({i} of {len(labels)}; one {what} at a time, never their sum: "
        "<code>.html(period=...)</code> shows another)"
    )


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.3g}"


def od_display(release: Any, tess: Tessellation, period: Any = None) -> str:
    """One period's largest flows above its noise floor: a flow map and a named ranking."""
    from privmob.privacy.signal import noise_floor

    table = release.tables["od"]
    tiles = _tiles(tess)
    labels = list(pd.unique(table["period"]))
    chosen, which = _pick(labels, period, "period")
    part = table[table["period"].astype(str) == str(chosen)] if chosen is not None else table
    k = len(tiles["ids"])
    noise = _noise(release)
    if noise is None:
        return f"<p class='meta'>{which}</p>"
    floor = noise_floor(noise, k * (k - 1))  # the cells of the period shown
    index = {str(t): i for i, t in enumerate(tiles["ids"])}
    counts = part["count"].to_numpy(dtype=float)
    order = np.argsort(-counts, kind="stable")
    top = [int(j) for j in order[signal_mask(counts[order], floor)]][:10]
    flows = [
        (index[str(part["origin"].iat[j])], index[str(part["destination"].iat[j])], counts[j])
        for j in top
    ]
    margin = float(release.noise.get("margin_of_error_95") or 0)
    if flows:
        note = f"the {len(flows)} largest flows above the noise floor {_fmt(floor)}"
        ranking = _rows(
            ["rank", "origin", "destination", "trips"],
            [
                [str(r + 1), _label(tiles, o), _label(tiles, d), f"{_fmt(v)} ± {_fmt(margin)}"]
                for r, (o, d, v) in enumerate(flows)
            ],
        )
    else:
        note = f"no flow clears the noise floor {_fmt(floor)}; none is drawn or ranked"
        ranking = ""
    picture = svg.flow_map(
        tiles,
        flows,
        title=f"largest flows above the noise floor {_fmt(floor)}",
        note="" if flows else note,
        floor=floor,
    )
    why = f"with 95% probability the noise of none of the period's {k * (k - 1):,} cells reaches it"
    said = f"{note} ({why})" if flows else f"the noise floor {_fmt(floor)}: {why}"  # map says none
    return (
        f"<p class='meta'>{which}</p><div style='display:flex;gap:16px;flex-wrap:wrap'>"
        f"{picture}<div>{ranking}<p class='meta pm-ranking-note'>{escape(said)}</p>"
        "</div></div>"
    )


def zone_display(
    release: Any,
    tess: Tessellation,
    *,
    key: str,
    value: str,
    margin: float | None,
    caption: str,
    table: pd.DataFrame,
    noise: Any = None,
) -> str:
    """A zone table (one value per zone) as a choropleth and a ranking with the zones' names:
    both show only the zones above the noise floor of the zones shown (the floor the note
    states), the others hatched. ``noise``: the noise of these values (default: the
    release's); without a noise or a ``margin`` nothing is hatched or ranked."""
    from privmob.privacy.signal import noise_floor

    tiles = _tiles(tess)
    index = {str(t): i for i, t in enumerate(tiles["ids"])}
    values = [0.0] * len(tiles["ids"])
    for z, v in table.groupby(table[key].astype(str), sort=False)[value].sum().items():
        if z in index:
            values[index[z]] = float(v)
    noise = _noise(release) if noise is None else noise
    floor = noise_floor(noise, len(values)) if noise is not None and margin is not None else None
    picture = svg.choropleth(
        tiles, values, title=release.kind, unit=value, margin=margin, floor=floor
    )
    ranking, note = "", ""
    if floor is not None and margin is not None:
        v = np.asarray(values)
        by_size = np.argsort(-v, kind="stable")
        order = [int(j) for j in by_size[signal_mask(v[by_size], floor)]][:10]
        if order:
            ranking = _rows(
                ["rank", "zone", value],
                [
                    [str(r + 1), _label(tiles, j), f"{_fmt(v[j])} ± {_fmt(margin)}"]
                    for r, j in enumerate(order)
                ],
            )
            note = f"ranking: the zones above the noise floor {_fmt(floor)}"
        else:
            note = f"no zone clears the noise floor {_fmt(floor)}; none is ranked"
    return (
        f"<p class='meta'>{caption}</p><div style='display:flex;gap:16px;flex-wrap:wrap'>"
        f"{picture}<div>{ranking}<p class='meta pm-ranking-note'>{escape(note)}</p></div></div>"
    )


def _series_noise(release: Any, t: Any) -> Any:
    """The noise of one period of a series (its public scale in the budgets table)."""
    from privmob.privacy.mechanisms import Noise, NoiseKind

    budgets = release.tables.get("budgets")
    if budgets is None or "noise_scale" not in budgets:
        return None
    scale = float(budgets.set_index("t")["noise_scale"].get(t, np.nan))
    if not (np.isfinite(scale) and scale > 0):
        return None
    return Noise(NoiseKind(release.noise["kind"]), scale)


def _series_margin(release: Any, t: Any) -> float | None:
    """The 95% margin of one time bin ``t`` of a (zone) series (the scheme spends a different
    epsilon on each bin)."""
    noise = _series_noise(release, t)
    return None if noise is None else float(noise.margin_of_error())


def _series_margins(release: Any) -> list[float]:
    """The 95% margin of every published time bin of a (zone) series, in bin order."""
    budgets = release.tables.get("budgets")
    if budgets is None or "t" not in budgets:
        return []
    margins = (_series_margin(release, t) for t in budgets["t"])
    return [m for m in margins if m is not None]


def _series_floor(release: Any, cells: int) -> float | None:
    """The noise floor of a series' ``cells`` values: that of its noisiest bin (the scheme
    spends a different epsilon on each bin; the largest scale bounds every bin's noise)."""
    from privmob.privacy.signal import noise_floor

    budgets = release.tables.get("budgets")
    noises = [] if budgets is None else [_series_noise(release, t) for t in budgets["t"]]
    known = [n for n in noises if n is not None]
    return float(noise_floor(max(known, key=lambda n: n.scale), cells)) if known else None


def _floor_of(release: Any, cells: int) -> float | None:
    """The noise floor of ``cells`` cells of the release's noise (:func:`privmob.privacy.
    signal.noise_floor`, the one rule for what is signal), ``None`` without one figure."""
    from privmob.privacy.signal import noise_floor

    noise = _noise(release)
    return None if noise is None else float(noise_floor(noise, cells))


#: the dimensions of a count table drawn as a map (a tile id per label)
TILE_DIMENSIONS = ("origin", "destination", "tile", "zone")


def _slice(table: pd.DataFrame, dims: list[str], period: Any) -> tuple[pd.DataFrame, str]:
    """One slice of ``table`` at a value of each of ``dims`` (``period``: its label, default
    the first), and the sentence that says which: a picture shows one slice, never a sum."""
    if not dims:
        return table, ""
    keys = table[dims].astype(str).agg(" / ".join, axis=1)
    chosen, which = _pick(list(pd.unique(keys)), period, " / ".join(dims))
    return table[keys == str(chosen)], which


def count_display(release: Any, tess: Tessellation | None, period: Any = None) -> str:
    """A count table (the count template's kinds) along one dimension: a map when a dimension
    is a tile (zones within the margin hatched, a ranking above the noise floor), else bars
    with +-margin whiskers; one slice of the other dimensions at a time."""
    table = release.tables["counts"]
    dims = [d for d in (release.domain or {}).get("dimensions", {}) if d in table.columns]
    if not dims:
        return ""
    tiled = [d for d in dims if d in TILE_DIMENSIONS and tess is not None]
    drawn = tiled[0] if tiled else dims[-1]
    part, which = _slice(table, [d for d in dims if d != drawn], period)
    margin = release.noise.get("margin_of_error_95")
    margin = None if margin is None else float(margin)
    means = mean_display(release, part, drawn, tess) if "mean" in part.columns else ""
    if tiled and tess is not None:
        caption = f"{release.kind} by {drawn}" + (f"; {which}" if which else "")
        return (
            zone_display(
                release, tess, key=drawn, value="count", margin=margin, caption=caption, table=part
            )
            + means
        )
    labels = [str(x) for x in part[drawn]]
    values = [float(v) for v in part["count"]]
    floor = _floor_of(release, len(values))
    chart = svg.bar_chart(
        labels, values, title=f"{release.kind} by {drawn}", margin=margin, floor=floor
    )
    return f"<p class='meta'>{which}</p>{chart}" + _signal_note(values, floor, drawn) + means


#: the most cells whose means one display draws (the largest noisy counts first)
MEANS_DRAWN = 40


def mean_display(release: Any, part: pd.DataFrame, drawn: str, tess: Tessellation | None) -> str:
    """The noisy means of one slice of a count table with a value (``value=pm.Mean``): a bar
    per cell whose mean is shown (its noisy count above the count's margin), whiskers of the
    mean's own 95% margin (``mean_margin_95``), the largest noisy counts first; the note says
    the value, its clamp and units, and how many cells have no mean shown. Post-processing of
    the published table."""
    value = release.params.get("value") or {}
    shown = part[part["mean"].notna()]
    shown = shown.sort_values("count", ascending=False, kind="stable").head(MEANS_DRAWN)
    what = f"mean {value.get('column', 'value')}"
    unit = value.get("units") or value.get("unit") or ""
    clamp = value.get("clamp") or [value.get("lo"), value.get("hi")]
    said = (
        f"{what} by {drawn} ({unit}, clamped to [{_fmt(clamp[0])}, {_fmt(clamp[1])}]); "
        if None not in clamp
        else f"{what} by {drawn}; "
    )
    said += (
        f"{len(part) - int(part['mean'].notna().sum()):,} of {len(part):,} cells show no mean "
        "(their noisy count is within its 95% margin); whiskers: each mean's 95% margin"
    )
    if shown.empty:
        return f"<p class='meta pm-means'>{escape(said)}</p>"
    if tess is not None and drawn in TILE_DIMENSIONS:
        tiles = _tiles(tess)
        index = {str(t): i for i, t in enumerate(tiles["ids"])}
        labels = [_label(tiles, index[str(x)]) if str(x) in index else str(x) for x in shown[drawn]]
    else:
        labels = [str(x) for x in shown[drawn]]
    chart = svg.bar_chart(
        labels,
        [float(v) for v in shown["mean"]],
        title=what,
        margin=[float(m) for m in shown["mean_margin_95"]],
    )
    return f"<p class='meta pm-means'>{escape(said)}</p>{chart}"


def _signal_note(values: list[float], floor: float | None, what: str) -> str:
    """How many values clear the noise floor of the values shown (the caption's rule)."""
    if floor is None:
        return ""
    clear = sum(v > floor for v in values)
    words = (
        f"{clear} of {len(values)} values clear the noise floor {_fmt(floor)}"
        if clear
        else f"no {what} clears the noise floor {_fmt(floor)}"
    )
    return (
        f"<p class='meta pm-ranking-note'>{escape(words)} (with 95% probability the noise of "
        f"none of the {len(values):,} values shown reaches it)</p>"
    )


def series_display(release: Any) -> str:
    """A series (one value per time bin) as a line with its band of +-margin (the largest
    margin of its bins: the scheme may spend a different epsilon on each)."""
    t = release.tables["series"]
    labels, day = _time_labels(t["timestamp"]) if "timestamp" in t else ([], "")
    labels = labels or [str(x) for x in t["t"]]
    margins = _series_margins(release)
    margin = max(margins) if margins else None
    values = [float(v) for v in t["value"]]
    chart = svg.line_chart(
        labels,
        {"noisy value": values},
        title=f"{release.kind} per time bin",
        margin=margin,
        floor=_series_floor(release, len(values)),
        width=640,
    )
    varies = margins and min(margins) != max(margins)
    note = (
        f"band: the largest 95% margin of the bins (±{_fmt(min(margins))} to "
        f"±{_fmt(max(margins))} by bin: the budgets table)"
        if varies
        else ""
    )
    notes = [n for n in (day, note) if n]
    return chart + "".join(f"<p class='meta'>{escape(n)}</p>" for n in notes)


def _time_labels(stamps: pd.Series) -> tuple[list[str], str]:
    """Short axis labels of a series' time bins (hours and minutes within one day, else month,
    day and time) and the sentence naming the day; no labels when they are not times."""
    try:
        times = pd.to_datetime(stamps)
    except (TypeError, ValueError):
        return [], ""
    days = times.dt.strftime("%Y-%m-%d").unique()
    if len(days) == 1:
        return times.dt.strftime("%H:%M").tolist(), f"on {days[0]}"
    return times.dt.strftime("%m-%d %H:%M").tolist(), ""


def zone_series_display(release: Any, tess: Tessellation, period: Any = None) -> str:
    """A zone series (zone x time bin) as a map of **one** time bin (``period``: its
    timestamp, default the first) with that bin's margin."""
    t = release.tables["series"]
    col = "timestamp" if "timestamp" in t else "t"
    # the labels and the rows are matched as the same text (a datetime64 label's own text,
    # '2024-01-01T00:00:00.000000000', is no row's: every zone read 0)
    stamps = t[col].astype(str)
    chosen, which = _pick(list(pd.unique(stamps)), period, "period")
    part = t[stamps == str(chosen)]
    tcode = part["t"].iat[0] if len(part) else None
    return zone_display(
        release,
        tess,
        key="zone",
        value="value",
        margin=_series_margin(release, tcode),
        caption=which,
        table=part,
        noise=_series_noise(release, tcode),
    )


#: the sections of a mobility report its notebook display shows, in this order (when present)
REPORT_PICTURES = (
    "dataset_statistics",
    "trips_over_time",
    "trips_per_hour",
    "visits_per_tile",
    "od_flows",
    "travel_time",
)


def report_display(release: Any) -> str:
    """A mobility report's key pictures, drawn by the HTML report's own sections from the
    report's document (its published ``metadata.json``); ``write_html`` writes them all."""
    from privmob.render.report_files import report_document
    from privmob.render.report_html import _left_out, _section

    doc = report_document(release)
    analyses = doc["analyses"]
    shown = [n for n in REPORT_PICTURES if n in doc["params"]["analyses"]]
    warning = (doc.get("signal") or {}).get("warning")
    head = f"<p class='warn'>{escape(warning)}</p>" if warning else ""
    left = [n for n in doc["params"]["analyses"] if n not in shown]
    more = (
        f"<p class='meta'>not shown here: {escape(', '.join(left))} "
        "(<code>.write_html(path)</code> writes the whole report)</p>"
        if left
        else ""
    )
    sections = "".join(_section(n, analyses[n], doc) for n in shown)
    return head + sections + more + _left_out(doc["params"])  # a trip level's, with why


def picture(release: Any, tess: Tessellation | None, period: Any = None) -> str:
    """The picture of a release by its kind ('' when it has none)."""
    from privmob.releases.kinds import BY_ANY_NAME

    known = BY_ANY_NAME.get(release.kind)
    kind = known.name if known is not None else release.kind  # earlier names read as today's
    if kind == "report":
        return report_display(release)
    if "counts" in release.tables and "count" in release.tables["counts"]:
        return count_display(release, tess, period)  # the count template's kinds
    if kind in ("series", "series-counts") and "series" in release.tables:
        if "zone" in release.tables["series"].columns:
            return "" if tess is None else zone_series_display(release, tess, period)
        return series_display(release)
    if tess is None:
        return ""
    if kind == "od":
        return od_display(release, tess, period)
    if kind == "population":
        t = release.tables["population"]
        return zone_display(
            release,
            tess,
            key="zone",
            value="count",
            margin=release.noise.get("margin_of_error_95"),
            caption="users per home zone",
            table=t,
        )
    if kind == "density":
        t = release.tables["density"]
        value = next((c for c in ("count", "density", "value") if c in t.columns), None)
        if value is None or "zone" not in t.columns:
            return ""
        return zone_display(
            release,
            tess,
            key="zone",
            value=value,
            margin=None,
            caption="stated aggregate: the sum over the 168 hours of the week (no single 95% "
            "margin: the noise is on Fourier coefficients of clusters)",
            table=t,
        )
    return ""


def margin_text(release: Any) -> str:
    """The settings' "95% margin of error" row: per cell, per time bin (a series: from its
    budgets table) or per analysis (a report); what the density's noise is when it has none."""
    moe = release.noise.get("margin_of_error_95")
    if moe is not None:
        return f"±{float(moe):,.1f} per cell"
    margins = _series_margins(release)
    if margins:
        lo, hi = min(margins), max(margins)
        span = f"±{_fmt(lo)}" if lo == hi else f"±{_fmt(lo)} to ±{_fmt(hi)}"
        return f"{span} per cell, by time bin (the budgets table)"
    if release.kind == "report":
        from privmob.render.report_files import report_document

        values = [
            float(v)
            for a in report_document(release)["analyses"].values()
            for v in (a.get("margin_of_error_95") or {}).values()
            if isinstance(v, (int, float))
        ]
        if values:
            return f"±{_fmt(min(values))} to ±{_fmt(max(values))} per cell, by analysis"
    if "density" in release.tables:
        return "none per cell: the noise is on Fourier coefficients of clusters"
    return "see metadata.noise"


def bounds_text(release: Any) -> str:
    """The settings' "bounds" row: the bounds as ``metadata.json`` records them, said per
    trip when each trip is its own privacy unit (a release at trip level bounds no user)."""
    named = [f"{k}={v}" for k, v in release.bounds.items() if v is not None]
    if release.unit.value != "trip":
        return ", ".join(named) or "none recorded"
    l1 = release.noise.get("l1_sensitivity")
    change = f"; one trip changes the table by at most {l1} (L1)" if l1 is not None else ""
    kept = [b for b in named if "per_user" not in b]
    return (
        "per trip: each trip is its own privacy unit"
        + change
        + (f"; {', '.join(kept)}" if kept else "")
    )


def named_head(release: Any, tess: Tessellation | None, n: int = 10) -> pd.DataFrame:
    """The first rows of the main table with each zone's name beside its id (when the
    tessellation has names)."""
    table: pd.DataFrame = release.table.head(n).copy()
    if tess is None or tess.tile_names is None:
        return table
    names = dict(zip(map(str, tess.tile_ids), tess.tile_names, strict=True))
    for col in ("zone", "origin", "destination"):
        if col in table.columns:
            at = list(table.columns).index(col) + 1
            table.insert(at, f"{col}_name", table[col].astype(str).map(names).fillna(""))
    return table


def release_html(
    release: Any,
    tess: Tessellation | None,
    *,
    period: Any = None,
    basemap: bool | Basemap | None = True,
) -> str:
    """The whole display: settings, the picture (one period), the first rows with names.

    ``basemap``: the maps draw web tiles under the zones, fetched by the notebook's browser,
    with their attribution (:mod:`privmob.render.basemap`); ``False``: none, and the display
    names no external address."""
    cost = release.cost
    noise = release.noise
    rows = [
        ("release", release.kind),
        ("privacy unit", release.unit.value),
        ("bounds", bounds_text(release)),
        ("cost", cost.describe()),
        ("noise", str(noise.get("kind", noise.get("mechanism", "")))),
        ("95% margin of error", margin_text(release)),
    ]
    settings = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    warning = "" if release.for_publication else "<p><b>NOT FOR PUBLICATION</b> (fixed seed)</p>"
    try:
        with drawing_basemap(basemap):
            pic = picture(release, tess, period)
    except Exception as exc:  # a display never hides the release: say why there is no picture
        from privmob.errors import ConfigError

        if isinstance(exc, ConfigError):
            raise
        pic = f"<p class='meta'>(no picture: {escape(type(exc).__name__)})</p>"
    head = named_head(release, tess).to_html(index=False)
    n = len(release.table)
    return (
        f"{CSS}<div class='pm-release'>{warning}<table>{settings}</table>{pic}"
        f"<p class='meta'>the first rows of {n:,} (every cell, noisy values as drawn: "
        "<code>.to_pandas()</code>)</p>"
        f"{head}<p class='meta'>Pictures and rankings read only the noisy values and public "
        "parameters (post-processing).</p></div>"
    )
