"""QGIS styles for privmob's map layers: a ``.qml`` file beside each layer (same stem), which
QGIS applies when the layer is opened.

The style is a rule-based renderer on the layer's value column (``count``, or ``value`` for
series), in the 8 classes of equal width up to the largest value that the report's maps use
(:func:`privmob.render.svg.class_breaks`, the same blues); features whose ``below_margin`` is
true (the value cannot be told from an empty cell) get their own first rule: polygons are
hatched grey (a ``LinePatternFill``) and lines drawn thin, grey and dashed, never in a class
colour. Polygon layers label each tile with its ``tile_name`` where the label fits inside it.

Post-processing of a charged release's noisy values and public names (SPEC invariant 6): the
class breaks read the layer written, nothing else.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import quoteattr

from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import geopandas as gpd
    import numpy as np
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")

#: The blues of the report's maps (``privmob.render.svg.PALETTE``), as QGIS colours.
BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#084594")
BELOW_FILL = "#d9d9d9"
FLOW_RED = "#d62728"
#: The value columns a style classifies, first found first.
VALUE_COLUMNS = ("count", "value", "mean")
#: QGIS version the style is written for (read by QGIS 3.16 and later).
QGIS_VERSION = "3.28.0-Firenze"


def _rgba(hex_color: str, alpha: int = 255) -> str:
    h = hex_color.lstrip("#")
    return ",".join(str(int(h[i : i + 2], 16)) for i in (0, 2, 4)) + f",{alpha}"


def _options(**values: object) -> str:
    return (
        "<Option type='Map'>"
        + "".join(
            f"<Option type='QString' name={quoteattr(k)} value={quoteattr(str(v))}/>"
            for k, v in values.items()
        )
        + "</Option>"
    )


def _layer(cls: str, inner: str = "", **values: object) -> str:
    return (
        f"<layer class='{cls}' enabled='1' locked='0' pass='0'>{_options(**values)}{inner}</layer>"
    )


def _symbol(kind: str, name: str, *layers: str) -> str:
    return (
        f"<symbol type='{kind}' name='{name}' alpha='1' clip_to_extent='1' force_rhr='0'>"
        + "".join(layers)
        + "</symbol>"
    )


def _fill(color: str) -> str:
    return _layer(
        "SimpleFill",
        color=_rgba(color),
        style="solid",
        outline_color="136,136,136,255",
        outline_style="solid",
        outline_width="0.2",
        outline_width_unit="MM",
    )


def _line(color: str, width: float, style: str = "solid", alpha: int = 255) -> str:
    return _layer(
        "SimpleLine",
        line_color=_rgba(color, alpha),
        line_width=f"{width:.2f}",
        line_width_unit="MM",
        line_style=style,
        capstyle="round",
        joinstyle="round",
    )


def _hatch(name: str) -> str:
    """Grey fill with white diagonal lines: the polygons at or below their margin."""
    lines = _symbol("line", f"@{name}@1", _line("#ffffff", 0.4))
    pattern = _layer(
        "LinePatternFill",
        lines,
        angle="45",
        distance="1.5",
        distance_unit="MM",
        line_width="0.4",
        line_width_unit="MM",
        color="255,255,255,255",
    )
    return _symbol("fill", name, _fill(BELOW_FILL), pattern)


def _breaks(values: np.ndarray) -> list[float]:
    """The 9 edges of the 8 classes of equal width from 0 to the largest value (1 when none is
    positive), as on the report's maps."""
    finite = values[np.isfinite(values)]
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    n = len(BLUES)
    return [vmax * i / n for i in range(n + 1)]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or float(v).is_integer() else f"{v:.3g}"


def _rule(filter_expr: str, symbol: int, label: str) -> str:
    key = "{" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"privmob:{filter_expr}")) + "}"
    return (
        f"<rule key='{key}' filter={quoteattr(filter_expr)} symbol='{symbol}' "
        f"label={quoteattr(label)}/>"
    )


#: True where ``below_margin`` is true, whatever the format's type for it (a boolean in
#: GeoParquet and GeoJSON, the text ``True`` in CSV).
BELOW_EXPR = "lower(to_string(\"below_margin\")) IN ('true', '1', 't')"


