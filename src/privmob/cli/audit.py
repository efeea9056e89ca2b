"""``privmob audit``: membership attacks, empirical epsilon and the cost of a programme.

Audits are seeded simulations run by the data holder: they publish nothing and charge no
budget. ``lrt`` and ``ml`` attack a configurable release; ``epsilon`` turns an attack's error
counts into an epsilon lower bound; ``cost`` states what a programme of releases costs a person;
``figures`` writes the documented tables and plot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import numpy as np
import pandas as pd
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from privmob.cli import options as o
from privmob.cli.common import (
    LedgerOpt,
    QuietOpt,
    console,
    console_err,
    with_options,
)
from privmob.data.csv_cells import write_csv
from privmob.errors import ConfigError, InputError
from privmob.privacy.costs import PrivacyUnit

if TYPE_CHECKING:
    from privmob.audit.programme import ProgrammeLine

audit_app = typer.Typer(
    help="Privacy audits: membership attacks, empirical epsilon, programme cost.",
    no_args_is_help=True,
)

SeedOpt = Annotated[int, typer.Option("--seed", help="simulation seed (audits are seeded)")]
OutOpt = Annotated[Path | None, o.output("also write a CSV here")]
TripsOpt = Annotated[
    Path | None, typer.Option("--trips", help="trips/events input (any privmob input shape)")
]
TessOpt = Annotated[Path | None, o.tessellation("tiles for --trips")]
#: the ML attack's random forest (``ml``, ``figures``)
TreesOpt = Annotated[int, typer.Option("--trees", help="random forest size")]


@contextmanager
def _bar(total: int, label: str, quiet: bool) -> Iterator[Callable[[int], None] | None]:
    if quiet:
        yield None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console_err,
        transient=True,
    ) as prog:
        task = prog.add_task(label, total=total)
        yield lambda n: prog.advance(task, n)


def _print_frame(df: pd.DataFrame, title: str) -> None:
    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col))
    for row in df.itertuples(index=False):
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)


#: the options of both attacks (``lrt``, ``ml``): real trips instead of synthetic data, the
#: seed, a CSV of the results, no progress bar; added by :func:`with_options`, read by
#: :meth:`Attack.of`
ATTACK_OPTIONS: dict[str, tuple[Any, Any]] = {
    "trips": (TripsOpt, None),
    "tessellation": (TessOpt, None),
    "tile_id": (o.TileIdOpt, None),
    "seed": (SeedOpt, 0),
    "output": (OutOpt, None),
    "quiet": (QuietOpt, False),
}


@dataclass(frozen=True)
class Attack:
    """An attack command's :data:`ATTACK_OPTIONS`, as parsed."""

    trips: Path | None
    tessellation: Path | None
    tile_id: str | None
    seed: int
    output: Path | None
    quiet: bool

    @classmethod
    def of(cls, ctx: typer.Context) -> Attack:
        return cls(**{name: ctx.params[name] for name in ATTACK_OPTIONS})

    def load_trips(self) -> tuple[pd.DataFrame, int]:
        """With ``--trips``: its frame and number of zones (``--tessellation`` is required)."""
        from privmob.audit.trips import load_trips_frame

        if self.tessellation is None:
            raise ConfigError("--trips needs --tessellation", hint="pass -t tiles.geojson")
        return load_trips_frame(cast(Path, self.trips), self.tessellation, tile_id=self.tile_id)

    def write(self, results: pd.DataFrame) -> None:
        """The results as CSV, with ``--output``."""
        if self.output:
            write_csv(results, self.output)


