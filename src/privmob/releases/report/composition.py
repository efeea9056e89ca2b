"""How the report's analyses compose: pure epsilon (Laplace, basic composition), or zCDP with
discrete Gaussian noise where it gives a smaller error (issue 40 item 2).

Public parameters only (the config): nothing here reads data.

**Pure** (the default without a delta, byte-identical to the report before this module): each
analysis gets ``epsilon * share`` and discrete Laplace noise of scale ``Delta1 / epsilon_i``;
the epsilons add up to ``epsilon``.

**zCDP** (``composition="zcdp"``, or any ``delta > 0``): a part that adds noise to a count
vector (:func:`noise_parts`: the counts of an analysis, a distribution's histogram, the
users and the trips of the dataset statistics) gets either

* discrete Laplace at its pure share ``epsilon_i = epsilon * share_i`` (as today), or
* discrete Gaussian of ``sigma_i = Delta2_i / sqrt(2 rho_i)``, which is ``rho_i``-zCDP
  (Canonne, Kamath, Steinke 2020, Theorem 14, for the multivariate discrete Gaussian).

The Gaussian parts ``G`` share one zCDP budget: with ``S_G`` the sum of their shares,
``rho_G`` is the largest rho whose tight conversion (:func:`~privmob.privacy.zcdp.zcdp_epsilon`,
equal to OpenDP's ``make_zCDP_to_approxDP``) at ``delta`` is ``epsilon * S_G``, and part ``i``
gets ``rho_G * share_i / S_G``. The Laplace parts and the quantile summaries (the exponential
mechanism, always pure) keep ``epsilon_L = epsilon - epsilon * S_G``. The report is then
``(epsilon_L + zcdp_epsilon(rho_G, delta), delta)``-DP by basic composition, which is at most
``(epsilon, delta)``; the ledger is charged two entries, the pure part and the rho part, so its
own zCDP accounting composes the rho part with the dataset's other rho entries.

**The choice** (:func:`plan_composition`): the conversion is sublinear in rho, so a Gaussian
part gets more rho per share the more parts are Gaussian. The parts are ordered by
``(Delta2 / Delta1) * sqrt(share)`` (those that gain most from Gaussian noise first); for
every prefix of that order as ``G`` (and the sets met by leaving out, again and again, the
parts it does not help) the plan computes each part's expected error E|noise| (exact, for the
discrete distributions: :func:`expected_abs_error`), keeps the sets where every Gaussian
part's expected error is smaller than its Laplace one at its pure share (so no analysis is
worse than under pure composition; its 95% margin is then smaller too, the Gaussian's tails
being lighter), and picks the one with the largest total gain (the sum of the log ratios).
The Laplace has more mass near zero: at equal expected errors its median |error| is smaller,
so a median-based measure (the benchmark's relative error of large cells) can still favour
Laplace a little where the plan chose Gaussian. When no set helps, the
report is pure even with a delta, and charged as pure (delta 0). The plan's notes and the
release's metadata say, per part, the mechanism, sigma or scale, rho or epsilon, its typical
error and 95% margin, and those the other mechanism would have had.

The L2 sensitivities (:func:`l2_squared`) come from the same enforced bounds as the L1 ones
(:func:`~.analyses.sensitivity`), by :func:`privmob.privacy.l2_bounds.capped_l2_squared`: the
report enforces M trips per user and, by default, no per-cell cap of its own, so a vector a user
changes by ``t`` in L1 in one part may take it all in one cell (L2 = t); where a unit changes
independent parts (trips per hour's start and end halves, the three columns of missing values)
the squared bounds add. With ``od_cell_cap = c`` the report also keeps at most ``c`` of a
user's trips in any one OD cell (enforced in the engine, :func:`~.sql.cap_per_cell`), so
od_flows' L2 bound is ``capped_l2_squared(M, c)`` (at most ``sqrt(M c)``; its L1 stays M).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from privmob.json_types import JSONObject
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.discrete_gaussian import sigma_for_rho
from privmob.privacy.l2_bounds import capped_l2_squared, l2_of
from privmob.privacy.mechanisms import Noise, NoiseKind, calibrate
from privmob.privacy.zcdp import rho_for_zcdp_epsilon, zcdp_epsilon

from .analyses import is_distribution, sensitivity
from .compositions import resolve_composition
from .config import MISSING_COLUMNS, ReportConfig

CONVERSION = (
    "rho-zCDP to (epsilon, delta)-DP by Canonne, Kamath and Steinke 2020 (Prop. 12), as "
    "OpenDP's make_zCDP_to_approxDP; Gaussian and pure parts composed by basic composition"
)


def resolved(cfg: ReportConfig) -> tuple[str, float]:
    """The composition and delta a config asks for: ``("pure", 0.0)`` or ``("zcdp", delta)``
    (:func:`~.compositions.resolve_composition`)."""
    return resolve_composition(cfg.composition, cfg.delta)


@dataclass(frozen=True)
class Part:
    """One noise-adding part of an analysis, its share of the report's budget and its enforced
    sensitivities (``l2_squared`` exact)."""

    analysis: str
    part: str
    share: float
    l1: int
    l2_squared: int

    @property
    def l2(self) -> float:
        return l2_of(self.l2_squared)


def l2_squared(analysis: str, cfg: ReportConfig, part: str = "") -> int:
    """The squared L2 sensitivity of one analysis (or part), from the enforced bounds
    (module docstring; the L1 bounds are :func:`~.analyses.sensitivity`)."""
    m = cfg.max_trips if cfg.unit is PrivacyUnit.USER else 1
    if analysis == "missing_values":  # each column at most one per trip, columns independent
        return len(MISSING_COLUMNS) * capped_l2_squared(m)
    if analysis == "trips_per_hour":  # the start half and the end half, m trips each
        return 2 * capped_l2_squared(m)
    if analysis == "time_between_trips" and cfg.unit is PrivacyUnit.TRIP:
        # one trip between two others: one gap out (-1), two gaps in (+1 each, maybe one bin)
        return 1 + capped_l2_squared(2)
    if analysis in ("trips_per_user", "radius_of_gyration", "user_tile_count", "mobility_entropy"):
        # a user is in one bin (user level: +-1); at trip level a value moves bins (1 + 1)
        return 1 if cfg.unit is PrivacyUnit.USER else 2
    if analysis == "od_flows" and cfg.od_cell_cap is not None:  # M trips, at most c per cell
        return capped_l2_squared(sensitivity(analysis, cfg), cfg.od_cell_cap)
    # everything else: a total of Delta1, no per-cell cap, so possibly all in one cell
    return capped_l2_squared(sensitivity(analysis, cfg, part))


def noise_parts(cfg: ReportConfig) -> list[Part]:
    """The parts that add noise to a count vector, in report order, with their shares."""
    total = math.fsum(cfg.weights.get(a, 1.0) for a in cfg.selected)
    out = []
    for name in cfg.selected:
        share = cfg.weights.get(name, 1.0) / total
        if name == "dataset_statistics":
            for part in ("users", "trips"):
                l1 = sensitivity(name, cfg, part)
                out.append(Part(name, part, share / 2, l1, l2_squared(name, cfg, part)))
        elif is_distribution(name):
            hist = share * (1 - cfg.quantile_share)
            out.append(Part(name, "histogram", hist, sensitivity(name, cfg), l2_squared(name, cfg)))
        else:
            out.append(Part(name, "counts", share, sensitivity(name, cfg), l2_squared(name, cfg)))
    return out


@dataclass(frozen=True)
class Choice:
    """The mechanism of one part and why: ``noise`` is what it draws; ``epsilon`` (Laplace) or
    ``rho`` (Gaussian) its cost; both margins are 95% margins of one cell."""

    part: Part
    noise: Noise
    epsilon: float | None
    rho: float | None
    margin: int
    laplace_margin: int
    gaussian_margin: int | None
    #: the epsilon a Laplace part has (or a Gaussian part would have) at its pure share
    laplace_epsilon: float
    #: expected errors E|noise|, which decide: this part's, Laplace's, Gaussian's
    typical: float = 0.0
    laplace_typical: float = 0.0
    gaussian_typical: float | None = None

    @property
    def gaussian(self) -> bool:
        return self.noise.kind.traits.zcdp

    @property
    def why(self) -> str:
        lap = (
            f"Laplace at epsilon {self.laplace_epsilon:.4g}: expected error "
            f"{self.laplace_typical:,.1f}, 95% ±{self.laplace_margin:,}"
        )
        if self.gaussian:
            return f"Gaussian: expected error {self.typical:,.1f}, 95% ±{self.margin:,}; {lap}"
        if self.gaussian_typical is None:  # pure composition: not compared
            return lap
        gauss = f"Gaussian {self.gaussian_typical:,.1f} (95% ±{self.gaussian_margin:,})"
        if self.gaussian_typical < self.laplace_typical:
            return (
                f"{lap}; {gauss} only with every part Gaussian, which makes another part's "
                "expected error larger than under pure composition"
            )
        return f"{lap}; {gauss} even with every part Gaussian"

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "mechanism": self.noise.kind.value,
            "l1_sensitivity": self.part.l1,
            "l2_sensitivity": self.part.l2,
            "share_of_budget": self.part.share,
            "margin_of_error_95": self.margin,
            "laplace_margin_of_error_95": self.laplace_margin,
            "expected_abs_error": self.typical,
            "laplace_expected_abs_error": self.laplace_typical,
            "why": self.why,
        }
        if self.gaussian:
            out |= {"sigma": self.noise.scale, "rho": self.rho}
        else:
            out |= {"scale": self.noise.scale, "epsilon": self.epsilon}
        return out


@dataclass(frozen=True)
class CompositionPlan:
    """The report's mechanisms and cost under its composition (:func:`plan_composition`)."""

    epsilon: float
    delta: float
    composition: str
    choices: tuple[Choice, ...]
    #: the Gaussian parts' zCDP budget (0: none) and the pure parts' epsilon
    rho: float
    epsilon_pure: float
    unit: PrivacyUnit

    @property
    def gaussian(self) -> bool:
        return self.rho > 0

    @property
    def gaussian_parts(self) -> tuple[str, ...]:
        """The parts with Gaussian noise, ``analysis/part``."""
        return tuple(f"{c.part.analysis}/{c.part.part}" for c in self.choices if c.gaussian)

    def choice(self, analysis: str, part: str) -> Choice:
        for c in self.choices:
            if (c.part.analysis, c.part.part) == (analysis, part):
                return c
        raise KeyError((analysis, part))

    def noise_for(self, analysis: str, part: str) -> Noise | None:
        """The Gaussian noise of a part, or None (the part keeps its pure-epsilon Laplace)."""
        c = self.choice(analysis, part)
        return c.noise if c.gaussian else None

    def part_cost(self, analysis: str, part: str) -> Cost:
        """One Gaussian part's own cost (its rho, stated at the report's delta)."""
        rho = self.choice(analysis, part).rho
        if rho is None:
            raise KeyError((analysis, part))
        return Cost(zcdp_epsilon(rho, self.delta), self.delta, rho, self.unit)

    @cached_property
    def epsilon_zcdp(self) -> float:
        """The Gaussian parts' epsilon at ``delta`` (the tight conversion of ``rho``)."""
        return zcdp_epsilon(self.rho, self.delta) if self.gaussian else 0.0

    @property
    def cost_parts(self) -> list[tuple[str, Cost]]:
        """The ledger entries: the pure part and the rho part (one when the other is empty)."""
        parts = []
        if self.epsilon_pure > 0:
            parts.append(
                (
                    "DP mobility report: Laplace and quantile parts (pure epsilon)",
                    Cost.pure(self.epsilon_pure, self.unit),
                )
            )
        if self.gaussian:
            parts.append(
                (
                    "DP mobility report: discrete Gaussian parts (rho-zCDP)",
                    Cost(self.epsilon_zcdp, self.delta, self.rho, self.unit),
                )
            )
        return parts

    @property
    def cost(self) -> Cost:
        """The whole report's cost: the sum of :attr:`cost_parts` (basic composition)."""
        parts = [c for _d, c in self.cost_parts]
        total = parts[0]
        for c in parts[1:]:
            total = total + c
        return total

    def to_dict(self, at_bound: bool = True) -> JSONObject:
        """The plan as the metadata states it; ``at_bound`` False: before a bound chosen
        privately exists (each part's mechanism, share and cost, which do not depend on it; not
        its sensitivities, noise scale or margins, which do)."""
        parts: JSONObject = {
            f"{c.part.analysis}/{c.part.part}": c.to_dict()
            if at_bound
            else {
                "mechanism": c.noise.kind.value,
                "share_of_budget": c.part.share,
                **({"rho": c.rho} if c.gaussian else {"epsilon": c.epsilon}),
                "sensitivity_and_noise": "stated in the release, at the bound chosen",
            }
            for c in self.choices
        }
        return {
            "composition": self.composition,
            "delta": self.delta if self.gaussian else 0.0,
            "delta_asked": self.delta,
            "rho": self.rho,
            "epsilon_pure": self.epsilon_pure,
            "epsilon_zcdp": self.epsilon_zcdp,
            "conversion": CONVERSION,
            "rule": "per part, discrete Gaussian where its expected error E|noise| is smaller "
            "than discrete Laplace's at its pure share, no part's expected error larger than "
            "under pure composition (then its 95% margin is smaller too)",
            "parts": parts,
        }

    def notes(self) -> list[str]:
        """The plan's lines: the composition chosen, and each part's mechanism and why."""
        if not self.gaussian:
            head = (
                f"composition: pure epsilon (zCDP asked, delta {self.delta:g}): discrete "
                "Gaussian would not lower any part's expected error at this epsilon and delta "
                "(Laplace kept; charged as pure epsilon, delta 0)"
            )
        else:
            head = (
                f"composition: zCDP, delta {self.delta:g}: Gaussian parts rho {self.rho:.6g} "
                f"(epsilon {self.epsilon_zcdp:.6g} at delta {self.delta:g}, tight CKS "
                f"conversion) + pure parts epsilon {self.epsilon_pure:.6g}"
            )
        per = [
            f"{c.part.analysis}/{c.part.part}: "
            + (
                f"discrete Gaussian sigma {c.noise.scale:.4g} (rho {c.rho:.4g}, L2 {c.part.l2:.4g})"
                if c.gaussian
                else f"discrete Laplace scale {c.noise.scale:.4g} (epsilon {c.epsilon:.4g}, "
                f"L1 {c.part.l1})"
            )
            + f": {c.why}"
            for c in self.choices
        ]
        return [head + "; " + "; ".join(per)]


