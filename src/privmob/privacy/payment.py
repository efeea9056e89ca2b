"""Noise is drawn only once it is paid for: the samplers' side of the one gate.

The release lifecycle (:mod:`privmob.releases.gate`) runs a release kind *unpaid*: while the
kind reads the data and computes its exact values, every sampler of noise refuses to draw
(:class:`UnpaidNoise`). The gate commits the charge to the ledger, then runs the kind's noise
step *paid*. Outside any release (audits, planning, simulations, tests of the mechanisms) the
samplers draw freely.

The state is a :class:`contextvars.ContextVar`, so it follows the code that runs a release
(threads started inside a release inherit nothing: the samplers are called from the
release's own thread).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

UNPAID, PAID = "unpaid", "paid"

_STATE: ContextVar[str | None] = ContextVar("privmob_release_payment", default=None)


class UnpaidNoise(RuntimeError):
    """A sampler was asked for noise inside a release before the release was charged."""


def require_paid(what: str = "noise") -> None:
    """Refuse to draw ``what`` inside a release whose charge is not committed."""
    if _STATE.get() == UNPAID:
        raise UnpaidNoise(
            f"{what} was drawn before the release was charged: a release kind computes exact "
            "values and declares its mechanism; the lifecycle charges the ledger, then draws "
            "the noise (privmob.releases.gate)"
        )


def state() -> str | None:
    """``"unpaid"``, ``"paid"`` or ``None`` (outside any release)."""
    return _STATE.get()


@contextmanager
def _within(payment: str) -> Iterator[None]:
    token = _STATE.set(payment)
    try:
        yield
    finally:
        _STATE.reset(token)


def unpaid() -> AbstractContextManager[None]:
    """Run a release kind before its charge: no noise may be drawn."""
    return _within(UNPAID)


def paid() -> AbstractContextManager[None]:
    """Run a release's noise step once its charge is committed."""
    return _within(PAID)