@audit_app.command("lrt")
@with_options(ATTACK_OPTIONS)
def lrt(
    ctx: typer.Context,
    epsilon: Annotated[float, o.epsilon("claimed epsilon per period")] = 0.66,
    tau: Annotated[float, typer.Option("--tau", help="suppression threshold (0: none)")] = 100.0,
    noise: Annotated[
        str, typer.Option("--noise", help="laplace | laplace-rounded | discrete-laplace")
    ] = "laplace",
    style: Annotated[
        str, typer.Option("--style", help="trip (noise 1/eps per trip) | user (bound T, T/eps)")
    ] = "trip",
    bound: Annotated[int, typer.Option("--bound", "-T", help="trips per user (style user)")] = 70,
    periods: Annotated[int, typer.Option("--periods", help="periods the attacker sees")] = 1,
    k_max: Annotated[int, typer.Option("--k-max", help="targets with k = 0..K trips")] = 70,
    trials: Annotated[int, typer.Option("--trials", help="balanced trials per k")] = 10_000,
    scale_factor: Annotated[
        float, typer.Option("--scale-factor", help="x correct noise scale (<1: broken)")
    ] = 1.0,
    background: Annotated[
        Path | None,
        typer.Option("--background", help="per-cell counts c (.npy, or CSV/Parquet column)"),
    ] = None,
) -> None:
    """Likelihood-ratio membership attack with perfect knowledge (as in the critique of
    Bassolas et al.'s OD release)."""
    from privmob.audit.figures import with_epsilon_bounds
    from privmob.audit.lrt import (
        NoiseModel,
        ReleaseConfig,
        ReleaseStyle,
        background_from_counts,
        simulate,
        synthetic_background,
    )

    a = Attack.of(ctx)
    try:
        noise_model, release_style = NoiseModel(noise), ReleaseStyle(style)
    except ValueError as exc:
        raise ConfigError(
            str(exc),
            hint=f"--noise {' | '.join(NoiseModel)}; --style {' | '.join(ReleaseStyle)}",
        ) from None
    cfg = ReleaseConfig(epsilon, tau, noise_model, release_style, bound, periods, scale_factor)
    if background is not None and a.trips is not None:
        raise ConfigError("give --background or --trips, not both")
    user_ks: np.ndarray | None = None
    if background is not None:
        bg = background_from_counts(_read_counts(background))
        source = str(background)
    elif a.trips is not None:
        from privmob.audit.trips import background_counts, unique_trips_per_user

        df, _zones = a.load_trips()
        bg = background_from_counts(background_counts(df, "W"))
        user_ks = unique_trips_per_user(df, "W")
        source = f"weekly unique trips of {a.trips}"
    else:
        bg = synthetic_background()
        source = "synthetic log-normal counts, median 100"
    with _bar(k_max + 1, "attacking", a.quiet) as progress:
        res = simulate(cfg, range(k_max + 1), trials, bg, rng=a.seed, progress=progress)
    df = with_epsilon_bounds(res)
    a.write(df)
    show = df[(df.k % 5 == 0) | (df.k <= 2)][
        ["k", "epsilon_user", "accuracy", "bound", "fpr", "fnr", "epsilon_lower"]
    ]
    _print_frame(
        show,
        f"LRT attack: {cfg.style}-level {cfg.noise} noise b={cfg.scale:.4g}, tau={tau:g}, "
        f"{periods} period(s), {trials} trials/k; background: {source}",
    )
    over = df[df.accuracy > df.bound + 4.5 * 0.5 / np.sqrt(df.trials)]
    if len(over):
        console.print(
            f"[bold red]accuracy above the bound[/] for k = {', '.join(map(str, over.k))}: "
            "the release does not deliver its claimed user-level epsilon"
        )
    else:
        console.print("accuracy at or below the bound for every k (4.5 s.e. tolerance)")
    if user_ks is not None:
        _real_users(df, user_ks, epsilon)


def _real_users(df: pd.DataFrame, user_ks: np.ndarray, epsilon: float) -> None:
    """What the per-k accuracies mean for the dataset's real user-weeks."""
    from privmob.privacy.costs import membership_posterior_bound

    acc = df.set_index("k").accuracy
    ks = np.minimum(user_ks, int(acc.index.max()))
    per_user = acc.reindex(ks).to_numpy()
    claimed = membership_posterior_bound(epsilon)
    console.print(
        f"real user-weeks: {user_ks.size:,}; unique trips per week median "
        f"{int(np.median(user_ks))}, 90th percentile {int(np.percentile(user_ks, 90))}, max "
        f"{int(user_ks.max())} (k above --k-max counted at --k-max); mean attack accuracy over "
        f"them {per_user.mean():.4f}; share attacked with accuracy above the claimed "
        f"{claimed:.4f}: {(per_user > claimed).mean():.1%}",
        highlight=False,
    )


def _read_counts(path: Path) -> np.ndarray:
    if not path.exists():
        raise InputError(f"file not found: {path}", source=str(path))
    if path.suffix == ".npy":
        return np.asarray(np.load(path).ravel())
    df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    col = "count" if "count" in df.columns else df.columns[-1]
    vals = pd.to_numeric(df[col], errors="coerce")
    if vals.isna().any() or (vals < 0).any():
        raise InputError(
            "background counts must be integers >= 0", source=str(path), column=str(col)
        )
    return vals.to_numpy(dtype=np.int64)


