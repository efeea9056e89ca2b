"""What a release's load step returns: a :class:`LoadedInput`, the one thing
:meth:`privmob.releases.base.Accountant.bind_input` reads to bind a release to its data.

Every loader's result satisfies it: :class:`privmob.engine.relation.Loaded` (and the relations
derived from one), the density release's :class:`~privmob.releases.density_inputs.DensityInputs`
and a pre-aggregated series (:class:`privmob.data.series_input.SeriesInput`). The protocol is
structural: a loader does not import it (a loader in a lower layer cannot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from privmob.data.series_input import SeriesInput
    from privmob.engine.relation import Loaded
    from privmob.privacy.people import PeopleSketch


@runtime_checkable
class LoadedInput(Protocol):
    """A loaded release input: its content ``fingerprint`` (on canonical values, the same on
    every engine; ``None`` only on a relation made inside privmob, never on data read from a
    file or a DataFrame: :meth:`~privmob.releases.base.Accountant.bind_input` refuses it), its
    ``rows`` and the keyed sketch of its people (``None`` for an input without user ids, such as
    a pre-aggregated series), and on demand its fingerprints under earlier definitions; none of
    them is ever published."""

    @property
    def fingerprint(self) -> str | None: ...

    @property
    def rows(self) -> int | None: ...

    def people_sketch(self, key: bytes) -> PeopleSketch | None:
        """The sketch of the input's user ids under a ledger's ``key``
        (:mod:`privmob.privacy.people`)."""
        ...

    def older_fingerprints(self) -> tuple[str, ...]:
        """The content's fingerprints under earlier definitions (:mod:`privmob.data.fingerprint`;
        may cost a pass over the input: asked only where a ledger holds such fingerprints)."""
        ...


if TYPE_CHECKING:  # the loaders' results below this layer are LoadedInputs (checked by mypy;
    # every kind's, density's included, by tests/releases/test_loaded_input.py)

    def _loader_results_bind(loaded: Loaded, series: SeriesInput) -> list[LoadedInput]:
        return [loaded, series]
