"""A release is a value: what was computed, over which public domain, with which unit of
privacy, bounds, noise and cost, and the tables of noisy values it publishes. Outputs are
rendered from releases, never from raw data (``releases/files.py``, ``releases/publish.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from privmob import __version__
from privmob.errors import ConfigError
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger_entries import Entry

NOT_FOR_PUBLICATION = (
    "NOT FOR PUBLICATION: made with a fixed seed for testing; the noise is predictable and "
    "gives no privacy"
)


@dataclass
class Release:
    """One published output together with its privacy cost and parameters.

    ``tables`` hold only noisy, post-processed values over the public domain.
    """

    kind: str
    cost: Cost
    unit: PrivacyUnit
    bounds: dict[str, Any]
    noise: dict[str, Any]
    params: dict[str, Any]
    domain: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    for_publication: bool = True
    #: why a release is not for publication, when not the seed (e.g. a domain read from data)
    publication_note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: how the cost splits into ledger entries (e.g. one per period); default: one entry
    cost_parts: list[tuple[str, Cost]] = field(default_factory=list)
    ledger_entry: Entry | None = None
    ledger_entries: list[Entry] = field(default_factory=list)
    #: the identity of the ledger that was charged (a random id created with the ledger)
    ledger_id: str | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    software_version: str = __version__

    @property
    def table(self) -> pd.DataFrame:
        """The main table (the first one)."""
        return next(iter(self.tables.values()))

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "kind": self.kind,
            "privacy": {
                "unit": self.unit.value,
                "cost": self.cost.to_dict(),
                "bounds": self.bounds,
                "noise": self.noise,
            },
            "params": self.params,
            "domain": self.domain,
            "for_publication": self.for_publication,
            "software": {"name": "privmob", "version": self.software_version},
            "created_at": self.created_at,
            "ledger_entries": [e.to_dict() for e in self.ledger_entries],
        }
        if self.ledger_id is not None:
            meta["ledger"] = {
                "id": self.ledger_id,
                "entry_ids": [e.id for e in self.ledger_entries],
            }
            if self.ledger_entries and self.ledger_entries[-1].head:
                # the ledger head after this charge: truncation shows to whoever holds this
                meta["ledger"]["head"] = self.ledger_entries[-1].head
        clash = set(self.extra) & (set(meta) | {"warning"})
        if clash:  # a release's extras must never overwrite its cost, unit or seed stamp
            raise ConfigError(f"release extras may not replace {sorted(clash)}")
        meta.update(self.extra)
        if not self.for_publication:
            meta["warning"] = self.publication_note or NOT_FOR_PUBLICATION
        return meta
