"""Plan a programme of releases under one per-person budget (issue 17; seeds 002 and 003).

An operator publishes a programme (52 weekly OD matrices, 12 monthly population counts, ...),
not one release. From a declared schedule and a total per-person budget over a horizon, this
module computes, from public parameters only (it reads no data and spends no budget):

* per entry, the smallest per-release epsilon whose noise meets the accuracy target
  P(|error of a cell| > alpha) <= beta (seed 003, Theorem 6, :mod:`privmob.evaluate.accuracy`),
  for the entry's contribution bound T, and a suppression threshold tau (the smallest t with
  P(noise >= t) <= beta: an empty cell is shown with probability <= beta) for readers who
  want one; the default release stays unclamped;
* the programme's per-person cost under pure composition (sum), approximate DP (each
  epsilon-DP release is epsilon^2/2-zCDP; the sum converts to (epsilon, delta)) and zCDP with
  discrete Gaussian noise calibrated to the same targets, next to the naive per-trip
  accounting that seed 002 criticises (releases x trips x epsilon: 52 x 70 x 0.66 = 2402.4);
* when the budget cannot pay for the targets: which entry fails and what would work (a larger
  budget, fewer periods, a smaller bound, a looser alpha, or one user-level bound over the
  whole horizon instead of a bound per release).

A user-level bound over the horizon: each person contributes at most T_h trips over all the
releases of an entry (e.g. their first T_h trips of the year). The releases' counts then change
by at most T_h in L1 over the whole horizon, so noise of scale T_h / epsilon on every cell of
every release makes the entry epsilon-DP per person in total, however many releases it has.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privmob.errors import ConfigError, InputError
from privmob.evaluate import accuracy as acc
from privmob.privacy.costs import PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.postprocess import zero_cell_bias
from privmob.privacy.zcdp import zcdp_epsilon
from privmob.releases.kinds import names

#: the kinds a programme plans (from the registry of kinds)
KINDS = names(programme=True)
DEFAULT_DELTA = 1e-6


@dataclass(frozen=True)
class ScheduleEntry:
    """One kind of release in a programme: ``count`` releases at ``cadence``.

    ``zones`` is the tessellation size (an OD matrix has zones x (zones - 1) cells);
    ``max_trips`` is the contribution bound T of one release (user level) or the most trips
    one person can have in one release (trip level: the claim group privacy needs).
    Either ``alpha`` (with ``beta``) or a fixed ``epsilon`` per release.
    """

    kind: str
    count: int
    cadence: str = "release"
    zones: int = 1
    alpha: int | None = None
    beta: float = 0.05
    unit: PrivacyUnit = PrivacyUnit.USER
    max_trips: int = 1
    epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"unknown release kind {self.kind!r}", hint=f"one of {KINDS}")
        if int(self.count) != self.count or self.count < 1:
            raise ConfigError(f"{self.kind}: count must be a whole number >= 1")
        if int(self.zones) != self.zones or self.zones < 1:
            raise ConfigError(f"{self.kind}: zones must be a whole number >= 1")
        if int(self.max_trips) != self.max_trips or self.max_trips < 1:
            raise ConfigError(f"{self.kind}: max_trips must be a whole number >= 1")
        if (self.alpha is None) == (self.epsilon is None):
            raise ConfigError(
                f"{self.kind}: give either an accuracy target (alpha, beta) or an epsilon"
            )
        if self.alpha is not None and (int(self.alpha) != self.alpha or self.alpha < 0):
            raise ConfigError(f"{self.kind}: alpha must be a whole number >= 0")
        if not 0 < self.beta < 1:
            raise ConfigError(f"{self.kind}: beta must be in (0, 1)")
        if self.epsilon is not None and not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"{self.kind}: epsilon must be > 0")
        if self.unit not in (PrivacyUnit.USER, PrivacyUnit.TRIP):
            raise ConfigError(f"{self.kind}: unit must be user or trip")

    @property
    def label(self) -> str:
        return f"{self.count} {self.cadence} {self.kind}"

    @property
    def cells(self) -> int:
        return self.zones * (self.zones - 1) if self.kind == "od" else self.zones

    @property
    def sensitivity(self) -> int:
        """L1 bound of one release for the unit it protects (1 for a trip)."""
        return self.max_trips if self.unit is PrivacyUnit.USER else 1

    @property
    def group(self) -> int:
        """Per-person multiplier of a release's epsilon (group privacy for trip level)."""
        return 1 if self.unit is PrivacyUnit.USER else self.max_trips


