"""The report's budget split from what the user needs: 95% margins asked per analysis
(``--target-margin od_flows=50,visits_per_tile=100``) solved into epsilon weights before any
data is read (public parameters only).

Each analysis's margin is the one its release publishes for its main counts
(:func:`expected_margin`: the cells of a count analysis, the histogram of a distribution, the
trips of the dataset statistics), a decreasing function of its epsilon: :func:`needed_epsilon`
finds the smallest epsilon that meets a target by bisection on that same calibration.

The rule (:func:`weights_for_targets`): when the targets' epsilons fit in the total, every
target is met and the rest is shared equally by the analyses without a target (with none,
the targets' epsilons are scaled up to spend the whole budget: their margins only shrink).
When they do not fit, the targets come first: each analysis without a target keeps a tenth
of an equal share (:data:`FLOOR_SHARE`), the targeted ones share the rest in proportion to
what they need, and the plan names the targets that cannot be met at this epsilon and the
epsilon that would meet them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Unpack

from privmob.errors import ConfigError
from privmob.privacy.mechanisms import calibrate
from privmob.surface import spelled

from .analyses import is_distribution, sensitivity
from .config import BuildOptions, ReportConfig

#: what an analysis without a target keeps, as a share of an equal split, when targets do not fit
FLOOR_SHARE = 0.1
#: bisection bounds and steps of :func:`needed_epsilon` (to about 1e-9), and the slack added
_LOW, _HIGH, _STEPS, _SLACK = 1e-9, 1e9, 80, 1e-6


def build_config(
    *, target_margins: Mapping[str, float] | None = None, **options: Unpack[BuildOptions]
) -> ReportConfig:
    """:meth:`ReportConfig.build` of ``options``, its weights solved from ``target_margins``
    (95% margins per analysis, in its counts' units; not with ``weights``) when given."""
    if target_margins and options.get("weights"):
        raise ConfigError(
            "give the budget split as weights or as target margins, not both",
            hint=spelled(
                "drop --budget-split or --target-margin", "drop weights= or target_margins="
            ),
        )
    cfg = ReportConfig.build(**options)
    if not target_margins:
        return cfg
    targets = {str(a): _margin(a, t) for a, t in target_margins.items()}
    return dataclasses.replace(
        cfg, weights=weights_for_targets(cfg, targets), target_margins=targets
    )


def _margin(name: object, value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the target margin of {name} must be a number, got {value!r}") from exc


def expected_margin(name: str, epsilon: float, cfg: ReportConfig) -> int:
    """The 95% margin of ``name``'s published counts when it gets ``epsilon`` (as the release
    calibrates it: :mod:`.analyses`)."""
    if name == "dataset_statistics":
        eps, l1 = epsilon / 2, sensitivity(name, cfg, "trips")
    elif is_distribution(name):
        eps, l1 = epsilon * (1 - cfg.quantile_share), sensitivity(name, cfg)
    else:
        eps, l1 = epsilon, sensitivity(name, cfg)
    noise, _ = calibrate(cfg.noise_kind, eps, l1_sensitivity=l1, unit=cfg.unit)
    return int(noise.margin_of_error(cfg.confidence))


def needed_epsilon(name: str, target: float, cfg: ReportConfig) -> float:
    """The smallest epsilon (to a relative 1e-9) at which ``name``'s margin is at most
    ``target``."""
    lo, hi = _LOW, _HIGH
    if expected_margin(name, hi, cfg) > target:
        raise ConfigError(
            f"no epsilon gives {name} a 95% margin of ±{target:g}",
            hint="ask for a larger margin (a count's margin is at least 1)",
        )
    for _ in range(_STEPS):
        mid = (lo * hi) ** 0.5
        if expected_margin(name, mid, cfg) <= target:
            hi = mid
        else:
            lo = mid
    return hi * (1 + _SLACK)  # the split's normalisation must not round it back below


def weights_for_targets(cfg: ReportConfig, targets: Mapping[str, float]) -> dict[str, float]:
    """Budget weights (epsilons) of the selected analyses meeting ``targets`` if the total
    allows it (module docstring)."""
    unknown = [a for a in targets if a not in cfg.selected]
    if unknown:
        raise ConfigError(
            f"target margins for analyses not in the report: {unknown}",
            hint="choose from: " + ", ".join(cfg.selected),
        )
    bad = [a for a, t in targets.items() if not t > 0]
    if bad:
        raise ConfigError(f"target margins must be > 0: {bad}")
    need = {a: needed_epsilon(a, float(t), cfg) for a, t in targets.items()}
    others = [a for a in cfg.selected if a not in need]
    spare = cfg.epsilon - sum(need.values())
    if spare > 0 and others:
        return {**need, **dict.fromkeys(others, spare / len(others))}
    if spare >= 0:  # no other analysis: the targets share the whole budget in proportion
        return need
    floor = FLOOR_SHARE * cfg.epsilon / len(cfg.selected)
    rest = cfg.epsilon - floor * len(others)
    scale = rest / sum(need.values())
    return {**{a: e * scale for a, e in need.items()}, **dict.fromkeys(others, floor)}


def target_notes(cfg: ReportConfig) -> list[str]:
    """One line per selected analysis: its expected margin, and its target met or not."""
    lines = []
    for name in cfg.selected:
        margin = expected_margin(name, cfg.epsilon_for(name), cfg)
        target = cfg.target_margins.get(name)
        said = f"{name} ±{margin:,}"
        if target is not None:
            said += f" (target ±{target:g}: {'met' if margin <= target else 'NOT met'})"
        lines.append(said)
    missed = unmet_targets(cfg)
    head = "expected 95% margins: " + ", ".join(lines)
    if missed:
        need = sum(needed_epsilon(a, t, cfg) for a, t in cfg.target_margins.items())
        head += (
            f"; not met at epsilon {cfg.epsilon:g}: {', '.join(missed)} (the targets alone "
            f"need epsilon {need:.3g}: a larger epsilon, larger targets or fewer analyses)"
        )
    return [head]


def unmet_targets(cfg: ReportConfig) -> list[str]:
    """The analyses whose target margin this config's split cannot meet."""
    return [
        a for a, t in cfg.target_margins.items() if expected_margin(a, cfg.epsilon_for(a), cfg) > t
    ]
