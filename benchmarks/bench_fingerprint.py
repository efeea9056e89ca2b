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
from suite import data_for

OUT = Path(__file__).resolve().parent / "out"


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

    from privmob.data.synth import default_tessellation

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--formats", nargs="+", default=["parquet", "csv"])
    ap.add_argument("--no-od", action="store_true", help="time the load only, not a release")
    args = ap.parse_args()
    for n in args.sizes:
        pq, _, tess_path = data_for("od-trips", n, OUT)
        csv = data_for("od-trips", n, OUT, fmt="csv")[0] if "csv" in args.formats else pq
        tess = default_tessellation(263)
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
