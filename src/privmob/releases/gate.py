"""The one gate: every release is charged here, exactly once, before its noise exists.

::

    plan -> precheck -> load -> bind -> the kind's draft (exact values, no noise)
         -> charge (committed) -> draw (noise, post-processing) -> stage -> seal -> publish

A release kind computes exact values and declares its mechanism: it returns a :class:`Draft`,
the release's public description (its ``header``: kind, cost and its parts, unit, bounds,
noise, declared parameters; no table) and its noise step (``draw``). It cannot draw noise
before the charge (the samplers refuse inside an unpaid release: :mod:`privmob.privacy.payment`)
and it cannot charge (only :func:`settle` does). :func:`run` is the lifecycle's last steps, used
by :class:`privmob.Session`, :func:`privmob.releases.specs.release` and the release functions
(``od_matrix``, ``population_counts`` ...).

So nothing computed from the noise (values, numbers of features, sizes, warnings, progress
text, files) exists before the charge is committed. What can fail after it costs its budget:
a write that fails removes what was staged and says what was charged; a process killed after
the charge leaves a staged release that ``privmob ledger recover`` publishes if it was sealed
(every file written and fsync'd) or removes if not, the budget staying spent either way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec

from privmob.errors import OutputError
from privmob.privacy.payment import paid, unpaid
from privmob.releases.release import Release
from privmob.surface import option

if TYPE_CHECKING:
    from privmob.privacy.ledger.entries import Entry
    from privmob.releases.base import Accountant
    from privmob.releases.publish import Output, Staging


@dataclass(frozen=True)
class Draft:
    """A release before its noise: what the lifecycle charges for, then completes.

    ``header``: the release as charged, with no table and nothing computed from the data or the
    noise (its kind, cost and parts, unit, bounds, noise and declared parameters are what the
    ledger records); ``description``: the ledger entry's description when the cost has no
    parts; ``draw``: the noise and post-processing, run by :func:`settle` once the charge is
    committed, returning the complete release (same kind, cost, parts and unit)."""

    header: Release
    description: str
    draw: Callable[[], Release]


class UnpaidRelease(TypeError):
    """A release kind returned something other than a :class:`Draft`: a value the lifecycle
    did not charge for is never returned."""


def run(make: Callable[[], object], accountant: Accountant) -> Release:
    """Run a kind's draft step ``make`` unpaid (no noise can be drawn), then :func:`settle` it."""
    try:
        with unpaid():
            draft = make()
    finally:  # a release that failed on the way: the next one is checked again
        accountant.prechecked = None
    return settle(draft, accountant)


P = ParamSpec("P")


def through_the_gate(draft: Callable[P, Draft]) -> Callable[P, Release]:
    """The release function of a kind's draft function: the same arguments (among them the
    ``accountant``) and the draft run through :func:`run`: charged, then noised. A kind's
    module says ``kind_release = through_the_gate(kind_draft)``."""
    signature = inspect.signature(draft)
    if "accountant" not in signature.parameters:
        raise TypeError(f"{draft.__name__} takes no accountant: the gate has nothing to charge")

    @functools.wraps(draft)
    def release(*args: P.args, **kwargs: P.kwargs) -> Release:
        accountant: Accountant = signature.bind(*args, **kwargs).arguments["accountant"]
        return run(lambda: draft(*args, **kwargs), accountant)

    release.__name__ = release.__qualname__ = draft.__name__.replace("_draft", "_release")
    release.__doc__ = (
        f"{draft.__name__} (its guarantee) through the one gate: charged, then noised "
        "(:func:`privmob.releases.gate.run`); returns the complete release."
    )
    return release


def settle(draft: object, accountant: Accountant) -> Release:
    """Charge ``draft`` (committed), then draw its noise and publish it: the one place a
    release is paid for. With an output the release is staged, sealed and renamed
    (``releases/publish.py``)."""
    if not isinstance(draft, Draft):
        raise UnpaidRelease(
            f"a release kind returned {type(draft).__name__}, not a Draft: kinds compute exact "
            "values and declare their mechanism; the lifecycle charges, then draws the noise"
        )
    header = draft.header
    if header.tables or header.ledger_entry is not None:
        raise UnpaidRelease("a draft's header holds no tables and is not charged yet")
    from privmob.releases.kinds import BY_ANY_NAME

    if header.kind not in BY_ANY_NAME:  # the ledger records registered kinds only
        raise UnpaidRelease(
            f"{header.kind!r} is not a registered release kind (privmob.releases.kinds); "
            "nothing was charged"
        )
    for mark in accountant.annotate:
        mark(header)
    out = accountant.output
    if out is None:
        if accountant.progress is not None:
            accountant.progress("charging the privacy ledger")
        entries = accountant.commit(header, draft.description)
        return _drawn(draft, accountant, entries)
    return _publish(draft, accountant, out)


def _drawn(draft: Draft, accountant: Accountant, entries: list[Entry]) -> Release:
    """The noise step, paid: the complete release, checked against what was charged."""
    with paid():
        release = draft.draw()
    for mark in accountant.annotate:
        mark(release)
    header = draft.header
    charged = (header.kind, header.cost, header.cost_parts, header.unit, header.for_publication)
    drawn = (release.kind, release.cost, release.cost_parts, release.unit, release.for_publication)
    if charged != drawn:
        raise RuntimeError(
            f"the release drawn ({drawn}) is not the release charged ({charged}): a bug of "
            f"the {header.kind} kind"
        )
    release.ledger_id = accountant.ledger.ledger_id
    release.ledger_entries = entries
    release.ledger_entry = entries[-1]
    return release


def _publish(draft: Draft, accountant: Accountant, out: Output) -> Release:
    from privmob.privacy.ledger.store import ChargeOutcomeUnknown
    from privmob.privacy.staging import ABANDONED, DISCARDED
    from privmob.releases.publish import PublishError, spent_text

    ledger, dataset = accountant.ledger, accountant.dataset
    step = accountant.progress or (lambda _message: None)
    handle: Staging = out.begin(ledger, dataset)
    step("charging the privacy ledger")
    try:
        entries = accountant.commit(draft.header, draft.description, within=handle.mark_charged)
    except ChargeOutcomeUnknown as exc:
        # the server went away while committing: charged or not, nothing was drawn; the row
        # stays for `ledger recover`, which settles it
        raise PublishError(
            f"{exc.message}; no noise was drawn and nothing was written",
            hint=f"when the ledger is back: privmob ledger recover --ledger {ledger.path}",
        ) from exc
    except BaseException as exc:
        handle.settle(ABANDONED)
        if isinstance(exc, OSError):  # rolled back: nothing charged
            raise PublishError(
                f"cannot record the release in the ledger {ledger.path}: {exc}; nothing was "
                "charged or published",
                hint="check the room and permissions of the ledger's disk",
            ) from exc
        raise
    # paid from here on: whatever fails costs its budget, and is said
    spent = spent_text(entries)
    try:
        release = _drawn(draft, accountant, entries)
        step("writing the release's tables")
        out.write(release, handle)
    except BaseException as exc:
        handle.settle(DISCARDED)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        said = (
            f"charged {spent} to '{dataset}' in {ledger.path}, but the release could not be "
            f"written beside {out.target}: {why or type(exc).__name__}; nothing was published "
            "and the budget stays spent"
        )
        if isinstance(exc, OSError | OutputError):
            raise PublishError(
                said,
                hint=f"free some room or choose another {option('output')}, then release again "
                "(a new charge)",
            ) from exc
        exc.add_note(said)  # an interruption or a bug: raised as it is, the charge said
        raise
    step("moving the release into place")
    out.place(release, handle)
    return release