@dataclass(frozen=True)
class Programme:
    """A declared schedule and the per-person budget over its horizon."""

    entries: tuple[ScheduleEntry, ...]
    epsilon: float
    delta: float = DEFAULT_DELTA
    horizon: str = "the programme"
    noise: NoiseKind = NoiseKind.DISCRETE_LAPLACE

    def __post_init__(self) -> None:
        if not self.entries:
            raise ConfigError("the programme has no releases")
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"the programme's budget must be > 0, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta must be in (0, 1), got {self.delta}")
        if self.noise.traits.zcdp:
            raise ConfigError("plan with a Laplace kind; the zCDP column covers the Gaussian")


@dataclass
class EntryPlan:
    entry: ScheduleEntry
    epsilon: float  # per release
    noise_scale: float
    margin: int  # 1 - beta margin of one cell
    tau: int  # suggested threshold (empty cell shown with prob <= beta)
    tau_bias: float  # expected published value of an empty cell at that tau
    gaussian_sigma: float | None  # discrete Gaussian meeting the same target
    per_person: float = 0.0  # epsilon per person for the whole entry (pure)
    naive_per_trip: float = 0.0  # seed 002: releases x trips x trip-level epsilon
    suggestions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        return {
            "release": e.label,
            "kind": e.kind,
            "count": e.count,
            "cells": e.cells,
            "unit": e.unit.value,
            "max_trips": e.max_trips,
            "alpha": e.alpha,
            "beta": e.beta,
            "epsilon_per_release": self.epsilon,
            "noise_scale": self.noise_scale,
            "margin": self.margin,
            "tau": self.tau,
            "tau_bias_per_empty_cell": round(self.tau_bias, 6),
            "gaussian_sigma": self.gaussian_sigma,
            "epsilon_per_person": self.per_person,
            "naive_per_trip": self.naive_per_trip,
            "suggestions": self.suggestions,
        }


@dataclass
class ProgrammePlan:
    programme: Programme
    entries: list[EntryPlan]
    pure: float
    approximate: float
    zcdp_rho: float | None
    zcdp: float | None
    naive_per_trip: float
    feasible: bool
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        p = self.programme
        return {
            "horizon": p.horizon,
            "budget": {"epsilon": p.epsilon, "delta": p.delta},
            "noise": p.noise.value,
            "feasible": self.feasible,
            "problems": self.problems,
            "total": {
                "pure": self.pure,
                "approximate": self.approximate,
                "zcdp_rho": self.zcdp_rho,
                "zcdp": self.zcdp,
                "naive_per_trip": self.naive_per_trip,
            },
            "releases": [e.to_dict() for e in self.entries],
        }


def epsilon_for(alpha: int, beta: float, T: int, kind: NoiseKind) -> float:
    """Smallest epsilon with P(|noise| > alpha) <= beta for bound T (Theorem 6)."""
    return acc.thm6_epsilon(alpha, beta, T, kind)


def _fits(alpha: int, beta: float, T: int, kind: NoiseKind, releases: int, share: float) -> bool:
    """Do ``releases`` releases meeting the target with bound T fit in ``share``?"""
    try:
        return releases * epsilon_for(alpha, beta, T, kind) <= share
    except ConfigError:  # no epsilon below 1e6 meets it
        return False