def expected_abs_error(noise: Noise) -> float:
    """E|noise| of one cell, exact: discrete Laplace of scale b is 2q / (1 - q^2) with
    q = exp(-1/b); the discrete Gaussian's is summed over its support (to 12 sigma past which
    the terms are below float rounding)."""
    error = noise.kind.traits.expected_abs_error
    if error is None:
        raise ValueError(f"no expected error for {noise.kind}")
    return error(noise.scale)


def _laplace(part: Part, cfg: ReportConfig) -> tuple[Noise, float]:
    eps = cfg.epsilon * part.share
    noise, _ = calibrate(NoiseKind.DISCRETE_LAPLACE, eps, l1_sensitivity=part.l1, unit=cfg.unit)
    return noise, eps


def _gaussian(part: Part, rho_g: float, share_g: float) -> tuple[Noise, float]:
    rho = rho_g * part.share / share_g
    return Noise(NoiseKind.DISCRETE_GAUSSIAN, sigma_for_rho(part.l2, rho)), rho


def _gaussian_parts(
    parts: list[Part],
    chosen: tuple[int, ...],
    cfg: ReportConfig,
    delta: float,
    lap: list[tuple[float, int]],
    margins: bool = True,
) -> tuple[float, dict[int, Choice]]:
    """The zCDP budget of the parts ``chosen`` as Gaussian, and their choices (``margins``
    False: their 95% margins left at 0, for a set only compared by expected errors)."""
    share_g = math.fsum(parts[i].share for i in chosen)
    rho_g = rho_for_zcdp_epsilon(cfg.epsilon * share_g, delta)
    picks = {}
    for i in chosen:
        noise, rho = _gaussian(parts[i], rho_g, share_g)
        m = noise.margin_of_error(cfg.confidence) if margins else 0
        typ = expected_abs_error(noise)
        picks[i] = Choice(
            parts[i],
            noise,
            None,
            rho,
            m,
            lap[i][1],
            m,
            cfg.epsilon * parts[i].share,
            typ,
            lap[i][0],
            typ,
        )
    return rho_g, picks


