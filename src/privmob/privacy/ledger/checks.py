"""What a charge must pass before anything is written to the ledger: its cost in the unit of
the dataset's budget (a finer unit only through group privacy with a stated group size), the
dataset's accounts with the release included (refused when neither accounting fits,
:mod:`privmob.privacy.ledger.accounting`), and an input whose content no other dataset name has
already been charged for, and whose users no other dataset holds (the budget is bound to the
data and to the people in it).

:meth:`privmob.privacy.ledger.Ledger.check` runs these without charging; ``charge_parts`` runs
them inside its transaction.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import Cost, Unit
from privmob.privacy.ledger import governance as governance
from privmob.privacy.ledger.accounting import Accounts, accounts
from privmob.privacy.ledger.entries import Budget
from privmob.privacy.ledger.rows import Con, Record, row_dicts
from privmob.privacy.ledger.spends import COST_COLUMNS, spend_problem
from privmob.privacy.people import OVERLAP_THRESHOLD, PeopleSketch
from privmob.surface import option

if TYPE_CHECKING:
    from privmob.privacy.ledger.store import Store


def to_budget_unit(cost: Cost, unit: Unit, group_size: int | None) -> Cost:
    if cost.unit == unit:
        return cost
    finer = {Unit.TRIP, Unit.EVENT, Unit.LANDMARK}
    if unit == Unit.USER and cost.unit in finer:
        if group_size is None:
            raise BudgetError(
                f"a {cost.unit}-level release cannot be charged to a user-level budget without "
                f"the most {cost.unit}s one user can have",
                hint="state it (e.g. --group-size 20) to charge group_size x epsilon, or release "
                "at user level",
            )
        return cost.for_group(group_size, Unit.USER)
    raise ConfigError(f"cannot charge a {cost.unit}-level release to a {unit}-level budget")


def dataset_accounts(
    con: Con,
    b: Budget,
    extra: list[Cost],
    members: list[str] | None = None,
    path: Path | str = "",
) -> Accounts:
    """The accounts of ``b`` (all its family's ``members``) from the stored rows, as they are
    (for display and early checks; a charge sums verified entries only)."""
    names = members or [b.dataset]
    cur = con.execute(
        f"SELECT id, {', '.join(COST_COLUMNS)} FROM releases "
        f"WHERE dataset IN ({', '.join('?' * len(names))}) ORDER BY id",
        names,
    )
    rows = row_dicts(cur)
    for row in rows:
        refuse_invalid_spend(row, path)
    # each a valid spend now (spend_problem): a number, rho also None
    spends = [
        cast("tuple[float, float, float | None]", (r["epsilon"], r["delta"], r["rho"]))
        for r in rows
    ]
    return accounts(
        [(float(epsilon), float(delta), rho) for epsilon, delta, rho in spends]
        + [(c.epsilon, c.delta, c.rho) for c in extra],
        b.epsilon,
        b.delta,
    )


def refuse_invalid_spend(row: Record, path: Path | str) -> None:
    """A stored entry whose cost is not a spend (:mod:`privmob.privacy.ledger.spends`) is never
    summed: what was spent cannot be told, so nothing is charged and no sum is shown."""
    invalid = spend_problem(row)
    if invalid:
        raise BudgetError(
            f"refused: the privacy ledger {path} does not verify ({invalid}); nothing was "
            f"charged; see everything with: privmob ledger verify --ledger {path}"
        )


def refuse_if_over(b: Budget, after: Accounts, cost: Cost, path: Path | str) -> None:
    """``after``: the accounts with this release included."""
    if after.fits:
        return
    raise BudgetError(
        f"refused: this release costs {cost.describe()} but dataset '{b.dataset}' cannot pay "
        f"for it: with it, {after.describe()} (budget epsilon={b.epsilon:g}, "
        f"delta={b.delta:g}; ledger {path}); nothing was written",
        hint="lower --epsilon, or see what was spent with: privmob ledger show",
    )


def refuse_foreign_input(
    con: Con,
    dataset: str,
    fingerprint: str | None,
    stated: bool,
    path: Path | str,
    family: list[str] | None = None,
    older: Sequence[str] = (),
) -> None:
    """The budget is bound to the data: content seen under another dataset name is refused,
    unless the user stated that this is a new dataset for the same data (or did so before),
    or the other dataset is in ``family`` (shares this budget). ``older``: the same content's
    fingerprints under earlier definitions (:mod:`privmob.data.fingerprint`; computed where
    :func:`holds_older_fingerprints`), looked for too, never recorded."""
    if not fingerprint or stated:
        return
    wanted = [fingerprint, *older]
    marks = ", ".join("?" * len(wanted))
    owners = [
        str(r[0])
        for r in con.execute(
            f"SELECT dataset FROM releases WHERE input_fingerprint IN ({marks}) "
            "GROUP BY dataset ORDER BY min(id)",
            wanted,
        ).fetchall()
    ]
    if not owners or dataset in owners or set(owners) & set(family or []):
        return
    raise BudgetError(
        f"refused: this input's content was already released under dataset '{owners[0]}' "
        f"in {path}; its budget is that dataset's, not "
        f"'{dataset}''s; nothing was charged",
        hint=f"use {option('dataset', owners[0])}, or state "
        f"{option('new_dataset_for_same_data')} if this is deliberately a separate budget for "
        "the same records (it is recorded in the ledger)",
    )


def holds_older_fingerprints(
    con: Con, dataset: str, family: Sequence[str] = (), rows: int | None = None
) -> bool:
    """Whether another dataset than ``dataset`` and its ``family`` has entries whose input
    fingerprint is of an earlier definition (untagged, v2: :mod:`privmob.data.fingerprint`)
    and could be this input's: of ``rows`` rows (an older fingerprint covers its row count;
    an entry without one could be any), every such entry where ``rows`` is None. Only then
    does a release compute its input's older fingerprints (one more pass)."""
    mine = [dataset, *family]
    same_rows = "" if rows is None else " AND (input_rows = ? OR input_rows IS NULL)"
    row = con.execute(
        "SELECT 1 FROM releases WHERE input_fingerprint IS NOT NULL AND input_fingerprint "
        f"NOT LIKE ? AND dataset NOT IN ({', '.join('?' * len(mine))}){same_rows} LIMIT 1",
        ["%:%", *mine, *([] if rows is None else [rows])],
    ).fetchone()
    return row is not None


