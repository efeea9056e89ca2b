"""Who pays for a release: the dataset's budget in a ledger, checked before the data is read.

:class:`Accountant` checks the budget before the data is read (so a refused release costs no
work), binds the budget to the input's content, and commits the charge when the one gate
(:mod:`privmob.releases.gate`) asks it to, before any noise is drawn; with an ``output``
(:class:`~privmob.releases.publish.Output`) the gate then publishes the release by the atomic
protocol of ``releases/publish.py``. :func:`write_release` writes a release charged before, by
the same staging and rename, and refuses an uncharged one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.privacy.costs import Cost, PrivacyUnit, Unit
from privmob.privacy.ledger import Ledger
from privmob.privacy.ledger import checks as checks
from privmob.privacy.ledger.accounting import accounts
from privmob.privacy.ledger.entries import Budget, Entry, Spent
from privmob.privacy.people import PeopleSketch, people_key
from privmob.releases.loaded import LoadedInput
from privmob.releases.release import Release

if TYPE_CHECKING:
    from privmob.privacy.ledger.rows import Con
    from privmob.releases.publish import Output


@dataclass
class Accountant:
    """Who pays for a release: a ledger and the dataset whose budget is charged.

    ``group_size`` converts a trip- or event-level cost to a user-level budget by group
    privacy. ``budget``, when given, sets the dataset's budget if it has none yet; if the
    dataset already has a different budget this is refused (never silently ignored: a data
    holder who asks for a total of 1 must not be charged against an older total of 10).
    """

    ledger: Ledger
    dataset: str
    group_size: int | None = None
    budget: float | None = None
    budget_delta: float = 0.0
    #: what ``budget`` protects (user by default; landmark or event for landmark series)
    budget_unit: PrivacyUnit | str = PrivacyUnit.USER
    #: where the release is published (the gate stages, seals and renames it there)
    output: Output | None = None
    #: applied to every release before it is charged, and again once drawn (test mode, a
    #: domain read from the data: both mark the release not for publication, in its files too)
    annotate: list[Callable[[Release], None]] = field(default_factory=list)
    #: the user stated that this dataset is a separate budget for content another dataset
    #: already released (``--new-dataset-for-same-data``); recorded in the ledger
    new_dataset_for_same_data: bool = False
    #: the input's content fingerprint and row count (set by :meth:`bind_input`)
    input_fingerprint: str | None = None
    input_rows: int | None = None
    #: the input's people sketch (set by :meth:`bind_input`; stored for the dataset, never
    #: published)
    input_people: PeopleSketch | None = None
    #: the input's fingerprints under earlier definitions, computed by :meth:`bind_input` only
    #: where the ledger holds such fingerprints of another dataset (looked for, not recorded)
    input_older: tuple[str, ...] = ()
    #: told each step of the publication as what it is (writing tables, writing a layer,
    #: charging the ledger, moving into place)
    progress: Callable[[str], None] | None = None
    #: the cost the budget was last checked for (:meth:`precheck`), until the charge
    prechecked: Cost | None = field(default=None, repr=False)

    #: a budget asked for (``budget``) that the dataset does not have yet: written with the
    #: first charge, so that a release refused on the way creates nothing
    pending_budget: Budget | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.dataset:
            raise ConfigError("a dataset name is needed to charge the ledger")
        if self.budget is None:
            return
        Cost(self.budget, self.budget_delta)  # validates, now
        if self.ledger.has_budget(self.dataset):
            # set once; the same budget again is a no-op, a different one a BudgetError, now
            self.ledger.set_budget(self.dataset, self.budget, self.budget_delta, self.budget_unit)
        elif self.pending_budget is None:
            self.pending_budget = Budget(
                self.dataset, float(self.budget), float(self.budget_delta),
                Unit(self.budget_unit), "",
            )  # fmt: skip

    def precheck(self, cost: Cost) -> None:
        """Refuse early, before any data is read, if ``cost`` cannot fit: the one budget
        check of every release's lifecycle (:func:`privmob.releases.specs.before_reading`,
        the count template and the other kinds call it before reading). Once per release: a
        second call for the same cost before the charge checks nothing again (the charge
        itself refuses atomically whatever was spent in between)."""
        if self.prechecked == cost:
            return
        b = self.pending_budget
        if b is not None and not self.ledger.has_budget(self.dataset):
            # the budget asked for, not written yet: the cost must fit it alone
            charged = checks.to_budget_unit(cost, b.unit, self.group_size)
            after = accounts([(charged.epsilon, charged.delta, charged.rho)], b.epsilon, b.delta)
            checks.refuse_if_over(b, after, charged, self.ledger.path)
        else:
            self.ledger.check(self.dataset, cost, self.group_size)
        self.prechecked = cost

    def remaining(self) -> Spent:
        """What is left of the dataset's budget (in its unit)."""
        b = self.pending_budget
        if b is not None and not self.ledger.has_budget(self.dataset):
            return Spent(b.epsilon, b.delta)
        return self.ledger.remaining(self.dataset)

    def write_budget(self) -> None:
        """Write the budget asked for, if the dataset has none yet (the gate does, just before
        the first charge; ``privmob ledger init`` is the other way)."""
        b = self.pending_budget
        if b is not None:
            self.ledger.set_budget(self.dataset, b.epsilon, b.delta, b.unit)
            self.pending_budget = None

    def bind_input(self, loaded: LoadedInput) -> None:
        """Tie this accountant's charges to the input's content and refuse now, before any
        work, if another dataset holds that content (see :meth:`Ledger.check_input`).

        ``loaded``: what a release's load step returned (a :class:`Loaded` relation or one
        derived from it, the density's inputs, a pre-aggregated series): every one carries
        the content ``fingerprint`` and ``rows``; one without a fingerprint is a bug of the
        kind's loader (an unbound release could be charged to any dataset), never run."""
        if not isinstance(loaded, LoadedInput) or not loaded.fingerprint:
            raise TypeError(
                f"{type(loaded).__name__} carries no content fingerprint: every release input "
                "must be bound to its content (Accountant.bind_input)"
            )
        self.input_fingerprint = loaded.fingerprint
        self.input_rows = loaded.rows
        # who is in it: the keyed sketch of its user ids (privmob.privacy.people; one query)
        self.input_people = loaded.people_sketch(people_key(self.ledger))
        # a ledger written before the fingerprint's v3 (privmob.data.fingerprint): the same
        # content is refused under another name by its v2 fingerprint (one more pass, only
        # where another dataset holds a v2 entry of as many rows)
        self.input_older = ()
        if not self.new_dataset_for_same_data and self.ledger.holds_older_fingerprints(
            self.dataset, self.input_rows
        ):
            self.input_older = loaded.older_fingerprints()
        self.ledger.check_input(
            self.dataset,
            self.input_fingerprint,
            people=self.input_people,
            new_dataset_for_same_data=self.new_dataset_for_same_data,
            older_fingerprints=self.input_older,
        )

    def charged_cost(self, cost: Cost) -> Cost:
        """``cost`` as charged to the dataset's budget (converted by group privacy if needed)."""
        b = self.pending_budget
        if b is not None and not self.ledger.has_budget(self.dataset):
            return checks.to_budget_unit(cost, b.unit, self.group_size)
        return self.ledger.in_budget_unit(self.dataset, cost, self.group_size)

    def commit(
        self,
        header: Release,
        description: str = "",
        *,
        within: Callable[[Con, list[Entry]], None] | None = None,
    ) -> list[Entry]:
        """Charge the ledger for the release ``header`` describes (atomically: all its parts or
        nothing) and return the committed entries. Called by the one gate only
        (:func:`privmob.releases.gate.settle`), before any noise is drawn; ``within`` runs
        inside the ledger's transaction (the staged release is marked paid there)."""
        self.prechecked = None  # the next release on this accountant is checked again
        self.write_budget()  # a new dataset's budget, with its first charge
        parts = header.cost_parts or [(description, header.cost)]
        return self.ledger.charge_parts(
            self.dataset,
            parts,
            kind=header.kind,
            params={
                "params": header.params,
                "bounds": header.bounds.to_json(),
                "noise": header.noise.to_json(),
            },
            group_size=self.group_size,
            for_publication=header.for_publication,
            input_fingerprint=self.input_fingerprint,
            input_rows=self.input_rows,
            older_fingerprints=self.input_older,
            people=self.input_people,
            output_dir=self.output.target if self.output is not None else None,
            new_dataset_for_same_data=self.new_dataset_for_same_data,
            within=within,
        )


def write_release(release: Release, outdir: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write a charged release: one Parquet file per table and ``metadata.json``, staged beside
    ``outdir`` and renamed into place (``releases/publish.py``).

    Refuses an uncharged release. Refuses to replace an existing output unless asked.
    """
    from privmob.releases.publish import Output, publish_charged

    if release.ledger_entry is None:
        raise ConfigError("a release must be charged to the ledger before it is written")
    return publish_charged(release, Output(Path(outdir), overwrite=overwrite))
