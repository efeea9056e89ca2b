"""Relations in the engine: the handle of a validated input (or of a relation derived from one)
and fresh names for the views the pipeline creates."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privmob.engine.base import Engine
    from privmob.privacy.people import PeopleSketch

_counter = itertools.count()


@dataclass(frozen=True)
class UserParts:
    """An input parsed once (:func:`privmob.data.validation.parsed_once`) into ``count`` files
    by a hash of its user id: the Parquet files ``<directory>/pm_part=<p>/*.parquet``, a user's
    records all in one. A count in ``n`` user buckets reads them as they are (bucket ``b``: the
    parts ``p`` with ``p % n' == b``, ``n'`` the least power of two at least ``n``) instead of
    writing the input again (:mod:`privmob.engine.buckets`). ``rebase`` (set by the loader):
    creates the input's canonical view over a relation of the parsed input (one bucket's parts)
    and returns its name; without it the parts are not used."""

    directory: Path
    count: int
    #: the view of every part (the parsed input)
    whole: str
    rebase: Callable[[str], str] | None = None

    def buckets(self, n_buckets: int) -> int | None:
        """The buckets a count asking for ``n_buckets`` reads (a power of two dividing
        ``count``), or None where the parts cannot make them."""
        n = 1 << (n_buckets - 1).bit_length()
        return n if self.rebase is not None and 1 < n <= self.count else None

    def files(self, n_buckets: int, bucket: int) -> list[str]:
        """The Parquet files of one of ``n_buckets`` buckets (:meth:`buckets`)."""
        found: list[str] = []
        for part in range(bucket, self.count, n_buckets):
            found += sorted(str(f) for f in (self.directory / f"pm_part={part}").glob("*.parquet"))
        return found


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
    #: the people sketch of the input's user ids (:mod:`privmob.privacy.people`), once a
    #: release bound the input (:meth:`people_sketch`); custodian-only, never published
    people: PeopleSketch | None = field(default=None, repr=False)
    #: computes it under a ledger's key (one query over the distinct user ids, from the
    #: validation; None where the input has no user id)
    people_source: Callable[[bytes], PeopleSketch] | None = field(default=None, repr=False)
    _people_key: bytes | None = field(default=None, repr=False)
    #: computes the input's fingerprints under earlier definitions (one more pass, from the
    #: validation: :mod:`privmob.data.fingerprint`); asked only on a ledger that holds such
    older_source: Callable[[], tuple[str, ...]] | None = field(default=None, repr=False)
    _older: tuple[str, ...] | None = field(default=None, repr=False)
    #: the input parsed once into user parts at its validation (user buckets read them as they
    #: are: :class:`privmob.engine.relation.UserParts`); None where it was not
    parts: UserParts | None = field(default=None, repr=False)

    def people_sketch(self, key: bytes) -> PeopleSketch | None:
        """The people sketch under ``key`` (computed once per key; a derived relation asks
        its base, whose input the user ids were read from)."""
        if self.base is not None and self.people_source is None:
            self.people = self.base.people_sketch(key)
        elif self.people_source is not None and (self.people is None or self._people_key != key):
            self.people, self._people_key = self.people_source(key), key
        return self.people

    def older_fingerprints(self) -> tuple[str, ...]:
        """The input's fingerprints under earlier definitions (computed once; a derived
        relation asks its base)."""
        if self.base is not None and self.older_source is None:
            return self.base.older_fingerprints()
        if self._older is None:
            self._older = self.older_source() if self.older_source is not None else ()
        return self._older

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
        )  # the people sketch: asked of this one (people_sketch)

    def derived_on_read(
        self,
        view: str,
        shape: str,
        columns: list[str],
        create: Callable[[], None],
        derive: Callable[[Loaded], Loaded],
    ) -> Loaded:
        """:meth:`derived`, but ``view`` (with ``columns``) is created by ``create`` only when
        it is first read: work a run in user buckets never needs (the whole input's tile
        lookup, when each bucket is rebuilt by ``derive`` and tiles its own coordinates)."""
        return OnRead(
            view,
            self.source,
            shape,
            self.engine,
            list(columns),
            base=self,
            derive=derive,
            fingerprint=self.fingerprint,
            rows=self.rows,
            tiles=self.tiles,
            create=create,
        )


@dataclass(repr=False)
class OnRead(Loaded):
    """A derived relation whose view is created at its first read (:meth:`Loaded.derived_on_read`);
    its per-bucket rebuilds (``derive``) and its ``base`` do not read it."""

    create: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    # a property over the inherited field (its setter takes the dataclass's assignment)
    @property  # type: ignore[misc]
    def view(self) -> str:
        if self.create is not None:  # once; again at the next read if it failed
            self.create()
            self.create = None
        return self._view

    @view.setter
    def view(self, name: str) -> None:
        self._view = name

    def __repr__(self) -> str:  # without reading the view (that would create it)
        state = "created" if self.create is None else "not created"
        return f"OnRead({self._view!r}, {self.source!r}, {self.shape!r}, {state})"


def new_name(prefix: str) -> str:
    """A fresh view name ``pm_<prefix>_<n>`` (unique in this process)."""
    return f"pm_{prefix}_{next(_counter)}"
