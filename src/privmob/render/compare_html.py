"""Self-contained HTML page for a report comparison table."""

from __future__ import annotations

import math
from html import escape

import pandas as pd

COLUMNS = {
    "smape": "SMAPE",
    "js_divergence": "Jensen-Shannon divergence (base 2)",
    "kl_divergence": "KL divergence (base 2)",
    "emd": "EMD",
    "kendall_tau": "Kendall's τ",
    "top_n_coverage": "top-10 coverage",
    "smape_quartiles": "SMAPE of five-number summary",
    "note": "note",
}


def _cell(v: object) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "<td class='na'>–</td>"
    if v == "":
        return "<td></td>"
    if isinstance(v, float):
        return f"<td>{'∞' if math.isinf(v) else f'{v:.4g}'}</td>"
    return f"<td>{escape(str(v))}</td>"


def render_compare_html(table: pd.DataFrame, name_a: str, name_b: str) -> str:
    head = "<th>analysis</th>" + "".join(f"<th>{escape(t)}</th>" for t in COLUMNS.values())
    rows = "".join(
        "<tr>" + _cell(r["analysis"]) + "".join(_cell(r.get(c)) for c in COLUMNS) + "</tr>"
        for r in table.to_dict("records")
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>privmob report "
        "comparison</title><style>body{font-family:system-ui,sans-serif;margin:24px}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;"
        "text-align:right}td:first-child{text-align:left}th{background:#f3f6fa}.na{color:#aaa}"
        "</style></head><body><h1>Mobility report comparison</h1>"
        f"<p>A (reference): {escape(name_a)}<br>B (estimate): {escape(name_b)}</p>"
        f"<table><tr>{head}</tr>{rows}</table>"
        "<p>Jensen-Shannon and KL divergences in bits (base 2; JS in [0, 1]). dp_mobility_report "
        "reports the base-e Jensen-Shannon <em>distance</em> = sqrt(JS divergence × ln 2). "
        "EMD: metres between tile centroids (haversine) for visits per tile, the histogram's "
        "unit for distributions, bins for weekdays and time. Negative noisy counts are clipped "
        "to 0 before distributions are compared.</p></body></html>"
    )