def _candidates(
    parts: list[Part], cfg: ReportConfig, delta: float, lap: list[tuple[float, int]]
) -> list[tuple[int, ...]]:
    """The sets of Gaussian parts the plan compares: every prefix of the parts ordered by
    ``(Delta2 / Delta1) sqrt(share)``, and the sets met by starting from all parts and leaving
    out, again and again, those that Gaussian noise does not help."""
    order = sorted(
        range(len(parts)), key=lambda i: parts[i].l2 / parts[i].l1 * parts[i].share ** 0.5
    )
    out = [tuple(sorted(order[:size])) for size in range(len(order), 0, -1)]
    chosen = tuple(range(len(parts)))
    while chosen:
        _rho, picks = _gaussian_parts(parts, chosen, cfg, delta, lap, margins=False)
        kept = tuple(i for i in chosen if picks[i].typical < picks[i].laplace_typical)
        if kept == chosen:
            break
        chosen = kept
        if chosen and chosen not in out:
            out.append(chosen)
    return out


#: plans already made, by the config's repr (every public parameter): a plan depends on the
#: config alone, and the split's solve, its notes, the plan and the draft ask for the same one
_PLANS: dict[str, CompositionPlan] = {}
_PLANS_KEPT = 64


def plan_composition(cfg: ReportConfig, gaussian: tuple[str, ...] | None = None) -> CompositionPlan:
    """The mechanism of every part and the report's cost (module docstring: the rule);
    ``gaussian``: the Gaussian parts given (``analysis/part``, as :attr:`CompositionPlan.
    gaussian_parts` names them) rather than chosen: a bound chosen privately keeps the parts
    chosen at its largest candidate, so the charge does not depend on the bound."""
    key = repr((cfg, gaussian))
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        plan = _PLANS[key] = _plan_composition(cfg, gaussian)
    return plan


