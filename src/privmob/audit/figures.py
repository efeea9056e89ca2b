"""The audit's results: accuracy-vs-k table and plot, and an AUC table like seed 003's Table S1.

``privmob audit figures -o DIR`` calls :func:`write_figures`. Everything is seeded, so the
same flags give the same files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from privmob.audit.epsilon import empirical_epsilon
from privmob.audit.lrt import LRTResult, NoiseModel, ReleaseConfig, ReleaseStyle, simulate
from privmob.audit.ml import PrivateOD, attack, auc_table, synthetic_membership_data
from privmob.data.csv_cells import write_csv
from privmob.privacy.costs import PrivacyUnit


@dataclass(frozen=True)
class FigureConfig:
    trials: int = 10_000
    k_max: int = 70
    epsilon: float = 0.66
    tau: float = 100.0
    user_bound: int = 10
    ml_targets: int = 10
    ml_users: int = 150
    ml_epsilons: tuple[float, ...] = (0.1, 0.5, 1.0)
    trees: int = 100
    seed: int = 0


def lrt_styles(cfg: FigureConfig) -> dict[str, ReleaseConfig]:
    """Seed 002's release (trip-level Laplace, threshold) beside privmob's user-level one."""
    return {
        "seed 002: trip-level Laplace 1/eps": ReleaseConfig(
            cfg.epsilon, cfg.tau, NoiseModel.LAPLACE, ReleaseStyle.TRIP
        ),
        f"privmob: user-level, T={cfg.user_bound}, discrete Laplace T/eps": ReleaseConfig(
            cfg.epsilon,
            cfg.tau,
            NoiseModel.DISCRETE_LAPLACE,
            ReleaseStyle.USER,
            bound=cfg.user_bound,
        ),
    }


def with_epsilon_bounds(res: LRTResult, confidence: float = 0.95) -> pd.DataFrame:
    """The result's table plus the empirical epsilon lower bound per k."""
    df = res.to_frame()
    df["epsilon_lower"] = [
        empirical_epsilon(int(fp), int(no), int(fn), int(ni), confidence=confidence).epsilon_lower
        for fp, no, fn, ni in zip(
            res.false_positives, res.n_out, res.false_negatives, res.n_in, strict=True
        )
    ]
    return df


def lrt_figure(cfg: FigureConfig, progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    frames = []
    for i, (name, rc) in enumerate(lrt_styles(cfg).items()):
        res = simulate(rc, range(cfg.k_max + 1), cfg.trials, rng=cfg.seed + i, progress=progress)
        df = with_epsilon_bounds(res)
        df.insert(0, "release", name)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def plot_lrt(df: pd.DataFrame, path: Path, claimed: float) -> None:
    from privmob.extras import pyplot

    plt = pyplot("the audit figures")

    from privmob.privacy.costs import membership_posterior_bound

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for (name, g), color in zip(df.groupby("release", sort=False), ("C3", "C0"), strict=False):
        ax.plot(g.k, g.accuracy, color=color, lw=2, label=f"{name}: attacker accuracy")
        ax.plot(g.k, g.bound, color=color, lw=1, ls="--", label=f"{name}: bound e^ε/(1+e^ε)")
    ax.axhline(
        membership_posterior_bound(claimed),
        color="k",
        lw=0.8,
        ls=":",
        label=f"claimed bound for ε={claimed:g}",
    )
    ax.set_xlabel("k = target's unique trips in the period")
    ax.set_ylabel("membership attack accuracy")
    ax.set_ylim(0.45, 1.02)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def ml_figure(cfg: FigureConfig, progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    data = synthetic_membership_data(
        users=cfg.ml_users, n_targets=cfg.ml_targets, bounds=(4,), seed=cfg.seed
    )
    releases = [PrivateOD(e, PrivacyUnit.TRIP) for e in cfg.ml_epsilons]
    releases.append(PrivateOD(cfg.ml_epsilons[-1], PrivacyUnit.USER, bound=4))
    frames = [
        attack(
            data,
            releases,
            weekday=wd,
            n_estimators=cfg.trees,
            rng=cfg.seed + 10 + int(wd),
            progress=progress,
        )
        for wd in (False, True)
    ]
    return pd.concat(frames, ignore_index=True)


def _markdown(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_figures(
    outdir: Path,
    cfg: FigureConfig,
    *,
    ml: bool = True,
    lrt: bool = True,
    progress: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write lrt_accuracy.{csv,md,png} and ml_auc.{csv,md}; return the paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if lrt:
        written += _write_lrt(outdir, cfg, progress)
    if ml:
        res = ml_figure(cfg, progress)
        write_csv(res, outdir / "ml_auc.csv")
        table = auc_table(res).reset_index()
        table.columns = [str(c) for c in table.columns]
        (outdir / "ml_auc.md").write_text(_markdown(table))
        written += [outdir / "ml_auc.csv", outdir / "ml_auc.md"]
    return written


def _write_lrt(
    outdir: Path, cfg: FigureConfig, progress: Callable[[int], None] | None
) -> list[Path]:
    lrt = lrt_figure(cfg, progress)
    write_csv(lrt, outdir / "lrt_accuracy.csv")
    pick = lrt[lrt.k.isin([0, 1, 2, 5, 10, 20, 30, 40, 50, 60, 70])]
    wide = pick.pivot_table(
        index="k", columns="release", values=["accuracy", "bound", "epsilon_lower"], sort=False
    )
    wide.columns = [f"{c[0]} [{str(c[1]).split(':')[0]}]" for c in wide.columns]
    (outdir / "lrt_accuracy.md").write_text(_markdown(wide.reset_index()))
    plot_lrt(lrt, outdir / "lrt_accuracy.png", cfg.epsilon)
    return [outdir / f"lrt_accuracy.{x}" for x in ("csv", "md", "png")]


def figure_steps(cfg: FigureConfig, ml: bool = True, lrt: bool = True) -> int:
    """Progress steps of :func:`write_figures`."""
    return (2 * (cfg.k_max + 1) if lrt else 0) + (2 * cfg.ml_targets if ml else 0)


__all__ = ["FigureConfig", "figure_steps", "lrt_figure", "ml_figure", "write_figures"]
