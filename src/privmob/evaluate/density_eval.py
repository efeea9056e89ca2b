"""The density scheme against the LPA baseline over epsilons and repetitions (seed 004 Figs 7-9).

This compares noisy releases with the exact series of the same data, so its output is NOT
differentially private: it is a planning tool for the data holder, run with seeded (test) noise
and never charged to the ledger. Do not publish its numbers for sensitive data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privmob.evaluate.density_metrics import mre, pearson, spatial_emd
from privmob.prepare.presample import DensityCounts
from privmob.releases.density import DensityConfig, perturb_density
from privmob.releases.metadata import json_list


def variants(max_visits: int, delta: float) -> dict[str, DensityConfig]:
    """The schemes compared (epsilon is filled in per run)."""
    out = {"LPA": DensityConfig(1.0, max_visits, method="lpa")}
    out["EFPA"] = DensityConfig(1.0, max_visits)
    if delta > 0:
        out["EFPAG"] = DensityConfig(1.0, max_visits, delta)
        out["EFPAG- (no improvements)"] = DensityConfig(
            1.0, max_visits, delta, totals="sampled", smoothing=False
        )
    return out


def evaluate_density(
    counts: DensityCounts,
    geometry: Any,
    epsilons: Sequence[float],
    repetitions: int,
    *,
    delta: float = 0.0,
    emd_hours: Sequence[int] = (),
    first_hour: int = 0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """One row per (method, epsilon, repetition): mean MRE, mean Pearson, mean EMD (metres)."""
    if counts.hourly is None:
        raise ValueError("evaluation needs the exact hourly counts (with_truth=True)")
    truth = np.asarray(geometry.voronoi.shares.T @ counts.hourly)
    zone_pts = geometry.voronoi.zone_centroids
    rows = []
    for name, base in variants(counts.max_visits, delta).items():
        for eps in epsilons:
            cfg = replace(base, epsilon=float(eps))
            if cfg.delta > 0 and eps / 4 >= 1:
                continue
            for rep in range(repetitions):
                if progress:
                    progress(f"{name} epsilon={eps} repetition {rep + 1}/{repetitions}")
                res = perturb_density(
                    counts,
                    geometry.cmap,
                    geometry.centroids,
                    cfg,
                    seed + 1000 * rep + int(eps * 1000),
                    first_hour=first_hour,
                )
                est = np.maximum(np.rint(res.zones), 0)
                row = {
                    "method": name,
                    "epsilon": float(eps),
                    "repetition": rep,
                    "mre": float(mre(truth, est).mean()),
                    "pearson": _nanmean(pearson(truth, est)),
                }
                # flags of the release (noisy totals and public choices): a flat series has
                # no defined Pearson correlation, which the mean above would hide as NaN
                flags = json_list((res.signal or {}).get("flags"))
                for flag in ("flat", "tau_unreachable", "too_sparse"):
                    row[flag] = flag in flags
                if len(emd_hours):
                    e = spatial_emd(truth, est, zone_pts, hours=np.asarray(emd_hours))
                    row["emd_m"] = float(e.per_hour.mean())
                    row["emd_stretch"] = e.stretch
                rows.append(row)
    return pd.DataFrame(rows)


def _nanmean(values: np.ndarray) -> float:
    """Mean over the series where the correlation is defined (NaN if it is nowhere)."""
    ok = np.isfinite(values)
    return float(values[ok].mean()) if ok.any() else float("nan")


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    metrics = [m for m in ("mre", "pearson", "emd_m") if m in table.columns]
    agg = table.groupby(["method", "epsilon"])[metrics].agg(["mean", "std"])
    agg.columns = ["_".join(map(str, col)) for col in agg.columns.to_flat_index()]
    flags = [f for f in ("flat", "tau_unreachable", "too_sparse") if f in table.columns]
    if flags:  # share of runs with each flag
        shares = table.groupby(["method", "epsilon"])[flags].mean()
        agg = agg.join(shares.rename(columns=lambda f: f"{f}_share"))
    return agg.reset_index()


def plot_summary(summary: pd.DataFrame, path: Path) -> Path:
    from privmob.extras import pyplot

    plt = pyplot("the density evaluation plot")

    metrics = [m for m in ("mre", "pearson", "emd_m") if f"{m}_mean" in summary.columns]
    labels = {"mre": "MRE", "pearson": "Pearson correlation", "emd_m": "EMD (metres)"}
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 3.6))
    axes = np.atleast_1d(axes)
    for ax, m in zip(axes, metrics, strict=True):
        for method, g in summary.groupby("method"):
            ax.errorbar(
                g["epsilon"],
                g[f"{m}_mean"],
                yerr=g[f"{m}_std"].fillna(0),
                marker="o",
                capsize=3,
                label=method,
            )
        ax.set_xlabel("epsilon")
        ax.set_ylabel(labels[m])
        if m == "mre":
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("privmob density: scheme vs LPA (not a private output)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
