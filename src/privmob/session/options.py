"""The Session's constructor in a few typed groups: how the input is read (:class:`Input`), which
engine runs (:class:`EngineOptions`) and who pays (:class:`LedgerOptions`).

``pm.Session(data, tessellation=..., input=pm.Input(shape="events", timezone="Europe/Paris"),
engine=pm.EngineOptions("spark", memory_limit="8GB"), ledger=pm.LedgerOptions("l.sqlite",
dataset="cdr", budget=pm.PureDP(5)))`` is the same session as the keywords of each field
(``shape=``, ``timezone=``, ``engine="spark"``, ``memory_limit=``, ``ledger="l.sqlite"``, ...):
the groups are the constructor's one spelling, the fields given as keywords its earlier one,
still working for one minor version with a :class:`DeprecationWarning` at the caller's line
(:func:`flat_keywords`); a group and one of its own keywords together are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from privmob.errors import ConfigError

if TYPE_CHECKING:
    from privmob.dp import Budget, PrivacyUnit
    from privmob.engine.base import Engine

#: a constructor keyword's value, as :func:`spread` is given it
Value = TypeVar("Value")


@dataclass(frozen=True)
class Input:
    """How the session reads its input (see :class:`~privmob.session.Session`)."""

    shape: str = "auto"
    columns: dict[str, str] | None = None
    delimiter: str | None = None
    names: Sequence[str] | None = None
    timezone: str = "UTC"
    input_timezone: str | None = None
    tile_id: str | None = None
    cells: str | Path | None = None
    trip_rule: str = "events"
    stay_distance: float | None = None
    stay_minutes: float | None = None
    header: bool = True
    uid_from_filename: bool = False


@dataclass(frozen=True)
class EngineOptions:
    """Which engine runs the releases, and its limits."""

    engine: str | Engine = "duckdb"
    memory_limit: str | int | None = None
    spill_dir: str | Path | None = None
    spark_master: str | None = None
    spark_conf: Sequence[str] | Mapping[str, str] | None = None


@dataclass(frozen=True)
class LedgerOptions:
    """Who pays: the ledger, the dataset and its budget."""

    ledger: str | Path | None = None
    dataset: str | None = None
    budget: Budget | float | None = None
    unit: PrivacyUnit | str = "user"
    group_size: int | None = None
    new_dataset_for_same_data: bool = False


GROUPS = {"input": Input, "engine": EngineOptions, "ledger": LedgerOptions}


def flat_keywords(keywords: Mapping[str, object], defaults: Mapping[str, object]) -> list[str]:
    """The fields of a group given as the constructor's own keywords (``budget=10``, not
    ``ledger=pm.LedgerOptions(budget=10)``), told with a :class:`DeprecationWarning` at the
    caller's line naming the groups to give them in."""
    flat: dict[str, list[str]] = {}
    for group, cls in GROUPS.items():
        for f in fields(cls):
            value = keywords.get(f.name, defaults.get(f.name))
            if isinstance(value, cls) or value == defaults.get(f.name):
                continue  # the group itself (engine=, ledger=), or left out
            flat.setdefault(group, []).append(f.name)
    if flat:
        from privmob.surface import warn_caller

        names = ", ".join(f"{n}=" for names in flat.values() for n in names)
        groups = ", ".join(
            f"{g}=pm.{GROUPS[g].__name__}({', '.join(f'{n}=...' for n in names)})"
            for g, names in flat.items()
        )
        warn_caller(
            f"Session({names}) is deprecated and will be removed in the next minor version: "
            f"give them in their typed groups, {groups}",
            DeprecationWarning,
        )
    return [n for names in flat.values() for n in names]


def spread(keywords: dict[str, Value], defaults: Mapping[str, object]) -> dict[str, Value]:
    """The constructor's keywords with each group given as ``input=``, ``engine=`` or
    ``ledger=`` spread into its fields; a field given both ways is refused."""
    out = dict(keywords)
    for group, cls in GROUPS.items():
        value = out.get(group)
        if not isinstance(value, cls):
            continue
        for f in fields(cls):
            if f.name != group and out.get(f.name, defaults.get(f.name)) != defaults.get(f.name):
                raise ConfigError(
                    f"{f.name}= is given twice: as a keyword and in {group}=",
                    hint=f"give it in one place (pm.{cls.__name__}({f.name}=...) or the keyword)",
                )
            out[f.name] = getattr(value, f.name)
    return out
