"""The epsilon grid behind ``privmob evaluate decisions``: seed 003's Tables 2 and 3 for any
series of exact daily OD matrices and home counts (or a synthetic gravity scenario).

The outputs compare private with exact results and are therefore NOT differentially private:
they are for the data holder choosing epsilon, on pre-program or synthetic data (seed 003).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privmob.data.csv_cells import write_csv
from privmob.errors import ConfigError
from privmob.evaluate.decisions import (
    aid_targeting,
    compare_decisions,
    mobility_sir,
    privatize_counts,
    privatize_od,
    seed_infection,
)
from privmob.evaluate.notice import NOT_PRIVATE, write_notice
from privmob.privacy.mechanisms import NoiseKind
from privmob.privacy.samplers import Randomness
from privmob.surface import option

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation


@dataclass(frozen=True)
class Scenario:
    """Exact inputs: daily OD counts (n_days, k, k) and home counts per region (k,)."""

    od: np.ndarray
    population: np.ndarray
    names: list[str]

    def __post_init__(self) -> None:
        if self.od.ndim != 3 or self.od.shape[1:] != (len(self.population),) * 2:
            raise ConfigError("scenario needs od (n_days, k, k) and population (k,)")
        if self.od.shape[0] == 0:
            raise ConfigError("the study period has no days with data")


def synthetic_scenario(
    k: int = 40, days: int = 60, seed: int = 0, travel: float = 0.05
) -> Scenario:
    """A gravity-model country: lognormal populations, flows proportional to
    N_j / distance^2, ``travel`` = share of people travelling a day. For demos and tests."""
    rng = np.random.default_rng(seed)
    pop = np.round(rng.lognormal(mean=8.0, sigma=1.2, size=k)).astype(np.int64) + 200
    xy = rng.uniform(0, 100, size=(k, 2))
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + 5.0
    w = pop[None, :] / d**2
    np.fill_diagonal(w, 0)
    p = w / w.sum(axis=1, keepdims=True)
    rate = travel * pop[:, None] * p
    day_factor = rng.uniform(0.8, 1.2, size=(days, 1, 1))
    od = rng.poisson(rate[None] * day_factor).astype(np.int64)
    return Scenario(od, pop, [f"region_{i}" for i in range(k)])


def _pandemic_origins(pop: np.ndarray, rng: np.random.Generator) -> dict[str, int]:
    """The largest, the median and a random region, the random one drawn among the *other*
    regions (a draw equal to one of the first two would repeat its rows silently)."""
    order = np.argsort(-pop, kind="stable")
    largest, median = int(order[0]), int(order[len(order) // 2])
    others = [i for i in range(len(pop)) if i not in (largest, median)]
    origins = {"largest region": largest, "median region": median}
    if others:
        origins["random region"] = int(rng.choice(others))
    return origins


def run_grid(
    scenario: Scenario,
    epsilons: Sequence[float] = (0.1, 0.5, 1.0),
    *,
    repetitions: int = 5,
    T: int = 1,
    tau: int = 15,
    kind: NoiseKind | str = NoiseKind.DISCRETE_LAPLACE,
    shock_region: int | None = None,
    aid_days: int = 7,
    top_k: int = 3,
    sim_days: int = 300,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table2, table3): decision scores of the SIR rule and aid-targeting errors per epsilon.

    The SIR runs ``sim_days`` days (seed 003: 305), cycling through the daily matrices.

    Noise comes from ``Randomness.for_tests(seed + i)`` when ``seed`` is given, else secure.
    """
    if repetitions < 1:
        raise ConfigError("repetitions must be >= 1")
    od, pop = scenario.od, scenario.population
    pick = np.random.default_rng(seed)  # no seed: a fresh draw each run
    origins = _pandemic_origins(pop, pick)
    exact_runs = {
        name: mobility_sir(od, pop, seed_infection(pop, o), days=sim_days).decisions()
        for name, o in origins.items()
    }
    if shock_region is None:
        shock_region = int(np.argmax(od[:aid_days].sum(axis=(0, 2))))
    k = len(pop)
    if not 0 <= shock_region < k:
        raise ConfigError(f"shock region must be in 0..{k - 1}")
    week = od[:aid_days]
    rows2: list[dict[str, object]] = []
    rows3: list[dict[str, object]] = []
    total_steps, step = len(epsilons) * repetitions, 0
    for eps in epsilons:
        for rep in range(repetitions):
            rng = (
                Randomness.secure()
                if seed is None
                else Randomness.for_tests(seed + 1000 * rep + int(eps * 1e6))
            )
            p_od = privatize_od(od, eps, T=T, tau=tau, kind=kind, rng=rng)
            p_pop = privatize_counts(pop, eps, kind=kind, rng=rng)
            for name, o in origins.items():
                priv = mobility_sir(
                    p_od, p_pop, seed_infection(p_pop, o), days=sim_days
                ).decisions()
                s = compare_decisions(exact_runs[name], priv).summary()
                rows2.append({"scenario": name, "epsilon": eps, "repetition": rep, **s})
            a = aid_targeting(week, p_od[:aid_days], shock_region, top_k)
            rows3.append(
                {
                    "epsilon": eps,
                    "repetition": rep,
                    "total_out_migration": a.total_private,
                    "exact_out_migration": a.total_exact,
                    "percent_error": a.percent_error,
                    "topk_accuracy": a.topk_accuracy,
                    "topk_accuracy_period": a.topk_accuracy_period,
                }
            )
            step += 1
            if progress:
                progress(step, total_steps)
    t2 = (
        pd.DataFrame(rows2).groupby(["scenario", "epsilon"], as_index=False).mean(numeric_only=True)
    )
    t3 = (
        pd.DataFrame(rows3)
        .groupby("epsilon", as_index=False)
        .agg(
            total_out_migration=("total_out_migration", "mean"),
            exact_out_migration=("exact_out_migration", "first"),
            percent_error=("percent_error", "mean"),
            percent_error_sd=("percent_error", "std"),
            topk_accuracy=("topk_accuracy", "mean"),
            topk_accuracy_period=("topk_accuracy_period", "mean"),
        )
    )
    t2 = t2.drop(columns="repetition")
    t2.insert(1, "origin", t2["scenario"].map({n: scenario.names[o] for n, o in origins.items()}))
    t3.insert(0, "k", top_k)
    t3.insert(0, "shock_region", scenario.names[shock_region])
    return t2, t3


