"""privmob: differentially private mobility statistics with per-person guarantees."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("privmob")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+local"

#: public names, imported on first use so that ``import privmob`` (and the CLI's start-up)
#: loads neither pandas nor DuckDB
_LAZY = {
    "Session": "privmob.session",
    "SessionLedger": "privmob.session",
    "Input": "privmob.session.options",
    "EngineOptions": "privmob.session.options",
    "LedgerOptions": "privmob.session.options",
    "ReleaseResult": "privmob.results",
    "ReleaseMetadata": "privmob.results",
    "Plan": "privmob.releases.specs",
    "OdSpec": "privmob.releases.specs",
    "PopulationSpec": "privmob.releases.specs",
    "PrivmobError": "privmob.errors",
    "InputError": "privmob.errors",
    "ConfigError": "privmob.errors",
    "BudgetError": "privmob.errors",
    "OutputError": "privmob.errors",
    "EngineError": "privmob.errors",
    "PrivmobWarning": "privmob.errors",
    "PureDP": "privmob.dp",
    "ApproxDP": "privmob.dp",
    "RhoZCDP": "privmob.dp",
    "PrivacyUnit": "privmob.dp",
    "MaxTripsPerUser": "privmob.dp",
    "MaxVisitsPerHour": "privmob.dp",
    "MaxVisitsPerWeek": "privmob.dp",
    "MaxEventsPerBin": "privmob.dp",
    "ReportSpec": "privmob.releases.report",
    "ZoneSeriesSpec": "privmob.releases.landmark_counts",
    "DensitySpec": "privmob.releases.specs",
    "SeriesSpec": "privmob.releases.specs",
    "Period": "privmob.dp",
    "Categorical": "privmob.releases.dimensions",
    "Distance": "privmob.releases.dimensions",
    "Duration": "privmob.releases.dimensions",
    "Mean": "privmob.releases.values",
    "TimeBins": "privmob.releases.dimensions",
    "Programme": "privmob.evaluate.programme",
    "ScheduleEntry": "privmob.evaluate.programme",
    "plan_programme": "privmob.evaluate.programme",
}

#: old public names, still served for one minor version with a FutureWarning naming the new one
_DEPRECATED = {
    "release": (
        "privmob.releases.specs",
        "pm.release is deprecated and will be removed in the next minor version: run a spec "
        "through a Session (Session.run(spec), or the kind's method such as Session.od) or "
        "call privmob.releases.specs.release",
    ),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    import importlib

    if name in _DEPRECATED:
        import warnings

        old, says = _DEPRECATED[name]
        warnings.warn(says, FutureWarning, stacklevel=2)  # the caller's line, every time
        return getattr(importlib.import_module(old), name)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privmob' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