# -- people-aware binding (privmob.privacy.people) ------------------------------------------
def refuse_known_people(
    con: Con,
    dataset: str,
    people: PeopleSketch | None,
    stated: bool,
    path: Path | str,
    family: Sequence[str] | None = None,
) -> None:
    """The budget is bound to the people: an input whose users overlap another dataset's by
    :data:`~privmob.privacy.people.OVERLAP_THRESHOLD` or more (estimated from the two people
    sketches) is refused, unless the user stated a new dataset for the same data, the datasets
    share a budget, or this dataset already holds these users (it was charged for them
    before). The message names the other dataset and the threshold, never a user, a hash or
    the estimate."""
    if people is None or stated:
        return
    known = {d: _sketch(d, s, named, path) for d, s, named in governance.stored_people(con)}
    gone = governance.gone_people(con)
    if gone:  # a sketch its entries name was deleted: the check would be open again
        raise BudgetError(
            f"refused: the privacy ledger {path} does not verify ({gone[0]}); nothing was "
            f"charged; see everything with: privmob ledger verify --ledger {path}"
        )
    own = known.pop(dataset, None)
    if own is not None and own.overlap(people) >= OVERLAP_THRESHOLD:
        return
    for other, sketch in known.items():
        if other in (family or ()) or sketch.overlap(people) < OVERLAP_THRESHOLD:
            continue
        raise BudgetError(
            f"refused: at least {OVERLAP_THRESHOLD:.0%} of this input's users (estimated from "
            f"keyed sketches) are users of dataset '{other}' in {path}; their budget is that "
            f"dataset's, not '{dataset}''s; nothing was charged",
            hint=f"use {option('dataset', other)} (the same people share one budget); if this "
            f"is deliberately a separate budget, state {option('new_dataset_for_same_data')} (it "
            "is recorded in the ledger); pseudonyms relabelled per dataset are not detected: "
            "link such datasets into one family",
        )


def _sketch(dataset: str, stored: bytes, named: str | None, path: Path | str) -> PeopleSketch:
    """A stored people sketch, the one the dataset's signed entries name (``named``: the digest
    they name, None where none does; :func:`privmob.privacy.ledger.governance.replaced_sketch`);
    one that is not, or that is no sketch (damaged or forged), refuses the release, naming the
    dataset, never an internal error, the sketch or a hash."""
    replaced = governance.replaced_sketch(dataset, bytes(stored), named)
    if replaced:
        raise BudgetError(
            f"refused: the privacy ledger {path} does not verify ({replaced}); nothing was "
            f"charged; see everything with: privmob ledger verify --ledger {path}"
        )
    try:
        return PeopleSketch.from_bytes(bytes(stored))
    except (ValueError, struct.error):
        raise BudgetError(
            f"refused: the people sketch of dataset '{dataset}' in {path} is not a people "
            "sketch (damaged or forged); nothing was charged",
            hint=f"the custodian checks the ledger: privmob ledger verify --ledger {path}",
        ) from None


def merged_people(
    con: Con, dataset: str, people: PeopleSketch | None, path: Path | str
) -> bytes | None:
    """The dataset's stored sketch with ``people`` merged in, as it will be stored (None: no
    people to record). Computed before the charge's entries are made: they name its digest
    (:data:`~privmob.privacy.ledger.governance.PEOPLE_PARAM`)."""
    if people is None:
        return None
    row = cast(  # sketch: BLOB / bytea NOT NULL
        "tuple[bytes] | None",
        con.execute("SELECT sketch FROM dataset_people WHERE dataset = ?", (dataset,)).fetchone(),
    )
    gone = governance.gone_sketch(con, dataset) if row is None else None
    if gone:  # never a new sketch in place of a deleted one, which would hide it
        raise BudgetError(
            f"refused: the privacy ledger {path} does not verify ({gone}); nothing was "
            f"charged; see everything with: privmob ledger verify --ledger {path}"
        )
    if row is None:
        return people.to_bytes()
    own = _sketch(dataset, row[0], governance.named_sketch(con, dataset), path)
    return own.merge(people).to_bytes()


def store_people(store: Store, con: Con, dataset: str, merged: bytes | None, now: str) -> None:
    """Keep the ``merged`` sketch (:func:`merged_people`) as the dataset's, inside the charge's
    transaction, after its entries (the store writes it: on PostgreSQL through a function,
    which stores only the sketch those entries name; the analyst's role writes no table)."""
    if merged is not None:
        store.store_people(con, dataset, merged, now)
