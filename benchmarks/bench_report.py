"""Benchmark: `privmob report` against dp_mobility_report (DPMR) on the same trip points.

For each tessellation and size, synthetic trip points (10 trips per user, exactly two points
per trip, 28 days) are generated once into benchmarks/out/ and written as CSV (the default;
``--input parquet`` for Parquet). Tessellations (``--tessellations``, default both):

* ``taxi-zones``: the 263 NYC taxi-zone polygons of ../shared/data/nyc_taxi_zones, the points
  drawn inside them (the polygon path: point-in-polygon on every coordinate);
* ``grid``: a 263-cell square grid over New York (GeoJSON; read back as polygons too).

Each run happens in a fresh child process, which reports its wall time and peak memory (VmHWM):

* privmob: load + validate + tile assignment, bounding to M, all 15 analyses in DuckDB, secure
  noise, DP quantiles, ledger charge, HTML + JSON + Parquet output. By default the command
  people run, ``privmob report`` (``python -m privmob report ... -o report.html`` with a new
  ledger), timed as a whole process from outside, its steps read from its own step lines and
  its CPU and peak memory from the operating system's accounting of that child (``wait4``);
  ``--privmob-via api`` runs the Python API in a ``python -c`` child instead (the way this
  benchmark ran until 2026-11-27: it also pays the interpreter's teardown at exit, 0.2-0.25
  CPU seconds at 1M trips, which the command skips, ``privmob.cli.entry``);
* DPMR (with --with-dpmr): ``DpMobilityReport(df, tessellation, privacy_budget, user_privacy,
  max_trips_per_user).to_file(html)`` in a throw-away virtual environment that this script
  creates with uv (DPMR needs old numpy/pandas/scipy pins), reading the same file.

Both environments are byte-compiled once, untimed, before the runs (as ``pip install`` does;
uv does not, and PYTHONDONTWRITEBYTECODE=1 would make every run compile its imports). Each
child reports wall time, CPU seconds (all threads) and peak memory; ``--memory-limit`` makes
privmob split the users into buckets (out of core). Printed per row: both tools' time and
peak, privmob's start-up (the process wall time minus the sum of its timed steps:
tessellation, reading and validating, each step of the report, writing), the speed-up
(DPMR time / privmob time) and the memory ratio (privmob / DPMR).

    uv run python benchmarks/bench_report.py --sizes 100000
    uv run python benchmarks/bench_report.py --sizes 100000 1000000 --with-dpmr
    nice -n 10 uv run python benchmarks/bench_report.py --sizes 100000000 --memory-limit 12GB \
        --tessellations grid --input parquet
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import compile_bytecode

OUT = Path(__file__).resolve().parent / "out"
DPMR_VENV = Path(os.environ.get("DPMR_VENV", "/tmp/dpmr"))
DPMR_PINS = [
    "dp_mobility_report",
    "numpy<2",
    "scipy<=1.13.1",
    "pandas<3",
    "scikit-learn<1.6",
    "geopandas<1.1",
    "diffprivlib<0.6.6",
    "opencv-python<4.11",
    "matplotlib<3.10",
    "pyarrow<18",  # to read the same Parquet input
]
EPSILON, M = 1.0, 10
SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TAXI_ZONES = SHARED / "nyc_taxi_zones" / "taxi_zones.geojson"
TESSELLATIONS = ("taxi-zones", "grid")
PERIOD = ("2024-01-01", "2024-01-29")

PEAK = """
def _cpu_s():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

def _peak_gb():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) / 1024**2
"""

PRIVMOB_CHILD = (
    PEAK
    + """
import json, sys, tempfile, time
t0 = time.perf_counter()
from pathlib import Path
from privmob.data.sources import load_trip_points
from privmob.data.tessellation_input import load_tessellation
from privmob.engine import DuckDBEngine
from privmob.privacy.ledger import Ledger
from privmob.releases.base import Accountant
from privmob.releases.report import ReportConfig, Tiles, mobility_report
from privmob.render.report_files import write_report
data, tess_path, eps, m, start, end, memory_limit = sys.argv[1:8]
steps = {}
last = [t0]
def step(name):  # the time since the previous step, under this step's name
    now = time.perf_counter()
    steps[name] = steps.get(name, 0.0) + now - last[0]
    last[0] = now
step("imports")
tmp = Path(tempfile.mkdtemp())
tess = load_tessellation(tess_path)
step("tessellation")
eng = DuckDBEngine(memory_limit=memory_limit or None)
points = load_trip_points(data, engine=eng, tessellation=tess)
step("reading and validating")
cfg = ReportConfig.build(epsilon=float(eps), max_trips=int(m), period=(start, end))
acc = Accountant(Ledger(tmp / "ledger.sqlite"), "bench", budget=1e9)
names = []
def progress(s):  # a step ends when the next one is announced
    step(names[-1] if names else "report set-up")
    names.append(s)
