"""Screenshots of what a person sees: the HTML report and every kind's Jupyter display, each
opened in headless Chromium (not a benchmark: a look at the pictures, run by hand).

A synthetic city over the 263 NYC taxi zones (``city_synth.py``: skewed homes and workplaces,
weekday commutes) is released once per kind in one session; each release's ``_repr_html_`` is
written as a page and screenshot, and the report is written with ``write_html``. Prints one
line per picture (its path and size). Needs ../shared/data and a Chromium on the PATH.

    uv run --all-extras --group dev python benchmarks/screenshots.py --out /tmp/pm-screens
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import privmob as pm
from city_synth import TAXI_ZONES, CityConfig, write_city

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:16px;max-width:1100px}}</style></head>
<body><h1 style="font-size:16px">{title}</h1>{body}</body></html>"""

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"]


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("no headless Chromium on the PATH (Debian: apt-get install chromium)")


def screenshot(page: Path, png: Path, height: int) -> None:
    profile = tempfile.mkdtemp(prefix="pm-shot-")
    try:
        subprocess.run(
            [browser(), *FLAGS, f"--user-data-dir={profile}", f"--window-size=1200,{height}",
             f"--screenshot={png}", "--virtual-time-budget=4000", page.as_uri()],
            capture_output=True, timeout=180, check=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def releases(s: pm.Session, week: pm.Period) -> dict[str, Callable[[], Any]]:
    """One release of each kind that reads trips or trip points, at epsilon 1 per user."""
    return {
        "od": lambda: s.od(epsilon=1, max_trips=10, period=week),
        "counts-origin-hour": lambda: s.counts(
            epsilon=1, by=["origin", "hour"], max_records=10, period=week
        ),
        "counts-mean-duration": lambda: s.counts(
            epsilon=1,
            by=["origin"],
            max_records=10,
            period=week,
            value=pm.Mean("duration", 0, 120),
        ),
        "trips-per-hour": lambda: s.trips_per_hour(epsilon=1, max_records=10, period=week),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="pm-screens", help="folder of the pages and PNGs")
    ap.add_argument("--users", type=int, default=5_000)
    ap.add_argument("--days", type=int, default=14)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    city = write_city(out / "city", CityConfig(users=args.users, days=args.days))
    week = pm.Period("2024-01-01", "2024-01-08", bin="day")
    shots: list[tuple[str, Path, int]] = []
    with pm.Session(str(city.trips), tessellation=str(TAXI_ZONES), budget=pm.PureDP(100),
                    dataset="screens-trips") as s:  # fmt: skip
        for name, make in releases(s, week).items():
            page = out / f"{name}.html"
            page.write_text(PAGE.format(title=name, body=make()._repr_html_()))
            shots.append((name, page, 1600))
    with pm.Session(str(city.points), tessellation=str(TAXI_ZONES), budget=pm.PureDP(100),
                    dataset="screens-points") as s:  # fmt: skip
        report = s.report(epsilon=1, max_trips=10, period=pm.Period("2024-01-01", "2024-01-15"))
        page = out / "report-display.html"
        page.write_text(PAGE.format(title="report (display)", body=report._repr_html_()))
        shots.append(("report-display", page, 1600))
        html = report.write_html(out / "report" / "report.html", overwrite=True)["html"]
        shots.append(("report", Path(html), 6000))
        pop = s.population(epsilon=1, period=pm.Period("2024-01-01", "2024-01-15"))
        page = out / "population.html"
        page.write_text(PAGE.format(title="population", body=pop._repr_html_()))
        shots.append(("population", page, 1400))
    for name, page, height in shots:
        png = out / f"{name}.png"
        screenshot(page, png, height)
        print(f"{name:22s} {png}  ({png.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