def _pct(v: float, sd: float | None = None) -> str:
    return f"{100 * v:.0f}%" + ("" if sd is None else f" ({100 * sd:.0f}%)")


def table2_markdown(t2: pd.DataFrame) -> str:
    lines = [
        f"> {NOT_PRIVATE}",
        "",
        "| Scenario | epsilon | Accuracy | Precision | Recall |",
        "|---|---|---|---|---|",
    ]
    for scen, g in t2.groupby("scenario", sort=False):
        lines.append(f"| {scen} | non-private | 100% | 100% | 100% |")
        for _, r in g.iterrows():
            lines.append(
                f"| {scen} | {r.epsilon:g} | {_pct(r.accuracy, r.accuracy_sd)} | "
                f"{_pct(r.precision, r.precision_sd)} | {_pct(r.recall, r.recall_sd)} |"
            )
    return "\n".join(lines) + "\n"


def table3_markdown(t3: pd.DataFrame) -> str:
    eps = [f"eps={e:g}" for e in t3.epsilon]
    head = "| | non-private | " + " | ".join(eps) + " |"
    sep = "|---" * (len(eps) + 2) + "|"
    exact = float(t3.exact_out_migration.iloc[0])
    k = int(t3.k.iloc[0])
    tot = " | ".join(f"{v:,.0f}" for v in t3.total_out_migration)
    err = " | ".join(f"{v:.2f}%" for v in t3.percent_error)
    acc = " | ".join(f"{100 * v:.2f}%" for v in t3.topk_accuracy)
    return (
        f"> {NOT_PRIVATE}\n\n{head}\n{sep}\n| Total out-migration | {exact:,.0f} | {tot} |\n"
        f"| Percent error in total out-migration | 0.00% | {err} |\n"
        f"| Accuracy of top-k regions (k={k}) | 100.00% | {acc} |\n"
    )


