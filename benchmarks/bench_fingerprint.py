"""Benchmark: what the input's content fingerprint adds to the validation pass.

For each size, synthetic trips are written once to Parquet and CSV (benchmarks/out/); the
validation pass of `load_trips` is timed with and without the fingerprint aggregate (the same
single scan; best of 3), next to the time of the whole `privmob od` release on the same file.

    uv run python benchmarks/bench_fingerprint.py --sizes 1000000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

OUT = Path(__file__).resolve().parent / "out"


def data_for(n_trips: int) -> tuple[Path, Path, object]:
    from privmob.data.synth import default_tessellation, synth_trips

    OUT.mkdir(exist_ok=True)
    pq = OUT / f"trips_{n_trips}.parquet"
    csv = OUT / f"trips_{n_trips}.csv"  # written only when CSV is benchmarked
    tess = default_tessellation(263)
    if not pq.exists():
        synth_trips(
            pq,
            n_users=max(1, n_trips // 20),
            mean_trips_per_user=20.0,
            days=28,
            tessellation=tess,
            seed=1,
        )
    if not csv.exists() and "csv" in sys.argv:
        import duckdb

        duckdb.sql(f"COPY (SELECT * FROM '{pq}') TO '{csv}' (HEADER)")
    return pq, csv, tess


def time_load(path: Path, tess: object, fingerprint: bool) -> float:
    from privmob.data import sources
    from privmob.engine import make_engine

    original = sources.validate

    def no_fp(*args: object, **kw: object) -> object:
        # the same pass (parsed once, the same checks) without the fingerprint's aggregate
        return original(*args[:5], **kw)  # type: ignore[arg-type]

    best = float("inf")
    for _ in range(3):
        eng = make_engine("duckdb")

        patch = mock.patch.object(sources, "validate", original if fingerprint else no_fp)
        with patch:
            t = time.perf_counter()
            loaded = sources.load_trips(path, engine=eng, tessellation=tess)
            best = min(best, time.perf_counter() - t)
        assert (loaded.fingerprint is not None) == fingerprint
        eng.close()
    return best


def time_od(path: Path, tess_path: Path, tmp: Path) -> float:
    from privmob.cli import main

    t = time.perf_counter()
    try:
        main(
            [
                "od", str(path), "-t", str(tess_path), "-e", "1", "-T", "10",
                "--budget", "1000", "--ledger", str(tmp / "l.sqlite"),
                "-o", str(tmp / f"od{time.time_ns()}"), "--quiet",
                "--new-dataset-for-same-data",
            ]
        )  # fmt: skip
    except SystemExit as exc:
        assert not exc.code, exc.code
    return time.perf_counter() - t


def main() -> None:
    import tempfile

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--formats", nargs="+", default=["parquet", "csv"])
    ap.add_argument("--no-od", action="store_true", help="time the load only, not a release")
    args = ap.parse_args()
    for n in args.sizes:
        pq, csv, tess = data_for(n)
        tess_path = OUT / "grid263.geojson"
        if not tess_path.exists():
            tess.gdf.to_file(tess_path, driver="GeoJSON")  # type: ignore[attr-defined]
        for path in [p for p in (pq, csv) if p.suffix[1:] in args.formats]:
            without = time_load(path, tess, False)
            with_fp = time_load(path, tess, True)
            od = float("nan")
            if not args.no_od:
                with tempfile.TemporaryDirectory() as tmp:
                    od = time_od(path, tess_path, Path(tmp))
            print(
                f"{n:>11,} {path.suffix:8} load without fingerprint {without:6.2f} s, with "
                f"{with_fp:6.2f} s (+{with_fp - without:5.2f} s); whole od release {od:6.2f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
