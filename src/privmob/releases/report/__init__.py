"""DP mobility report (SPEC 4.2): dp_mobility_report's 15 analyses without its leaks."""

from .build import exact_counts, mobility_report, report_cost, time_bins
from .config import ANALYSES, DEFAULT_RANGES, DISTRIBUTIONS, ReportConfig
from .inputs import Tiles, load_report_input, trip_points_from_checkins
from .spec import ReportSpec

__all__ = [
    "ANALYSES",
    "DEFAULT_RANGES",
    "DISTRIBUTIONS",
    "ReportConfig",
    "ReportSpec",
    "Tiles",
    "exact_counts",
    "load_report_input",
    "mobility_report",
    "report_cost",
    "time_bins",
    "trip_points_from_checkins",
]