def _plan_composition(cfg: ReportConfig, gaussian: tuple[str, ...] | None) -> CompositionPlan:
    how, delta = resolved(cfg)
    parts = noise_parts(cfg)
    laplace = [_laplace(p, cfg) for p in parts]
    lap_margin = [(expected_abs_error(n), n.margin_of_error(cfg.confidence)) for n, _e in laplace]
    pure = [
        Choice(p, n, e, None, m[1], m[1], None, e, m[0], m[0])
        for p, (n, e), m in zip(parts, laplace, lap_margin, strict=True)
    ]
    if how == "pure":
        return CompositionPlan(cfg.epsilon, 0.0, how, tuple(pure), 0.0, cfg.epsilon, cfg.unit)
    best: tuple[float, tuple[int, ...]] = (0.0, ())
    if gaussian is not None:
        names = [f"{p.analysis}/{p.part}" for p in parts]
        best = (0.0, tuple(names.index(n) for n in gaussian))
    for chosen in _candidates(parts, cfg, delta, lap_margin) if gaussian is None else ():
        _rho, picks = _gaussian_parts(parts, chosen, cfg, delta, lap_margin, margins=False)
        if any(c.typical >= c.laplace_typical for c in picks.values()):
            continue
        gain = math.fsum(math.log(c.laplace_typical / c.typical) for c in picks.values())
        if gain > best[0]:
            best = (gain, chosen)
    # the margins of the set chosen, and of every part Gaussian (what the plan says it would be)
    _rho, every = _gaussian_parts(parts, tuple(range(len(parts))), cfg, delta, lap_margin)
    rho_g, picks = _gaussian_parts(parts, best[1], cfg, delta, lap_margin) if best[1] else (0.0, {})
    choices = tuple(
        picks[i]
        if i in picks
        else replace(pure[i], gaussian_margin=every[i].margin, gaussian_typical=every[i].typical)
        for i in range(len(parts))
    )
    share_g = math.fsum(parts[i].share for i in picks)
    eps_pure = cfg.epsilon - cfg.epsilon * share_g if picks else cfg.epsilon
    return CompositionPlan(cfg.epsilon, delta, how, choices, rho_g, eps_pure, cfg.unit)