@audit_app.command("ml")
@with_options(ATTACK_OPTIONS)
def ml(
    ctx: typer.Context,
    epsilon: Annotated[list[float] | None, o.epsilon("release epsilon (repeatable)")] = None,
    unit: Annotated[PrivacyUnit, o.unit("trip or user (bound T)")] = PrivacyUnit.TRIP,
    bound: Annotated[int, typer.Option("--bound", "-T", help="trips per user per day")] = 4,
    tau: Annotated[int, typer.Option("--tau", help="suppress noisy counts below tau")] = 0,
    weekday: Annotated[bool, typer.Option("--weekday", help="add weekday dummies")] = False,
    targets: Annotated[int, typer.Option("--targets", help="target users")] = 10,
    min_days: Annotated[int, typer.Option("--min-days", help="active days per half")] = 10,
    users: Annotated[int, typer.Option("--users", help="synthetic population size")] = 150,
    days: Annotated[int, typer.Option("--days", help="synthetic periods (days)")] = 120,
    zones: Annotated[int, typer.Option("--zones", help="synthetic zones")] = 8,
    trees: TreesOpt = 100,
    models: Annotated[str, typer.Option("--models", help="logistic,forest")] = "logistic,forest",
) -> None:
    """Pyrgelis-style ML membership attack on daily OD matrices (as in Kohli, Aiken and
    Blumenstock's appendix)."""
    from privmob.audit.ml import PrivateOD, attack, auc_table, from_trips
    from privmob.audit.ml import synthetic_membership_data as synth

    a = Attack.of(ctx)
    eps = epsilon or [0.1, 0.5, 1.0]
    model_list = [m.strip() for m in models.split(",") if m.strip()]
    if a.trips is not None:
        df, k = a.load_trips()
        data = from_trips(df, k, n_targets=targets, min_days=min_days, bounds=(bound,), seed=a.seed)
    else:
        data = synth(
            users=users,
            zones=zones,
            periods=days,
            n_targets=targets,
            min_days=min_days,
            bounds=(bound,),
            seed=a.seed,
        )
    releases = [PrivateOD(e, unit, bound if unit == PrivacyUnit.USER else 1, tau=tau) for e in eps]
    with _bar(data.targets.shape[0], "training", a.quiet) as progress:
        res = attack(
            data,
            releases,
            models=model_list,
            weekday=weekday,
            n_estimators=trees,
            rng=a.seed,
            progress=progress,
        )
    a.write(res)
    table = auc_table(res).reset_index()
    table.columns = [str(c) for c in table.columns]
    _print_frame(table, f"mean test AUC over {int(res.targets.max())} targets")


@audit_app.command("epsilon")
def epsilon_cmd(
    false_positives: Annotated[int, typer.Option("--fp", help="non-members guessed 'in'")],
    negatives: Annotated[int, typer.Option("--negatives", help="non-member trials")],
    false_negatives: Annotated[int, typer.Option("--fn", help="members guessed 'out'")],
    positives: Annotated[int, typer.Option("--positives", help="member trials")],
    delta: Annotated[float, typer.Option("--delta")] = 0.0,
    confidence: Annotated[float, typer.Option("--confidence")] = 0.95,
    claimed: Annotated[float | None, typer.Option("--claimed", help="claimed epsilon")] = None,
) -> None:
    """Empirical epsilon lower bound from an attack's errors (Clopper-Pearson intervals)."""
    from privmob.audit.epsilon import empirical_epsilon

    a = empirical_epsilon(
        false_positives,
        negatives,
        false_negatives,
        positives,
        delta=delta,
        confidence=confidence,
        claimed=claimed,
    )
    console.print(a.describe(), highlight=False)
    if a.violated:
        raise typer.Exit(1)


