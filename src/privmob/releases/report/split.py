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

Under zCDP composition (a delta: :mod:`.composition`) an analysis's main part may get discrete
Gaussian noise, whose margin follows from the composition plan (its sigma from the rho the
plan gives it), not from its Laplace calibration. The split then solves the targets with the
noise each analysis gets under that plan (:func:`weights_for_targets`): a Gaussian part's rho
is proportional to its share at the plan's rho per share, so the epsilon that meets its target
is its epsilon times (its sigma / the largest sigma whose margin meets the target)^2; the plan
is recomputed at the new split and the solve repeated until it no longer moves (the choice of
Gaussian parts and the rho per share depend on the split). Of the splits met on the way, the
one that leaves the fewest targets unmet is kept (the last of those): the Laplace split is the
first, so the solve never meets fewer targets than it. The margins the plan states, and the
targets it says are met or not, are read from the composition plan of the split kept
(:func:`planned_margins`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from typing import Unpack

from privmob.errors import ConfigError
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.surface import spelled

from .analyses import is_distribution, sensitivity
from .composition import CompositionPlan, plan_composition, resolved
from .config import BuildOptions, ReportConfig

#: what an analysis without a target keeps, as a share of an equal split, when targets do not fit
FLOOR_SHARE = 0.1
#: bisection bounds and steps of :func:`needed_epsilon` (to about 1e-9), and the slack added
_LOW, _HIGH, _STEPS, _SLACK = 1e-9, 1e9, 80, 1e-6
#: the most rounds of the zCDP solve, and the relative change at which it has settled (below
#: the slack, so the split kept is at most that far from the fixed point: module docstring)
_ROUNDS, _SETTLED = 12, 1e-7


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
    if cfg.bound_choice is not None:
        raise ConfigError(
            "target margins need a fixed bound: the margins scale with M, which a bound chosen "
            "privately only has after the charge",
            hint=spelled("give -T a number, or drop --target-margin", "give a whole number"),
        )
    targets = {str(a): _margin(a, t) for a, t in target_margins.items()}
    return dataclasses.replace(
        cfg, weights=weights_for_targets(cfg, targets), target_margins=targets
    )


def _margin(name: object, value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the target margin of {name} must be a number, got {value!r}") from exc


def main_part(name: str) -> str:
    """The part of ``name`` whose margin a target speaks of (:func:`expected_margin`): the
    trips of the dataset statistics, a distribution's histogram, the counts otherwise."""
    if name == "dataset_statistics":
        return "trips"
    return "histogram" if is_distribution(name) else "counts"


def expected_margin(name: str, epsilon: float, cfg: ReportConfig) -> int:
    """The 95% margin of ``name``'s published counts when it gets ``epsilon`` with Laplace
    noise (pure epsilon: as the release calibrates it, :mod:`.analyses`; under zCDP the
    composition plan's, :func:`planned_margins`)."""
    if name == "dataset_statistics":
        eps, l1 = epsilon / 2, sensitivity(name, cfg, "trips")
    elif is_distribution(name):
        eps, l1 = epsilon * (1 - cfg.quantile_share), sensitivity(name, cfg)
    else:
        eps, l1 = epsilon, sensitivity(name, cfg)
    noise, _ = calibrate(cfg.noise_kind, eps, l1_sensitivity=l1, unit=cfg.unit)
    return int(noise.margin_of_error(cfg.confidence))


def plan_of(cfg: ReportConfig) -> CompositionPlan | None:
    """The composition plan of ``cfg`` under zCDP (None: pure epsilon, Laplace everywhere)."""
    return None if resolved(cfg)[0] == "pure" else plan_composition(cfg)


def planned_margins(
    cfg: ReportConfig, plan: CompositionPlan | None = None
) -> dict[str, tuple[int, str]]:
    """Per selected analysis, the 95% margin of its main part (:func:`main_part`) with the noise
    the release draws under the resolved composition, and that noise's mechanism: Laplace at
    its epsilon when pure, the composition plan's choice (``plan``, computed when not given)
    under zCDP."""
    plan = plan if plan is not None else plan_of(cfg)
    if plan is None:
        return {
            a: (expected_margin(a, cfg.epsilon_for(a), cfg), cfg.noise_kind.value)
            for a in cfg.selected
        }
    out = {}
    for a in cfg.selected:
        c = plan.choice(a, main_part(a))
        out[a] = (c.margin, c.noise.kind.value)
    return out


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
    allows it, with the noise each analysis gets under the resolved composition (module
    docstring)."""
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
    if resolved(cfg)[0] == "pure":
        return _split(cfg, need)
    return _zcdp_split(cfg, {a: float(t) for a, t in targets.items()}, need)


def _split(cfg: ReportConfig, need: Mapping[str, float]) -> dict[str, float]:
    """The weights from the targets' needed epsilons (the rule of the module docstring)."""
    others = [a for a in cfg.selected if a not in need]
    spare = cfg.epsilon - sum(need.values())
    if spare > 0 and others:
        return {**need, **dict.fromkeys(others, spare / len(others))}
    if spare >= 0:  # no other analysis: the targets share the whole budget in proportion
        return dict(need)
    floor = FLOOR_SHARE * cfg.epsilon / len(cfg.selected)
    rest = cfg.epsilon - floor * len(others)
    scale = rest / sum(need.values())
    return {**{a: e * scale for a, e in need.items()}, **dict.fromkeys(others, floor)}


def _zcdp_split(
    cfg: ReportConfig, targets: dict[str, float], need: dict[str, float]
) -> dict[str, float]:
    """The split solved with each analysis's noise under the composition plan (the module
    docstring: repeated until it settles; the split leaving the fewest targets unmet kept)."""
    best: tuple[int, dict[str, float]] = (len(targets) + 1, {})
    for _ in range(_ROUNDS):
        weights = _split(cfg, need)
        trial = dataclasses.replace(cfg, weights=weights, target_margins=targets)
        plan = plan_composition(trial)
        missed = len(unmet_targets(trial, plan))
        if missed <= best[0]:
            best = (missed, weights)
        again = {a: needed_under(a, t, trial, plan) for a, t in targets.items()}
        if all(abs(again[a] - need[a]) <= _SETTLED * need[a] for a in need):
            break
        need = again
    return best[1]


def needed_under(name: str, target: float, cfg: ReportConfig, plan: CompositionPlan) -> float:
    """The epsilon ``name`` needs for ``target`` with the mechanism ``plan`` gives its main
    part: Laplace's :func:`needed_epsilon`, or, for a Gaussian part, its epsilon times
    (sigma / the largest sigma meeting the target)^2 (its rho grows with its share at the
    plan's rho per share)."""
    c = plan.choice(name, main_part(name))
    if not c.gaussian:
        return needed_epsilon(name, target, cfg)
    ratio = c.noise.scale / gaussian_sigma_for_margin(target, cfg.confidence)
    return cfg.epsilon_for(name) * ratio**2 * (1 + _SLACK)


@lru_cache(maxsize=256)
def gaussian_sigma_for_margin(target: float, confidence: float = 0.95) -> float:
    """The largest sigma (to a relative 1e-9) whose discrete Gaussian has a ``confidence``
    margin of at most ``target``."""

    def meets(sigma: float) -> bool:
        return Noise(NoiseKind.DISCRETE_GAUSSIAN, sigma).margin_of_error(confidence) <= target

    lo, hi = max(target, 1.0) / 4, max(target, 1.0)
    while not meets(lo):  # a margin of about 2 sigma: at most one halving in practice
        lo /= 2
    while meets(hi):
        lo, hi = hi, hi * 2
    while hi / lo > 1 + 1e-9:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo


def target_notes(cfg: ReportConfig) -> list[str]:
    """One line: each selected analysis's expected margin under the resolved composition (and,
    under zCDP, its mechanism), and its target met or not."""
    plan = plan_of(cfg)
    margins = planned_margins(cfg, plan)
    lines = []
    for name in cfg.selected:
        margin, mechanism = margins[name]
        target = cfg.target_margins.get(name)
        said = f"{name} ±{margin:,}"
        if plan is not None:
            said += f" {_MECHANISM.get(mechanism, mechanism)}"
        if target is not None:
            said += f" (target ±{target:g}: {'met' if margin <= target else 'NOT met'})"
        lines.append(said)
    missed = unmet_targets(cfg, plan)
    head = "expected 95% margins: "
    if plan is not None:
        head = (
            f"expected 95% margins (zCDP composition, delta {plan.delta:g}: each analysis with "
            "the noise the composition plan gives it): "
        )
    head += ", ".join(lines)
    if missed:
        if plan is None:
            need = sum(needed_epsilon(a, t, cfg) for a, t in cfg.target_margins.items())
            at = f"need epsilon {need:.3g}"
        else:
            need = sum(needed_under(a, t, cfg, plan) for a, t in cfg.target_margins.items())
            at = f"need about epsilon {need:.3g} at this plan's mechanisms and rho per share"
        head += (
            f"; not met at epsilon {cfg.epsilon:g}: {', '.join(missed)} (the targets alone "
            f"{at}: a larger epsilon, larger targets or fewer analyses)"
        )
    return [head]


#: how the plan's notes name a mechanism
_MECHANISM = {
    NoiseKind.DISCRETE_GAUSSIAN.value: "Gaussian",
    NoiseKind.DISCRETE_LAPLACE.value: "Laplace",
}


def unmet_targets(cfg: ReportConfig, plan: CompositionPlan | None = None) -> list[str]:
    """The analyses whose target margin this config's split cannot meet, with the noise each
    gets under the resolved composition (``plan``: its composition plan, computed when not
    given)."""
    if not cfg.target_margins:
        return []
    margins = planned_margins(cfg, plan)
    return [a for a, t in cfg.target_margins.items() if margins[a][0] > t]
