"""Relations in the engine: the handle of a validated input (or of a relation derived from one)
and fresh names for the views the pipeline creates."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privmob.engine.base import Engine

_counter = itertools.count()


@dataclass
class Loaded:
    """A validated input exposed in the engine as a view with the canonical schema."""

    view: str
    source: str
    shape: str
    engine: Engine
    columns: list[str] = field(default_factory=list)
    # derived relations (e.g. trips built from events): the input they were built from and
    # how, so work can be split upstream (per-user buckets must filter before a window)
    base: Loaded | None = None
    derive: Callable[[Loaded], Loaded] | None = None
    #: content fingerprint and row count of the input, from the validation pass (see
    #: :func:`privmob.data.validation.content_fingerprint`); kept by derived relations, charged
    #: with each release
    fingerprint: str | None = None
    rows: int | None = None
    #: the fingerprint of the tessellation the tiles were assigned with (checked by releases)
    tiles: str | None = None

    def derived(self, view: str, shape: str, derive: Callable[[Loaded], Loaded]) -> Loaded:
        """A relation built from this one by ``derive`` (which can rebuild it per bucket)."""
        return Loaded(
            view,
            self.source,
            shape,
            self.engine,
            self.engine.columns(view),
            base=self,
            derive=derive,
            fingerprint=self.fingerprint,
            rows=self.rows,
            tiles=self.tiles,
        )


def new_name(prefix: str) -> str:
    """A fresh view name ``pm_<prefix>_<n>`` (unique in this process)."""
    return f"pm_{prefix}_{next(_counter)}"