def plot_grid(t2: pd.DataFrame, t3: pd.DataFrame, stem: Path) -> list[Path]:
    """Error vs epsilon: decision scores (left) and aid-targeting errors (right), PNG + SVG."""
    from privmob.extras import pyplot

    plt = pyplot("the decision plot")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for scen, g in t2.groupby("scenario", sort=False):
        ax1.errorbar(g.epsilon, g.accuracy, yerr=g.accuracy_sd, marker="o", capsize=3, label=scen)
    ax1.set(xscale="log", xlabel="epsilon", ylabel="decision accuracy (I/N >= 20%)")
    ax1.set_title("SIR intervention decisions, private vs exact")
    ax1.legend(fontsize=8)
    ax2.errorbar(
        t3.epsilon, t3.percent_error, yerr=t3.percent_error_sd.fillna(0), marker="o", capsize=3
    )
    ax2.set(xscale="log", xlabel="epsilon", ylabel="% error, total out-migration")
    ax2b = ax2.twinx()
    ax2b.plot(t3.epsilon, 100 * t3.topk_accuracy, "s--", color="tab:orange")
    ax2b.set_ylabel(f"top-{int(t3.k.iloc[0])} accuracy (%)", color="tab:orange")
    ax2.set_title("aid targeting after a shock")
    fig.tight_layout()
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths


def write_grid(
    t2: pd.DataFrame, t3: pd.DataFrame, outdir: Path, overwrite: bool = False
) -> list[Path]:
    """decisions_table2.{csv,md}, aid_table3.{csv,md}, error_vs_epsilon.{png,svg} and
    NOT_PRIVATE.txt (the results compare with exact data: never publish them)."""
    outdir.mkdir(parents=True, exist_ok=True)
    targets = [outdir / n for n in ("decisions_table2.csv", "aid_table3.csv")]
    if not overwrite and any(p.exists() for p in targets):
        raise ConfigError(f"{outdir} already holds results", hint=f"pass {option('overwrite')}")
    write_csv(t2, targets[0])
    write_csv(t3, targets[1])
    md2, md3 = outdir / "decisions_table2.md", outdir / "aid_table3.md"
    md2.write_text(table2_markdown(t2))
    md3.write_text(table3_markdown(t3))
    plots = plot_grid(t2, t3, outdir / "error_vs_epsilon")
    return [*targets, md2, md3, *plots, write_notice(outdir)]


def scenario_from_events(
    events: Any,
    tessellation: Tessellation,
    period: Any,
    *,
    max_trips: int,
    trip_rule: str = "events",
) -> Scenario:
    """Exact daily OD counts (T trips per user per period) and home counts from events.

    Exact values: for the data holder's simulation only, never to be published.
    """
    from privmob.prepare.trips import events_to_trips
    from privmob.privacy.costs import PrivacyUnit
    from privmob.releases.od import ODDomain, exact_counts
    from privmob.releases.population import exact_home_counts

    k = tessellation.k
    trips = events_to_trips(events, trip_rule)
    dom = ODDomain(k, period.n_bins)
    counts = exact_counts(
        trips,
        domain=dom,
        period=period,
        unit=PrivacyUnit.USER,
        max_trips=max_trips,
        bound_per="period",
    )
    od = counts[: dom.od_size].reshape(period.n_bins, k, k)
    homes = exact_home_counts(events, k, period=period)
    return Scenario(od, homes[:k], [str(t) for t in tessellation.tile_ids])
