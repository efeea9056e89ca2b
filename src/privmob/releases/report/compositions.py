"""The report's compositions and the rule that resolves one from the options (public
parameters only; the plan itself is :mod:`.composition`)."""

from __future__ import annotations

from privmob.errors import ConfigError

#: the compositions a report offers: ``auto`` is zCDP with a delta and pure without
COMPOSITIONS: tuple[str, ...] = ("auto", "pure", "zcdp")
#: the delta of ``composition="zcdp"`` when none is given: far below 1/n for any population a
#: report describes (1e-9 < 1/10^8), the value docs/mobility-report.md recommends
DEFAULT_DELTA = 1e-9


def resolve_composition(how: str, delta: float) -> tuple[str, float]:
    """The composition and delta asked for: ``("pure", 0.0)`` or ``("zcdp", delta)``; refuses
    an unknown composition, a delta with pure, and a delta too large to protect anyone."""
    if how not in COMPOSITIONS:
        raise ConfigError(
            f"unknown composition {how!r}", hint="choose from: " + ", ".join(COMPOSITIONS)
        )
    if not (0 <= delta < 1):
        raise ConfigError(f"delta must be in [0, 1), got {delta}")
    if how == "pure":
        if delta:
            raise ConfigError(
                "a pure-epsilon report has no delta",
                hint="drop the delta, or ask for composition zcdp",
            )
        return "pure", 0.0
    if how == "auto" and not delta:
        return "pure", 0.0
    if delta and delta > 1e-3:
        raise ConfigError(
            f"delta {delta:g} is too large to protect anyone",
            hint="delta should be far below 1 / the number of people, e.g. 1e-9",
        )
    return "zcdp", delta or DEFAULT_DELTA
