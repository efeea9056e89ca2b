"""``privmob demo``: synthetic trips → a weekly private OD matrix, end to end, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privmob.cli import common as c
from privmob.cli import options as o


def demo(
    output: Annotated[Path, o.output("demo folder")] = Path("privmob-demo"),
    users: Annotated[int, typer.Option("--users", help="synthetic users")] = 20_000,
    epsilon: Annotated[float, o.epsilon("epsilon of each release")] = 1.0,
    max_trips: Annotated[int, o.max_trips("trips per user")] = 20,
    quiet: c.QuietOpt = False,
) -> None:
    """Generate synthetic trips, release weekly private OD matrices, show what it cost.

    Everything is written to the demo folder: the tessellation, the synthetic trips, a
    privacy ledger (budget epsilon = 100 for the dataset 'demo-trips') and the release.
    """
    from privmob.data import load_trips
    from privmob.data.synth import default_tessellation, synth_trips
    from privmob.domain import Period
    from privmob.engine import DuckDBEngine
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.od import od_matrix
    from privmob.releases.publish import Output

    output.mkdir(parents=True, exist_ok=True)
    with c.Steps(quiet) as step:
        step("making a square grid over New York")
        tess = default_tessellation()
        tess_path = output / "tessellation.geojson"
        tess.gdf.to_file(tess_path, driver="GeoJSON")
        step(f"generating synthetic trips for {users:,} users over 28 days")
        data = output / "trips.parquet"
        summary = synth_trips(
            data, n_users=users, start="2024-01-01", days=28, tessellation=tess, seed=0
        )
        out = Output(output / "od", overwrite=True).check()  # staged, charged, renamed
        acct = Accountant(Ledger(output / "ledger.sqlite"), "demo-trips", budget=100.0, output=out)
        step("reading and validating the trips")
        with DuckDBEngine() as engine:
            trips = load_trips(data, engine=engine, tessellation=tess)
            release = od_matrix(
                trips,
                tessellation=tess,
                epsilon=epsilon,
                accountant=acct,
                max_trips=max_trips,
                period=Period.parse("week", "2024-01-01", "2024-01-29"),
                step=step,
            )
        paths = out.written
    c.console.print(
        f"synthetic input: {data} ({summary.rows:,} trips of {summary.users:,} "
        f"users), tessellation: {tess_path} ({tess.k} tiles)"
    )
    c.print_release_summary(release, paths, acct)
    c.console.print(f"see the ledger: privmob ledger show --ledger {output / 'ledger.sqlite'}")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
