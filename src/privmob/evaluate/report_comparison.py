"""Compare two mobility reports analysis by analysis (dp_mobility_report's BenchmarkReport).

Post-processing only: reads two report documents (JSON) over the same public domains. Report A
is the reference ("true"), B the estimate. Jensen-Shannon divergence is in base 2 (bits, range
[0, 1]); KL in base 2 as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from privmob.errors import ConfigError
from privmob.evaluate import similarity as sim

JS_BASE = 2
TOP_N = 10
SPATIAL = ("visits_per_tile",)
RANKED = ("visits_per_tile", "od_flows")
MEASURES = (
    "smape",
    "js_divergence",
    "kl_divergence",
    "emd",
    "kendall_tau",
    "top_n_coverage",
    "smape_quartiles",
)
STATS = ("users", "trips", "complete_trips", "incomplete_trips", "trip_ends")


def _vec(a: dict[str, Any]) -> np.ndarray:
    return np.asarray(a["counts"], dtype=np.float64)


def _measures(
    name: str, a: dict[str, Any], b: dict[str, Any], tess: dict[str, Any]
) -> dict[str, float | None]:
    row: dict[str, float | None] = dict.fromkeys(MEASURES)
    if name == "dataset_statistics":
        row["smape"] = sim.smape([a[s] for s in STATS], [b[s] for s in STATS])
        return row
    p, q = _vec(a), _vec(b)
    if p.shape != q.shape:
        raise ConfigError(f"{name}: the reports have different domains ({p.size} vs {q.size})")
    row["smape"] = sim.smape(p, q)
    if name == "missing_values":
        return row
    row["js_divergence"] = sim.js_divergence(p, q, base=JS_BASE)
    row["kl_divergence"] = sim.kl_divergence(p, q, base=JS_BASE)
    if name in SPATIAL:
        row["emd"] = sim.emd_spatial(p, q, np.asarray(tess["lat"]), np.asarray(tess["lng"]))
    elif "edges" in a:
        edges = np.asarray(a["edges"], dtype=np.float64)
        if a["edges"] != b["edges"]:
            raise ConfigError(f"{name}: the reports declare different bins")
        row["emd"] = sim.emd_1d(p, q, (edges[:-1] + edges[1:]) / 2)
        fa, fb = a["five_number_summary"], b["five_number_summary"]
        row["smape_quartiles"] = sim.smape([fa[k] for k in fa], [fb[k] for k in fa])
    elif name in ("trips_per_weekday", "trips_over_time"):
        row["emd"] = sim.emd_1d(p, q, np.arange(p.size, dtype=np.float64))
    if name in RANKED:
        row["kendall_tau"] = sim.kendall_tau(p, q)
        row["top_n_coverage"] = sim.top_n_coverage(p, q, TOP_N)
    return row


def compare_reports(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> pd.DataFrame:
    """One row per analysis present in both reports, with the similarity measures that apply
    (others are empty). EMD is in the analysis' unit (km, minutes, ...; metres for the spatial
    EMD over tile centroids, bins for weekdays/time)."""
    if doc_a["domain"]["tile_ids"] != doc_b["domain"]["tile_ids"]:
        raise ConfigError(
            "the reports use different tessellations", hint="compare reports over the same tiles"
        )
    rows = []
    for name in doc_a["params"]["analyses"]:
        if name not in doc_b["analyses"]:
            continue
        a, b = doc_a["analyses"][name], doc_b["analyses"][name]
        if a.get("edges") != b.get("edges") or len(a.get("counts", ())) != len(b.get("counts", ())):
            rows.append({"analysis": name, "note": "different declared bins: not compared"})
            continue
        row = _measures(name, a, b, doc_a["tessellation"])
        rows.append({"analysis": name, **row, "note": ""})
    cols = ["analysis", *MEASURES, "note"]
    return pd.DataFrame(rows).reindex(columns=cols)
