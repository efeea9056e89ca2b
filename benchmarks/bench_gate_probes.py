"""The probes of issue 38, repeated: does any outcome that depends on the noise leave uncharged?

For D and D' (D with one more user, many trips at the busiest OD pair), N releases each (default
300) of ``od`` from Python, in two settings:

* ``layer``: ``--max-layer-size 1B`` with a GeoJSON layer (the size check that used to refuse
  after the noise, uncharged, naming the number of noisy flows);
* ``progress``: a ``progress=`` callback that raises at step k (k = 1, 2, ... in turn).

Each outcome is recorded as (exit state, message without paths, files left, charged or not). It
prints, per setting, the distribution of *uncharged* outcomes on D and on D' and a two-sample
chi-square test between them (they must be the same: no uncharged outcome may depend on the
data through the noise), and the share of outcomes that depend on the noise (a drawn value
exists) that were charged (must be 1).

    uv run --all-extras python benchmarks/bench_gate_probes.py --runs 300
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import box_grid, random_trips


def _inputs(work: Path, neighbour: bool) -> Path:
    trips = random_trips(400, 16, seed=5)
    if neighbour:  # one more user: 40 trips between the busiest pair
        top = trips.groupby(["origin", "destination"]).size().idxmax()
        extra = trips.head(40).assign(
            uid=10**6, tid=np.arange(10**6, 10**6 + 40), origin=top[0], destination=top[1]
        )
        trips = pd.concat([trips, extra], ignore_index=True)
    path = work / ("d1.parquet" if neighbour else "d0.parquet")
    trips.to_parquet(path)
    return path


class Stop(Exception):
    pass


def _one(data: Path, grid: Path, work: Path, setting: str, k: int) -> tuple[str, bool]:
    import privmob as pm
    from privmob.privacy.ledger import Ledger

    ledger, out = work / f"l-{setting}-{k}.sqlite", work / f"o-{setting}-{k}"
    seen: list[str] = []

    def progress(message: str) -> None:
        seen.append(message)
        if setting == "progress" and len(seen) == k:
            raise Stop(re.sub(r"[\d,.]+", "#", message))

    outcome = "done"
    try:
        with pm.Session(
            str(data),
            tessellation=str(grid),
            ledger=str(ledger),
            dataset="d",
            budget=pm.PureDP(10),
            progress=progress,
            max_layer_size=1 if setting == "layer" else None,
        ) as s:
            s.od(epsilon=1, max_trips=5, output=out, formats=["geojson"])
    except Stop as exc:
        outcome = f"stopped at: {exc}"
    except Exception as exc:  # a refusal: its class and message without numbers or paths
        outcome = f"{type(exc).__name__}: " + re.sub(r"/\S+|[\d,.]+", "#", str(exc))[:80]
    charged = ledger.exists() and bool(Ledger(ledger).entries("d"))
    files = sorted(p.name for p in out.rglob("*")) if out.exists() else []
    shutil.rmtree(out, ignore_errors=True)
    ledger.unlink(missing_ok=True)
    return f"{outcome} | files={len(files)}", charged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    from scipy.stats import chi2_contingency

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        grid = work / "grid.geojson"
        box_grid(4).gdf.to_file(grid, driver="GeoJSON")
        data = {n: _inputs(work, n) for n in (False, True)}
        for setting in ("layer", "progress"):
            t0 = time.perf_counter()
            uncharged: dict[bool, Counter[str]] = {False: Counter(), True: Counter()}
            paid = unpaid_after_noise = 0
            for neighbour, path in data.items():
                for i in range(args.runs):
                    k = 1 + i % 12  # the step at which the callback raises
                    outcome, charged = _one(path, grid, work, setting, k)
                    if charged:
                        paid += 1
                    else:
                        uncharged[neighbour][outcome] += 1
                        if "files=0" not in outcome or "feature" in outcome:
                            unpaid_after_noise += 1
            keys = sorted(set(uncharged[False]) | set(uncharged[True]))
            print(f"\n{setting}: {2 * args.runs} runs in {time.perf_counter() - t0:.0f} s")
            for key in keys:
                d0, d1 = uncharged[False][key], uncharged[True][key]
                print(f"  uncharged {d0:4d} (D) {d1:4d} (D') {key}")
            table = np.array([[uncharged[n][key] for key in keys] for n in (False, True)])
            table = table[:, table.sum(axis=0) > 0]
            if table.shape[1] > 1:
                _, p, _, _ = chi2_contingency(table)
                print(f"  D vs D' on uncharged outcomes: chi-square p = {p:.3f}")
            else:
                print("  D vs D' on uncharged outcomes: one outcome only (identical)")
            print(f"  charged: {paid}; uncharged with noise-dependent output: {unpaid_after_noise}")


if __name__ == "__main__":
    main()