rel = mobility_report(eng, points, Tiles.from_tessellation(tess), cfg, acc, progress=progress)
step(names[-1])
write_report(rel, tmp / "report.html")
step("writing")
buckets = sum("user bucket" in s for s in names) or 1
print(json.dumps({"wall_s": time.perf_counter() - t0, "peak_gb": _peak_gb(), "buckets": buckets,
                  "cpu_s": _cpu_s(), "steps": steps}))
"""
)

DPMR_CHILD = (
    PEAK
    + """
import json, sys, tempfile, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
import geopandas as gpd, pandas as pd
from dp_mobility_report import DpMobilityReport
data, tess_path, eps, m = sys.argv[1:5]
df = pd.read_csv(data) if data.endswith(".csv") else pd.read_parquet(data)
df["datetime"] = pd.to_datetime(df["datetime"], utc=True, format="ISO8601").dt.tz_localize(None)
tess = gpd.read_file(tess_path)
if "tile_id" not in tess.columns:
    tess = tess.rename(columns={"LocationID": "tile_id", "zone": "tile_name"})
tess["tile_id"] = tess["tile_id"].astype(str)
rep = DpMobilityReport(df, tess, privacy_budget=float(eps), user_privacy=True,
                       max_trips_per_user=int(m))
rep.to_file(tempfile.mkdtemp() + "/dpmr.html")
print(json.dumps({"wall_s": time.perf_counter() - t0, "peak_gb": _peak_gb(), "cpu_s": _cpu_s()}))
"""
)


def data_for(n_trips: int, tessellation: str, fmt: str) -> tuple[Path, Path]:
    """The input file (``fmt``: csv or parquet) and the tessellation file for ``n_trips``."""
    import duckdb

    from privmob.data.synth import default_tessellation, synth_trip_points

    sys.path.insert(0, str(OUT.parent))
    from suite import DAYS, START, synth_report_points

    OUT.mkdir(exist_ok=True)
    if tessellation == "grid":
        path = OUT / f"trip_points_{n_trips}.parquet"
        tess_path = OUT / "grid263.geojson"
        if not tess_path.exists():
            default_tessellation(263).gdf.to_file(tess_path, driver="GeoJSON")
    else:
        path = OUT / f"taxi_trip_points_{n_trips}.parquet"
        tess_path = TAXI_ZONES
    if not path.exists():
        t0 = time.perf_counter()
        if tessellation == "grid":
            synth_report_points(path, n_users=max(1, n_trips // 10))
        else:  # the same model, the places drawn inside the taxi zones
            synth_trip_points(
                path,
                n_users=max(1, n_trips // 10),
                mean_trips_per_user=10.0,
                trips_sigma=0.0,
                extra_points_per_trip=0.0,
                days=DAYS,
                start=START,
                tessellation=tess_path,
                seed=1,
            )
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f}s", flush=True)
    if fmt == "csv":
        csv = path.with_suffix(".csv")
        if not csv.exists():
            duckdb.sql(f"COPY (SELECT * FROM '{path}') TO '{csv}' (HEADER)")
        path = csv
    return path, tess_path


def install_dpmr() -> Path:
    py = DPMR_VENV / "bin" / "python"
    if py.exists():
        probe = subprocess.run(
            [str(py), "-c", "import dp_mobility_report, pyarrow"], capture_output=True
        )
        if probe.returncode == 0:
            return py
    print(f"installing dp_mobility_report into {DPMR_VENV} (uv) ...", flush=True)
    if not py.exists():
        subprocess.run(["uv", "venv", "--python", "3.11", str(DPMR_VENV)], check=True)
    subprocess.run(["uv", "pip", "install", "--python", str(py), *DPMR_PINS], check=True)
    return py


def run_cli(
    data: Path, tess: Path, eps: float, start: str, end: str, memory_limit: str, timeout: float
) -> dict[str, Any]:
    """``privmob report`` as people run it, a whole process: wall time from outside, the steps
    from its step lines (``✓ <step> (<seconds>s)`` on stderr), CPU seconds and peak memory
    (``ru_maxrss``) of that one child from ``wait4``."""
    out = Path(tempfile.mkdtemp(prefix="bench-report-"))
    argv = [sys.executable, "-m", "privmob", "report", str(data), "-t", str(tess)]
    argv += ["-e", str(eps), "-T", str(M), "--start", start, "--end", end]
    argv += ["-o", str(out / "report.html"), "--ledger", str(out / "ledger.sqlite")]
    argv += ["--budget", str(eps)] + (["--memory-limit", memory_limit] if memory_limit else [])
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        stop = threading.Timer(timeout, child.kill)
        stop.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except BaseException:
            child.kill()
            raise
        finally:
            stop.cancel()
        seconds = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    shutil.rmtree(out, ignore_errors=True)
    if seconds >= timeout:
        raise subprocess.TimeoutExpired(argv, timeout)
    if child.returncode != 0:
        raise RuntimeError(f"privmob report failed ({child.returncode}):\n{text[-3000:]}")
    steps: dict[str, float] = {}
    for name, secs in re.findall(r"^✓ (.+) \(([0-9.]+)s\)$", text, flags=re.M):
        steps[name] = steps.get(name, 0.0) + float(secs)
    return {
        "process_s": seconds,
        "steps": steps,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_gb": usage.ru_maxrss / 1024**2,  # KiB on Linux
        "buckets": sum("user bucket" in name for name in steps) or 1,
    }


def run(python: str, code: str, *args: str, timeout: float) -> dict[str, float]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    t0 = time.perf_counter()
    res = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    if res.returncode != 0:
        raise RuntimeError(f"child failed:\n{res.stderr[-3000:]}")
    out = json.loads([ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1])
    out["process_s"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000], help="trips")
    ap.add_argument(
        "--tessellations", nargs="+", default=list(TESSELLATIONS), choices=TESSELLATIONS
    )
    ap.add_argument("--input", choices=("csv", "parquet"), default="csv")
    ap.add_argument("--epsilon", type=float, default=EPSILON)
    ap.add_argument("--with-dpmr", action="store_true", help="install and run DPMR too")
    ap.add_argument("--dpmr-max", type=int, default=1_000_000, help="largest size for DPMR")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument(
        "--privmob-via",
        choices=("cli", "api"),
        default="cli",
        help="privmob's side: the `privmob report` command (default) or the Python API in a "
        "python -c child",
    )
    ap.add_argument(
        "--memory-limit",
        default="",
        help="privmob's memory limit (e.g. 6GB): above it the users are split into buckets",
    )
    args = ap.parse_args()
    dpmr_py = install_dpmr() if args.with_dpmr else None
    import privmob

    compile_bytecode(sys.executable, str(Path(privmob.__file__).parent))
    if dpmr_py is not None:
        compile_bytecode(str(dpmr_py))
    rows = []
    for tessellation in args.tessellations:
        for n in args.sizes:
            data, tess = data_for(n, tessellation, args.input)
            if args.privmob_via == "cli":
                pm = run_cli(data, tess, args.epsilon, *PERIOD, args.memory_limit, args.timeout)
            else:
                pm = run(
                    sys.executable,
                    PRIVMOB_CHILD,
                    str(data),
                    str(tess),
                    str(args.epsilon),
                    str(M),
                    *PERIOD,
                    args.memory_limit,
                    timeout=args.timeout,
                )
            work = sum(v for k, v in pm["steps"].items() if k != "imports")
            row = {
                "tessellation": tessellation,
                "startup_s": pm["process_s"] - work,
                "steps": {k: round(v, 2) for k, v in pm["steps"].items()},
                "trips": n,
                "privmob_s": pm["process_s"],
                "privmob_gb": pm["peak_gb"],
                "buckets": pm["buckets"],
                "privmob_cpu_s": pm["cpu_s"],
            }
            if dpmr_py is not None and n <= args.dpmr_max:
                try:
                    dp = run(
                        str(dpmr_py),
                        DPMR_CHILD,
                        str(data),
                        str(tess),
                        str(args.epsilon),
                        str(M),
                        timeout=args.timeout,
                    )
                except subprocess.TimeoutExpired:
                    print(f"DPMR did not finish within {args.timeout:.0f}s at {n:,} trips")
                    rows.append(row)
                    continue
                row.update(
                    dpmr_s=dp["process_s"],
                    dpmr_gb=dp["peak_gb"],
                    dpmr_cpu_s=dp["cpu_s"],
                    speedup=dp["process_s"] / pm["process_s"],
                    memory_ratio=pm["peak_gb"] / dp["peak_gb"],
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(
        "\ntessellation      trips  privmob s  start-up s  (CPU s)  privmob GB    DPMR s   "
        "DPMR GB  speed-up  mem privmob/DPMR"
    )
    for r in rows:
        print(
            f"{r['tessellation']:<11} {r['trips']:>10,}  {r['privmob_s']:>9.1f}"
            f"  {r['startup_s']:>10.2f}  {r['privmob_cpu_s']:>7.1f}  {r['privmob_gb']:>10.2f}"
            + (
                f"  {r['dpmr_s']:>8.1f}  {r['dpmr_gb']:>8.2f}  {r['speedup']:>7.1f}x"
                f"  {r['memory_ratio']:>14.2f}"
                if "dpmr_s" in r
                else ""
            )
        )
    print(
        f"(epsilon {args.epsilon}, M {M}, user-level, {args.input.upper()} input; privmob via "
        f"{'`privmob report`' if args.privmob_via == 'cli' else 'the Python API'}; wall time "
        "of the whole child process incl. imports; start-up = that wall time minus privmob's "
        "timed steps (interpreter start, imports and exit; the steps are in each JSON line); "
        "CPU s = user + sys of all its threads; peak = VmHWM or ru_maxrss)"
    )


if __name__ == "__main__":
    main()
