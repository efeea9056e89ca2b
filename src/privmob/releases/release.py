"""A release is a value: what was computed, over which public domain, with which unit of
privacy, bounds, noise and cost, and the tables of noisy values it publishes. Outputs are
rendered from releases, never from raw data (``releases/files.py``, ``releases/publish.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from privmob.json_types import JSON, JSONObject
from privmob.lazy_imports import pd
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger.entries import Entry
from privmob.releases.metadata import (
    Bounds,
    Definitions,
    NoiseDescription,
    Provenance,
    PublicDomain,
    ReleaseMetadata,
)


@dataclass(init=False)
class Release:
    """One published output together with its privacy cost and parameters.

    ``tables`` hold only noisy, post-processed values over the public domain. ``bounds``,
    ``noise`` and ``domain`` are typed values (:mod:`privmob.releases.metadata`); a kind may
    hand them in as dictionaries of their ``metadata.json`` keys, converted here.
    """

    kind: str
    cost: Cost
    unit: PrivacyUnit
    bounds: Bounds
    noise: NoiseDescription
    params: JSONObject
    domain: PublicDomain
    tables: dict[str, pd.DataFrame]
    for_publication: bool
    #: why a release is not for publication, when not the seed (e.g. a domain read from data)
    publication_note: str | None
    #: what a kind adds at the top level of metadata.json (``test_mode`` is added here too)
    extra: JSONObject
    #: how the cost splits into ledger entries (e.g. one per period); default: one entry
    cost_parts: list[tuple[str, Cost]]
    ledger_entry: Entry | None
    ledger_entries: list[Entry]
    #: the identity of the ledger that was charged (a random id created with the ledger)
    ledger_id: str | None
    created_at: str
    software_version: str
    #: what was counted (set before the charge; a ``definitions`` dict in ``extra`` is read
    #: as the same while the session records it there)
    definitions: Definitions | None

    def __init__(
        self,
        kind: str,
        cost: Cost,
        unit: PrivacyUnit,
        bounds: Bounds | Mapping[str, JSON],
        noise: NoiseDescription | Mapping[str, JSON],
        params: JSONObject,
        domain: PublicDomain | Mapping[str, JSON],
        tables: dict[str, pd.DataFrame],
        for_publication: bool = True,
        publication_note: str | None = None,
        extra: JSONObject | None = None,
        cost_parts: list[tuple[str, Cost]] | None = None,
        ledger_entry: Entry | None = None,
        ledger_entries: list[Entry] | None = None,
        ledger_id: str | None = None,
        created_at: str | None = None,
        software_version: str | None = None,
        definitions: Definitions | None = None,
    ) -> None:
        self.kind = kind
        self.cost = cost
        self.unit = unit
        self.bounds = Bounds.of(bounds)
        self.noise = NoiseDescription.of(noise)
        self.params = params
        self.domain = PublicDomain.of(domain)
        self.tables = tables
        self.for_publication = for_publication
        self.publication_note = publication_note
        self.extra = {} if extra is None else extra
        self.cost_parts = [] if cost_parts is None else cost_parts
        self.ledger_entry = ledger_entry
        self.ledger_entries = [] if ledger_entries is None else ledger_entries
        self.ledger_id = ledger_id
        self.created_at = datetime.now(UTC).isoformat() if created_at is None else created_at
        if software_version is None:  # read here, after the plan (issue 43)
            from privmob import __version__

            software_version = __version__
        self.software_version = software_version
        self.definitions = definitions

    def drawn(
        self,
        tables: dict[str, pd.DataFrame],
        *,
        params: Mapping[str, JSON] | None = None,
        noise: Mapping[str, JSON] | None = None,
        extra: Mapping[str, JSON] | None = None,
    ) -> Release:
        """This header (:class:`~privmob.releases.gate.Draft`) completed by its noise step: a
        copy with the noisy ``tables``, and what the noise step adds to its ``params``,
        ``noise`` description and ``extra`` keys."""
        return Release(
            kind=self.kind,
            cost=self.cost,
            unit=self.unit,
            bounds=self.bounds,
            noise={**self.noise.to_json(), **(noise or {})},
            params={**self.params, **(params or {})},
            domain=self.domain,
            tables=tables,
            for_publication=self.for_publication,
            publication_note=self.publication_note,
            extra={**self.extra, **(extra or {})},
            cost_parts=list(self.cost_parts),
            created_at=self.created_at,
            software_version=self.software_version,
            definitions=self.definitions,
        )

    @property
    def table(self) -> pd.DataFrame:
        """The main table (the first one)."""
        return next(iter(self.tables.values()))

    def typed_metadata(self) -> ReleaseMetadata:
        """What ``metadata.json`` says of this release, as a typed value."""
        extra = dict(self.extra)
        recorded = extra.pop("definitions", None)
        definitions = self.definitions
        if definitions is None and isinstance(recorded, dict):
            definitions = Definitions.of(recorded)
        return ReleaseMetadata(
            kind=self.kind,
            unit=self.unit,
            cost=self.cost,
            bounds=self.bounds,
            noise=self.noise,
            params=self.params,
            domain=self.domain,
            provenance=Provenance(
                software_version=self.software_version,
                created_at=self.created_at,
                for_publication=self.for_publication,
                warning=None if self.for_publication else self.publication_note,
                ledger_id=self.ledger_id,
                ledger_entries=tuple(self.ledger_entries),
            ),
            definitions=definitions,
            extra=extra,
        )

    def metadata(self) -> JSONObject:
        """The ``metadata.json`` document (:meth:`ReleaseMetadata.to_json`)."""
        return self.typed_metadata().to_json()