@audit_app.command("cost")
def cost(
    epsilon: Annotated[float | None, o.epsilon("epsilon of each release")] = None,
    unit: Annotated[PrivacyUnit, o.unit("unit of each release")] = PrivacyUnit.USER,
    max_trips: Annotated[int | None, o.max_trips("most trips of one person per release")] = None,
    releases: Annotated[int, typer.Option("--releases", help="number of releases")] = 1,
    tau: Annotated[
        float | None,
        typer.Option("--tau", help="threshold on a PRIVATE key set: adds delta"),
    ] = None,
    user_trips: Annotated[
        int | None,
        typer.Option("--user-trips", help="a person's trips over the whole programme"),
    ] = None,
    max_cells: Annotated[
        int | None,
        typer.Option(
            "--max-cells",
            help="most cells one person adds 1 to per release (at most once each): "
            "per-cell composition, shown next to group privacy",
        ),
    ] = None,
    ledger: LedgerOpt = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="read every release of it from --ledger")
    ] = None,
) -> None:
    """Per-person cost of a release programme: group privacy, per-cell composition and what
    an attacker's posterior can reach."""
    from privmob.audit.programme import ledger_programme, repeated, trips_over_releases
    from privmob.privacy.costs import membership_posterior_bound
    from privmob.privacy.ledger import Ledger

    if dataset is not None:
        led = Ledger(ledger)
        lines = ledger_programme(led, dataset, max_units=max_trips, cells=max_cells)
        title = f"releases of '{dataset}' in {led.path}"
    elif epsilon is not None:
        if user_trips is not None:
            if unit != PrivacyUnit.TRIP:
                raise ConfigError("--user-trips is for trip-level releases", hint="--unit trip")
            total = trips_over_releases(epsilon, [1] * user_trips)
            console.print(
                f"a person with {user_trips} trips over {releases} trip-level releases at "
                f"epsilon {epsilon:g} loses epsilon = {total.epsilon:.6g} "
                f"(releases without their trips cost them nothing); membership posterior "
                f"bound {membership_posterior_bound(total.epsilon):.6f}",
                highlight=False,
            )
            return
        lines = repeated(
            epsilon, releases, unit=unit, max_units=max_trips, tau=tau, cells=max_cells
        )
        title = f"{releases} release(s) at epsilon {epsilon:g} per {unit}"
    else:
        raise ConfigError("give --epsilon (a programme) or --dataset (from the ledger)")
    table = Table(title=title)
    for col in ("release", "eps", "delta", "unit", "group", "eps/person", "delta/person"):
        table.add_column(col)
    for col in ("total eps", "total delta", "posterior"):
        table.add_column(col)
    shown = lines if len(lines) <= 12 else [*lines[:3], *lines[-3:]]
    for ln in shown:
        rc, uc, cu = ln.release_cost, ln.user_cost, ln.cumulative
        table.add_row(
            ln.label,
            f"{rc.epsilon:.6g}",
            f"{rc.delta:.3g}",
            str(rc.unit),
            str(ln.group_size or "-"),
            f"{uc.epsilon:.6g}",
            f"{uc.delta:.3g}",
            f"{cu.epsilon:.6g}",
            f"{cu.delta:.3g}",
            f"{ln.posterior_bound:.6f}",
        )
    console.print(table)
    last = lines[-1]
    console.print(
        f"total per person: {last.cumulative.describe()}; membership posterior bound "
        f"(50% prior) {last.posterior_bound:.6f}",
        highlight=False,
    )
    _print_delta_rules(lines)
    if tau is not None and lines[0].release_cost.delta:
        console.print(
            f"noise + thresholding on a private key set: delta per cell "
            f"{lines[0].release_cost.delta:.5g} (0.5 exp(-eps (tau - 1)))",
            highlight=False,
        )


def _print_delta_rules(lines: list[ProgrammeLine]) -> None:
    """Both per-person rules of the first release, and which one the totals use."""
    first = lines[0]
    if first.cell_rule is None:
        return
    rules = [("per-cell composition", first.cell_rule, f"{first.cells} cells")]
    if first.group_rule is not None:
        rules.insert(0, ("group privacy", first.group_rule, f"{first.group_size} units"))
    for name, rule, over in rules:
        used = " (used)" if rule == first.user_cost else ""
        console.print(
            f"{name} over {over}: epsilon {rule.epsilon:.6g}, delta {rule.delta:.3g} per "
            f"person per release{used}",
            highlight=False,
        )


@audit_app.command("figures")
def figures(
    outdir: Annotated[Path, o.output("directory for the files")],
    trials: Annotated[int, typer.Option("--trials", help="LRT trials per k")] = 10_000,
    user_bound: Annotated[int, typer.Option("--bound", "-T", help="privmob's T")] = 10,
    targets: Annotated[int, typer.Option("--targets", help="ML attack targets")] = 10,
    trees: TreesOpt = 100,
    no_ml: Annotated[bool, typer.Option("--no-ml", help="skip the ML attack")] = False,
    no_lrt: Annotated[bool, typer.Option("--no-lrt", help="skip the LRT attack")] = False,
    seed: SeedOpt = 0,
    quiet: QuietOpt = False,
) -> None:
    """Write the audit tables and plot (docs/audits.md) into a directory."""
    from privmob.audit.figures import FigureConfig, figure_steps, write_figures

    cfg = FigureConfig(
        trials=trials, user_bound=user_bound, ml_targets=targets, trees=trees, seed=seed
    )
    with _bar(figure_steps(cfg, not no_ml, not no_lrt), "auditing", quiet) as progress:
        paths = write_figures(outdir, cfg, ml=not no_ml, lrt=not no_lrt, progress=progress)
    for p in paths:
        console.print(f"wrote {p}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