def threshold(noise: Noise, beta: float) -> int:
    """Smallest integer tau >= 1 with P(noise >= tau) <= beta (symmetric noise)."""
    t = 1
    while noise.tail(t - 1) / 2.0 > beta:
        t *= 2
    lo, hi = max(1, t // 2), t
    while lo < hi:
        mid = (lo + hi) // 2
        if noise.tail(mid - 1) / 2.0 > beta:
            lo = mid + 1
        else:
            hi = mid
    return lo


def gaussian_sigma_for(alpha: int, beta: float) -> float:
    """Largest discrete-Gaussian sigma with P(|noise| > alpha) <= beta (bisection)."""
    lo, hi = 1e-3, max(1.0, float(alpha) + 1.0)
    if Noise(NoiseKind.DISCRETE_GAUSSIAN, lo).tail(alpha) > beta:
        raise ConfigError("no Gaussian noise meets this target")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if Noise(NoiseKind.DISCRETE_GAUSSIAN, mid).tail(alpha) <= beta:
            lo = mid
        else:
            hi = mid
    return lo


def _alpha_at(eps: float, beta: float, T: int, kind: NoiseKind) -> int:
    """The error bound (1 - beta) of a cell at this epsilon."""
    return acc.error_bound(eps, beta, T, kind)


def _largest(pred: Any, lo: int, hi: int) -> int:
    """Largest integer x in [lo, hi] with pred(x) true (pred monotone decreasing); lo - 1 if
    none."""
    if not pred(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan_programme(schedule: Programme | Mapping[str, Any] | str | Path) -> ProgrammePlan:
    """Per-release parameters meeting the targets, the total under three compositions, and
    what would make an infeasible programme feasible. Public arithmetic only.

    ``schedule``: a :class:`Programme`, a parsed document or a .json/.yaml file (the function
    the Session exposes as ``Session.plan_programme``).
    """
    prog = as_programme(schedule)
    kind = prog.noise
    plans: list[EntryPlan] = []
    for e in prog.entries:
        T = e.sensitivity
        eps = (
            e.epsilon if e.epsilon is not None else epsilon_for(int(e.alpha or 0), e.beta, T, kind)
        )
        noise = Noise(kind, T / eps)
        margin = noise.margin_of_error(1 - e.beta)
        tau = threshold(noise, e.beta)
        # the discrete Gaussian meeting the same per-cell target (alpha, or the Laplace margin)
        sigma = gaussian_sigma_for(int(e.alpha if e.alpha is not None else margin), e.beta)
        ep = EntryPlan(e, eps, noise.scale, margin, tau, zero_cell_bias(noise, tau), sigma)
        ep.per_person = e.count * e.group * eps
        # seed 002: every release x every trip of a person x the trip-level epsilon that
        # gives the same cell accuracy
        eps_trip = eps if e.unit is PrivacyUnit.TRIP else eps / max(T, 1)
        ep.naive_per_trip = e.count * e.max_trips * eps_trip
        plans.append(ep)
    pure = sum(p.per_person for p in plans)
    rho_pure = sum(p.entry.count * (p.entry.group * p.epsilon) ** 2 / 2.0 for p in plans)
    # the ledger's conversion (tight, Canonne, Kamath and Steinke 2020), so that a programme
    # the ledger would accept is never called infeasible
    approximate = min(pure, zcdp_epsilon(rho_pure, prog.delta))
    rho_g = 0.0
    for p in plans:
        assert p.gaussian_sigma is not None
        # L2 sensitivity of one release per person: T (user) or the group of g trips
        l2 = p.entry.sensitivity * p.entry.group
        rho_g += p.entry.count * l2**2 / (2.0 * p.gaussian_sigma**2)
    zc = zcdp_epsilon(rho_g, prog.delta)
    naive = sum(p.naive_per_trip for p in plans)
    best = min(pure, approximate, zc)
    problems: list[str] = []
    feasible = best <= prog.epsilon * (1 + 1e-12)
    if not feasible:
        problems.append(
            f"the targets need epsilon {best:.4g} per person over {prog.horizon} "
            f"(pure {pure:.4g}, approximate {approximate:.4g}, zCDP {zc:.4g}); "
            f"the budget is {prog.epsilon:g}"
        )
        for p in plans:
            p.suggestions = _suggest(p, prog, pure, best)
    return ProgrammePlan(prog, plans, pure, approximate, rho_g, zc, naive, feasible, problems)


def _suggest(p: EntryPlan, prog: Programme, pure: float, best: float) -> list[str]:
    """What would fit this entry into its share of the budget (pure composition; the share
    is proportional to what the entry needs)."""
    e, kind = p.entry, prog.noise
    share = prog.epsilon * p.per_person / pure
    what = "trips" if e.kind == "od" else "contributions"
    out = [f"a larger budget: epsilon {best:.4g} over {prog.horizon} meets every target"]
    per_release = e.group * p.epsilon
    n_fit = int(share // per_release)
    out.append(
        f"fewer periods: {n_fit} {e.cadence} release(s) fit its share of the budget ({share:.4g})"
        if n_fit >= 1
        else "fewer periods: not even one release fits its share"
    )
    if e.alpha is not None:
        each = share / e.count / e.group
        out.append(
            f"a looser target: alpha {_alpha_at(each, e.beta, e.sensitivity, kind)} at "
            f"epsilon {each:.4g} per release"
        )
        if e.unit is PrivacyUnit.USER and e.max_trips > 1:
            t_fit = _largest(
                lambda t: _fits(e.alpha or 0, e.beta, t, kind, e.count, share), 1, e.max_trips
            )
            if t_fit >= 1:
                out.append(f"a smaller bound: T = {t_fit} {what} per person per release")
        # one user-level bound over the whole horizon: the entry costs its epsilon once
        t_h = _largest(lambda t: _fits(e.alpha or 0, e.beta, t, kind, 1, share), 1, 10**6)
        claim = "instead of a trip-level claim" if e.unit is PrivacyUnit.TRIP else "in total"
        if t_h >= 1:
            out.append(
                f"a user-level bound over {prog.horizon}: at most {t_h} {what} per person over "
                f"all {e.count} releases ({claim}); noise of scale {t_h}/{share:.4g} per cell"
            )
    out.append(
        "coarser zones do not shrink a cell's absolute error (the noise depends on the bound "
        "and epsilon only) but raise the counts per cell, so they help a relative target"
    )
    return out


# -- declared schedules ----------------------------------------------------------------------


def programme_from_dict(doc: Mapping[str, Any], source: str = "schedule") -> Programme:
    """A programme from a parsed YAML/JSON document (see docs/planning.md)."""
    try:
        budget = doc["budget"]
        releases: Iterable[Mapping[str, Any]] = doc["releases"]
        eps = float(budget["epsilon"] if isinstance(budget, Mapping) else budget)
        delta = (
            float(budget.get("delta", DEFAULT_DELTA))
            if isinstance(budget, Mapping)
            else (DEFAULT_DELTA)
        )
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(
            f"needs 'budget' (epsilon [, delta]) and 'releases' ({err})",
            source=source,
            hint="see the example schedule in docs/planning.md",
        ) from None
    entries = []
    known = set(ScheduleEntry.__dataclass_fields__)
    for i, r in enumerate(releases, start=1):
        extra = set(r) - known
        if extra:
            raise InputError(
                f"release {i}: unknown field(s) {sorted(extra)}",
                source=source,
                hint=f"fields: {sorted(known)}",
            )
        fields = dict(r)
        if "unit" in fields:
            fields["unit"] = PrivacyUnit(fields["unit"])
        try:
            entries.append(ScheduleEntry(**fields))
        except ConfigError as err:
            raise InputError(f"release {i}: {err.message}", source=source) from None
        except TypeError as err:
            raise InputError(f"release {i}: {err}", source=source) from None
    return Programme(
        tuple(entries),
        eps,
        delta,
        str(doc.get("horizon", "the programme")),
        NoiseKind(doc.get("noise", NoiseKind.DISCRETE_LAPLACE.value)),
    )


def as_programme(schedule: Programme | Mapping[str, Any] | str | Path) -> Programme:
    """A programme from Python objects, a parsed document or a schedule file."""
    if isinstance(schedule, Programme):
        return schedule
    if isinstance(schedule, Mapping):
        return programme_from_dict(schedule)
    return load_programme(schedule)


def load_programme(path: str | Path) -> Programme:
    """Read a schedule from a .json, .yaml or .yml file."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such schedule file", source=str(p))
    text = p.read_text()
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise InputError(
                "reading YAML needs PyYAML", source=str(p), hint="pip install pyyaml, or use JSON"
            ) from None
        doc = yaml.safe_load(text)
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(
                f"not valid JSON (line {err.lineno}: {err.msg})", source=str(p)
            ) from None
    if not isinstance(doc, Mapping):
        raise InputError("a schedule is a mapping with 'budget' and 'releases'", source=str(p))
    return programme_from_dict(doc, str(p))
