"""The notebook display of a release (``ReleaseResult._repr_html_`` and ``.html(period=...)``).

What a person sees of a release, with its uncertainty (SPEC invariant 6: everything here is
post-processing of the release's noisy tables and public parameters: the noise distribution,
the public domain and the public tessellation):

- a release of several periods (an OD matrix per day, a series per hour) is shown **one period
  at a time** (the first unless ``period`` names another), and says which and how many there
  are; density's 168 hours of the week are shown as a **stated aggregate** (their sum);
- OD flows: only flows above the noise floor of the period's cells are drawn and ranked (the
  level that the noise of none of them reaches with 95% probability), with tile names;
- zone maps hatch the zones within their 95% margin of 0 and say so in the legend; their
  ranking lists only zones above the noise floor, name beside id.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.render import svg
from privmob.render.basemap import Basemap, drawing_basemap
from privmob.render.map_labels import tile_names

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

CSS = (
    "<style>.pm-release table{border-collapse:collapse;font-size:12px;margin:4px 0}"
    ".pm-release td,.pm-release th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}"
    ".pm-release td:first-child,.pm-release th:first-child{text-align:left}"
    ".pm-release .meta{color:#555;font-size:12px}</style>"
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
    """The period shown (``period`` or the first) and the sentence that says which."""
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
        f"<code>.html({what}=...)</code> shows another)"
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
    top = [j for j in order if counts[j] > floor][:10]
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
    )
    return (
        f"<p class='meta'>{which}</p><div style='display:flex;gap:16px;flex-wrap:wrap'>"
        f"{picture}<div>{ranking}<p class='meta pm-ranking-note'>{escape(note)} (with 95% "
        f"probability the noise of none of the period's {k * (k - 1):,} cells reaches it)</p>"
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
) -> str:
    """A zone table (one value per zone) as a choropleth, zones within ``margin`` of 0
    hatched, and a ranking of the zones above the noise floor with their names."""
    from privmob.privacy.signal import noise_floor

    tiles = _tiles(tess)
    index = {str(t): i for i, t in enumerate(tiles["ids"])}
    values = [0.0] * len(tiles["ids"])
    for z, v in table.groupby(table[key].astype(str), sort=False)[value].sum().items():
        if z in index:
            values[index[z]] = float(v)
    picture = svg.choropleth(tiles, values, title=release.kind, unit=value, margin=margin)
    noise = _noise(release)
    ranking, note = "", ""
    if noise is not None and margin is not None:
        floor = noise_floor(noise, len(values))
        v = np.asarray(values)
        order = [int(j) for j in np.argsort(-v, kind="stable") if v[j] > floor][:10]
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


def _series_margin(release: Any, t: Any) -> float | None:
    from privmob.privacy.mechanisms import Noise, NoiseKind

    budgets = release.tables.get("budgets")
    if budgets is None or "noise_scale" not in budgets:
        return None
    scale = float(budgets.set_index("t")["noise_scale"].get(t, np.nan))
    if not (np.isfinite(scale) and scale > 0):
        return None
    return float(Noise(NoiseKind(release.noise["kind"]), scale).margin_of_error())


def picture(release: Any, tess: Tessellation | None, period: Any = None) -> str:
    """The picture of a release by its kind ('' when it has none)."""
    from privmob.releases.kinds import BY_ANY_NAME

    known = BY_ANY_NAME.get(release.kind)
    kind = known.name if known is not None else release.kind  # earlier names read as today's
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
    if kind in ("series", "series-counts"):
        t = release.tables["series"]
        if "zone" not in t.columns:
            return ""
        labels = list(pd.unique(t["timestamp"])) if "timestamp" in t else list(pd.unique(t["t"]))
        chosen, which = _pick(labels, period, "period")
        col = "timestamp" if "timestamp" in t else "t"
        part = t[t[col].astype(str) == str(chosen)]
        tcode = part["t"].iat[0] if len(part) else None
        return zone_display(
            release,
            tess,
            key="zone",
            value="value",
            margin=_series_margin(release, tcode),
            caption=which,
            table=part,
        )
    return ""


def named_head(release: Any, tess: Tessellation | None, n: int = 10) -> pd.DataFrame:
    """The first rows of the main table with each zone's name beside its id (when the
    tessellation has names)."""
    table = release.table.head(n).copy()
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
    moe = noise.get("margin_of_error_95")
    rows = [
        ("release", release.kind),
        ("privacy unit", release.unit.value),
        ("bounds", ", ".join(f"{k}={v}" for k, v in release.bounds.items() if v is not None)),
        ("cost", cost.describe()),
        ("noise", str(noise.get("kind", noise.get("mechanism", "")))),
        ("95% margin of error", "" if moe is None else f"+/-{float(moe):,.1f} per cell"),
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