def style_qml(
    layer: gpd.GeoDataFrame, *, lines: bool, stamp: Mapping[str, str] | None = None
) -> str:
    """The ``.qml`` text of a layer (``lines``: an OD layer of LineStrings; else polygons).
    ``stamp``: the release's stamp (:func:`privmob.releases.stamp.stamp`), kept in a
    ``<privmob>`` element that QGIS ignores (``for_publication``, ``kind``, ``version`` and,
    for a test-mode release, ``warning``)."""
    value = next((c for c in VALUE_COLUMNS if c in layer.columns), None)
    below = "below_margin" in layer.columns
    rules: list[str] = []
    symbols: list[str] = []
    if below:
        rules.append(_rule(BELOW_EXPR, 0, "at or below the 95% margin: cannot be told from empty"))
        symbols.append(
            _symbol("line", "0", _line("#999999", 0.3, "dash")) if lines else _hatch("0")
        )
    not_below = f"NOT ({BELOW_EXPR}) AND " if below else ""
    if value is not None:
        v = np.asarray(layer[value], dtype=float) if len(layer) else np.zeros(0)
        edges = _breaks(v)
        field = f'"{value}"'
        for i, color in enumerate(BLUES):
            lo, hi = edges[i], edges[i + 1]
            parts = [] if i == 0 else [f"{field} >= {lo!r}"]
            if i < len(BLUES) - 1:
                parts.append(f"{field} < {hi!r}")
            n = len(symbols)
            rules.append(_rule(not_below + " AND ".join(parts), n, f"{_fmt(lo)} - {_fmt(hi)}"))
            if lines:
                width = 0.3 + 1.7 * (i + 1) / len(BLUES)
                symbols.append(_symbol("line", str(n), _line(FLOW_RED, width, alpha=170)))
            else:
                symbols.append(_symbol("fill", str(n), _fill(color)))
    else:
        rules.append(_rule("ELSE", len(symbols), "feature"))
        symbols.append(
            _symbol("line", str(len(symbols)), _line(FLOW_RED, 0.6))
            if lines
            else _symbol("fill", str(len(symbols)), _fill(BLUES[3]))
        )
    labels = "" if lines or "tile_name" not in layer.columns else _labeling("tile_name")
    root = "{" + str(uuid.uuid5(uuid.NAMESPACE_URL, "privmob:rules")) + "}"
    return (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        f"<qgis version='{QGIS_VERSION}' styleCategories='Symbology|Labeling' "
        f"labelsEnabled='{1 if labels else 0}'>"
        "<renderer-v2 type='RuleRenderer' symbollevels='0' enableorderby='0' forceraster='0'>"
        f"<rules key='{root}'>{''.join(rules)}</rules>"
        f"<symbols>{''.join(symbols)}</symbols></renderer-v2>{labels}{_stamp(stamp)}"
        "<layerGeometryType>" + ("1" if lines else "2") + "</layerGeometryType></qgis>\n"
    )


def _stamp(stamp: Mapping[str, str] | None) -> str:
    if not stamp:
        return ""
    attrs = " ".join(f"{k.removeprefix('privmob.')}={quoteattr(v)}" for k, v in stamp.items())
    return f"<privmob {attrs}/>"


def _labeling(field: str) -> str:
    """Each feature labelled with ``field`` over its centre, only where the label fits inside
    it, with a white halo."""
    return (
        "<labeling type='simple'><settings calloutType='simple'>"
        f"<text-style fieldName={quoteattr(field)} isExpression='0' fontSize='8' "
        "fontSizeUnit='Point' textColor='34,34,34,255' fontFamily='Sans Serif' "
        "namedStyle='Regular' textOpacity='1'>"
        "<text-buffer bufferDraw='1' bufferSize='0.7' bufferSizeUnits='MM' "
        "bufferColor='255,255,255,255' bufferOpacity='0.85'/></text-style>"
        "<placement placement='1' fitInPolygonOnly='1' centroidInside='1' priority='5'/>"
        "<rendering obstacle='1' displayAll='0' labelPerPart='0' upsidedownLabels='0'/>"
        "</settings></labeling>"
    )


def style_path(layer_file: str | Path) -> Path:
    """The style file QGIS reads with a layer file: the same stem, ``.qml``."""
    return Path(layer_file).with_suffix(".qml")


def write_style(
    layer: gpd.GeoDataFrame,
    path: str | Path,
    *,
    lines: bool,
    stamp: Mapping[str, str] | None = None,
) -> Path:
    """Write the ``.qml`` style of ``layer`` to ``path`` (:func:`style_qml`)."""
    out = Path(path)
    out.write_text(style_qml(layer, lines=lines, stamp=stamp), encoding="utf-8")
    return out
