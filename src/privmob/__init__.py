"""privmob: differentially private mobility statistics with per-person guarantees."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    __version__: str


def _version() -> str:
    """The installed distribution's version, read on first use of ``privmob.__version__``
    (the tessellation cache's keys use it before a release's plan): from the first
    ``privmob-*.dist-info`` on ``sys.path``, as :func:`importlib.metadata.version` finds it,
    without importing :mod:`importlib.metadata` (it and the e-mail parser it brings cost about
    0.04 CPU seconds, a seventh of what the plan line may take: issue 43). Anything else (an
    egg, a zip, two candidates in one folder, no ``Version`` header) is left to
    :mod:`importlib.metadata`."""
    import os
    import sys
    from importlib.machinery import PathFinder

    # another finder that knows distributions is asked first by importlib.metadata
    others = [f for f in sys.meta_path if f is not PathFinder and hasattr(f, "find_distributions")]
    for entry in [] if others else sys.path:
        try:
            names = os.listdir(entry or ".")
        except (FileNotFoundError, PermissionError):
            continue  # importlib.metadata skips what it cannot list
        except OSError:
            break  # a zip or another archive: importlib.metadata's own search
        own = [n for n in names if _names_privmob(n)]
        if own:
            if len(own) == 1 and own[0].lower().endswith(".dist-info"):
                found = _header_version(os.path.join(entry or ".", own[0], "METADATA"))
                if found is not None:
                    return found
            break
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("privmob")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0+local"


def _names_privmob(name: str) -> bool:
    """True for a ``privmob`` distribution's metadata folder (importlib.metadata's match: the
    name before the first ``-``, normalised)."""
    low = name.lower()
    if not low.endswith((".dist-info", ".egg-info")):
        return False
    project = low.rpartition(".")[0].partition("-")[0]
    return project.replace(".", "_") == "privmob"


def _header_version(path: str) -> str | None:
    """The ``Version`` header of a core-metadata file (None if it has none or is unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    return None  # the headers end at the first empty line
                key, sep, value = line.partition(":")
                if sep and key == "Version":
                    return value.strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None


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
    "PerUser": "privmob.dp",
    "ReportSpec": "privmob.releases.report",
    "ZoneSeriesSpec": "privmob.releases.landmark_counts",
    "DensitySpec": "privmob.releases.specs",
    "SeriesSpec": "privmob.releases.specs",
    "Period": "privmob.dp",
    "Categorical": "privmob.releases.dimensions",
    "Distance": "privmob.releases.dimensions",
    "Duration": "privmob.releases.dimensions",
    "Mean": "privmob.releases.values",
    "register_kind": "privmob.session.releases",
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
    **{
        typed: (
            "privmob.dp",
            f"pm.{typed} is deprecated and will be removed in the next minor version: use "
            f"per_user=pm.PerUser(n, {unit!r}){where} (the one per-user bound of every release)",
        )
        for typed, unit, where in (
            ("MaxTripsPerUser", "trips", ""),
            ("MaxVisitsPerWeek", "visits", ""),
            ("MaxEventsPerBin", "events", ""),
            ("MaxVisitsPerHour", "events", ' with freq="1h"'),
        )
    },
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    import importlib

    if name == "__version__":
        globals()[name] = value = _version()
        return value

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
