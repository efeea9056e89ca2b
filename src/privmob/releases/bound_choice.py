"""The count template with a bound chosen for accuracy (issue 40, item 4): ``max_trips="auto"``
(``-T auto``) and ``rescale=True`` (``--rescale``) for ``od`` and ``counts``.

The order of a release stays the one gate's (:mod:`privmob.releases.gate`):

plan (public: total cost and its parts) -> precheck -> the users' exact record counts (one
engine pass, a histogram over 1..max_bound and above) -> header (the bound "chosen privately")
-> CHARGE every part, committed together -> choice of M by the exponential mechanism -> the
exact cells with at most M records per user (an engine pass after the charge: the bound is only
known then, so a failure of that pass costs the budget) -> noise of scale M / epsilon_counts on
every cell -> (rescale) the noisy kept and cut totals and the factor -> the kind's tables.

The parts are epsilon x share (the choice), epsilon x rescale share (the rescale) and the rest
(the counts): they add up to the user's epsilon exactly
(:meth:`~privmob.privacy.bound_choice.BoundChoice.epsilons`). Nothing about the data is said
before the charge, and a refusal (budget, parameters) happens before the data is read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from privmob.engine.base import dense_counts
from privmob.engine.buckets import counts_by_user_buckets
from privmob.errors import ConfigError
from privmob.lazy_imports import np
from privmob.privacy.bound_choice import (
    BoundChoice,
    choose_bound,
    kept_and_lost,
    per_user_histogram_sql,
    rescale_factor,
)
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.privacy.samplers import Randomness, RandomnessLike, resolve
from privmob.releases.base import Accountant
from privmob.releases.gate import Draft
from privmob.releases.plan import Plan
from privmob.releases.release import Release
from privmob.surface import spelled

if TYPE_CHECKING:
    import numpy.typing as npt

    from privmob.engine.relation import Loaded
    from privmob.privacy.bound_choice import Rescale

Step = Callable[[str], None]

#: a count kind's public domain and its per-user bound, as the count template types them: this
#: module passes them along (the template imports it, so it names neither)
DomainT = TypeVar("DomainT", bound="Domain")
BoundT = TypeVar("BoundT")
DomainT_co = TypeVar("DomainT_co", bound="Domain", covariant=True)
DomainT_contra = TypeVar("DomainT_contra", bound="Domain", contravariant=True)
BoundT_contra = TypeVar("BoundT_contra", contravariant=True)

#: the bound's value in the header (charged before the bound exists)
CHOSEN = "chosen privately after the charge"


class Domain(Protocol):
    """What a chosen bound reads of a count kind's public domain."""

    @property
    def released_cells(self) -> int: ...


class RowsRead(Protocol):
    """How a count kind's records are read (``releases.counts.Rows``)."""

    @property
    def records(self) -> str: ...

    def rows_sql(self, part: Loaded) -> str: ...

    def bucket_columns(self, data: Loaded) -> tuple[tuple[str, ...] | None, float | None]: ...


class ExactCells(Protocol[DomainT_contra, BoundT_contra]):
    """The count template's exact cells (``releases.counts.exact_cells``), as a chosen bound
    calls it."""

    def __call__(
        self,
        counted: Loaded,
        rows: RowsRead,
        domain: DomainT_contra,
        bound: BoundT_contra | None,
        r: Randomness,
        *,
        buckets: int | None = None,
        step: Step | None = None,
    ) -> npt.NDArray[np.int64]: ...


class NoiseOnCells(Protocol[DomainT_contra]):
    """The count template's noise on every cell (``releases.counts.CellNoise``)."""

    @property
    def kind(self) -> str: ...

    def start(
        self, domain: DomainT_contra, r: Randomness
    ) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]: ...


class Calibrated(Protocol):
    """A kind's noise and cost (its ``calibrated``)."""

    @property
    def calibrated(self) -> tuple[object, Cost]:
        """Its noise (a :class:`Noise`: :func:`_noise`) and cost."""
        ...


class ConcreteKind(RowsRead, Calibrated, Protocol[DomainT_co, BoundT]):
    """A kind of the count template at a concrete bound (``releases.counts.CountKind``, which
    imports this module), with one noise on every cell (:func:`check_choice`): what
    :meth:`ChosenBound.concrete` returns."""

    @property
    def kind(self) -> str: ...

    def plan(self) -> Plan: ...

    def count_domain(self) -> DomainT_co: ...

    def per_user(self, group_size: int | None) -> BoundT | None: ...

    def counted(self, data: object) -> Loaded: ...

    def publish(
        self,
        noisy: npt.NDArray[np.int64] | None,
        noise: Noise,
        cost: Cost,
        r: Randomness,
        bound: BoundT | None,
    ) -> tuple[Release, str]: ...


class Bounded(Protocol):
    """A count kind's budget and its bound as given."""

    @property
    def kind(self) -> str: ...

    @property
    def epsilon(self) -> float: ...

    @property
    def fixed_bound(self) -> int | None:
        """The bound given as a number (``None``: auto)."""
        ...


class ChosenBound(Bounded, Protocol[DomainT_co, BoundT]):
    """A count kind whose bound may be chosen (``od``'s ``OdSpec``, ``counts``' ``CountSpec``)."""

    def concrete(self, bound: int, epsilon: float) -> ConcreteKind[DomainT_co, BoundT]:
        """This release with the bound ``bound`` and ``epsilon`` for its counts (no choice): a
        kind of the count template (``releases.counts.CountKind``, which imports this module)."""
        ...


def chosen(bound: object, given: BoundChoice | None) -> BoundChoice | None:
    """The choice a release makes of its bound: ``bound == "auto"`` chooses it (as ``given``
    says, or by default); a fixed bound with ``given.rescale`` is only rescaled; otherwise
    ``None`` (the bound as given, the template's own path)."""
    if bound == "auto":
        return dataclasses.replace(given or BoundChoice(), auto=True)
    if isinstance(bound, str):
        raise ConfigError(
            f"the bound per user is a whole number or auto, not {bound!r}",
            hint=spelled("e.g. -T 10 or -T auto", 'e.g. max_trips=10 or max_trips="auto"'),
        )
    if given is not None and given.rescale:
        return dataclasses.replace(given, auto=False)
    return None


def checked_choice(
    bound: object,
    given: BoundChoice | None,
    *,
    unit: str,
    noise: NoiseKind | str,
    delta: float,
    per: object,
    value: object,
) -> BoundChoice | None:
    """:func:`chosen`, refused from public parameters where it is not offered
    (:func:`check_choice`): what a kind's ``choice`` property returns."""
    bc = chosen(bound, given)
    if bc is not None:
        check_choice(bc, unit=PrivacyUnit(unit), noise=noise, delta=delta, per=per, value=value)
    return bc


def check_choice(
    choice: BoundChoice,
    *,
    unit: PrivacyUnit,
    noise: NoiseKind | str,
    delta: float,
    per: object,
    value: object,
) -> None:
    """Refuse, from public parameters, what a chosen or rescaled bound does not support."""
    what = "a bound chosen privately (auto)" if choice.auto else "rescaled counts"
    if unit is not PrivacyUnit.USER:
        raise ConfigError(f"{what} needs user-level privacy", hint="use --unit user")
    if not NoiseKind(noise).traits.exact_pure or delta:
        raise ConfigError(
            f"{what} is offered with discrete Laplace noise (pure epsilon) only",
            hint=spelled("leave out --noise and --delta", "leave out noise= and delta="),
        )
    if per not in (None, "release"):
        raise ConfigError(
            f"{what} bounds a user's records in the whole release, not per period",
            hint=spelled("leave out --bound-per", "leave out bound_per="),
        )
    if value is not None:
        raise ConfigError(f"{what} is not offered with a mean", hint="give a fixed bound")


def chosen_plan(spec: ChosenBound[DomainT, BoundT], choice: BoundChoice) -> Plan:
    """The plan of a chosen (or rescaled) bound, from public parameters: the total cost in its
    parts, the margin of error at the largest candidate (the bound is not known before the
    charge) and what can be said of the bias."""
    _, _, counts_eps = choice.epsilons(spec.epsilon)
    at_most = choice.max_bound if choice.auto else None
    concrete = spec.concrete(at_most or _fixed(spec), counts_eps)
    inner: Plan = concrete.plan()
    parts = choice.parts(spec.epsilon, spec.kind, concrete.calibrated[1].unit)
    total = total_cost(parts)
    notes: list[str] = []
    if choice.auto:
        notes += choice_notes(choice, parts[0][1].epsilon, inner.margin_of_error_95)
    if choice.rescale:
        notes.append(
            f"rescaled: the cells are multiplied by a noisy (records up to {choice.max_bound} "
            "per user) / (records kept), stated with its error in the metadata"
        )
    return dataclasses.replace(
        inner,
        cost=total,
        parts=len(parts),
        notes=(*inner.notes, *notes),
    )


def choice_notes(choice: BoundChoice, epsilon_choice: float, margin_at_max: float) -> list[str]:
    """The plan's lines on a bound chosen privately: how, at what epsilon, the margin it gives
    (``margin_at_max``: the largest 95% margin at the largest candidate, M = ``max_bound``; the
    margins scale with M) and the bias that cannot be known before the charge."""
    per_record = margin_at_max / choice.max_bound
    return [
        f"the bound M is chosen privately ({choice.describe_choice()}, epsilon "
        f"{epsilon_choice:g}); the 95% margin is about {per_record:,.2f} x M per cell, "
        f"at most +/-{margin_at_max:,.1f} (M = {choice.max_bound})",
        f"bias: about {1 - choice.quantile:.0%} of the users have more records than M and "
        "lose the excess; how many records that is cannot be known before the charge"
        + (" (the rescale estimates it)" if choice.rescale else ""),
    ]


def records_per_user(
    counted: Loaded,
    rows_sql: Callable[[Loaded], str],
    cap: int,
    *,
    buckets: int | None = None,
    step: Step | None = None,
    columns: tuple[str, ...] | None = None,
    bytes_per_row: float | None = None,
) -> npt.NDArray[np.int64]:
    """The users per number of records (:func:`~privmob.privacy.bound_choice.per_user_histogram_
    sql`: index min(n, cap + 1)) of the rows ``rows_sql(part)`` (one row per record), summed
    over user buckets of ``counted`` (one engine pass; exact, never released: the choice reads
    it after the charge)."""

    def users_per_count(part: Loaded) -> npt.NDArray[np.int64]:
        sql = per_user_histogram_sql(rows_sql(part), cap)
        return dense_counts(part.engine, sql, (cap + 2,))

    return counts_by_user_buckets(
        counted,
        users_per_count,
        "counting records per user",
        buckets=buckets,
        step=step,
        columns=columns,
        bytes_per_row=bytes_per_row,
    )


def chosen_draft(
    data: object,
    spec: ChosenBound[DomainT, BoundT],
    choice: BoundChoice,
    accountant: Accountant,
    *,
    rng: RandomnessLike,
    step: Step,
    template: tuple[ExactCells[DomainT, BoundT], Callable[[Noise], NoiseOnCells[DomainT]]],
    buckets: int | None = None,
) -> Draft:
    """The template's draft with the bound chosen (or the counts rescaled) after the charge
    (see the module's docstring): the template's own counting and noise step
    given as ``template`` (:func:`privmob.releases.counts.exact_cells`,
    :class:`~privmob.releases.counts.CellNoise`: the template imports this module)."""
    exact_cells, cell_noise = template
    r = resolve(rng)
    eps_choice, eps_rescale, eps_counts = choice.epsilons(spec.epsilon)
    cap = choice.max_bound
    placeholder = spec.concrete(cap if choice.auto else _fixed(spec), eps_counts)
    noise0, cost0 = _noise(placeholder), placeholder.calibrated[1]  # one noise (check_choice)
    header, description = placeholder.publish(None, noise0, cost0, r, None)
    parts = choice.parts(spec.epsilon, description, cost0.unit)
    total = total_cost(parts)
    accountant.precheck(total)  # before any data is read
    counted = placeholder.counted(data)
    _describe(header, spec, choice, total, parts, None, None)

    step("counting the records of each user (for the bound)")
    columns, per_row = placeholder.bucket_columns(counted)
    histogram = records_per_user(
        counted,
        placeholder.rows_sql,
        cap,
        buckets=buckets,
        step=step,
        columns=columns,
        bytes_per_row=per_row,
    )

    def draw() -> Release:
        bound = choose_bound(histogram, choice, eps_choice, r) if choice.auto else _fixed(spec)
        kind = spec.concrete(bound, eps_counts)
        noise = _noise(kind)
        domain = kind.count_domain()
        per_user = kind.per_user(accountant.group_size)
        step(f"counting {kind.records} with at most {bound} per user")
        exact = exact_cells(counted, kind, domain, per_user, r, buckets=buckets, step=step)
        step(f"adding {noise.kind} noise to {domain.released_cells:,} cells")
        noisy = cell_noise(noise).start(domain, r)(exact)
        rescaled = None
        if choice.rescale:
            rescaled = rescale_factor(kept_and_lost(histogram, bound, cap), cap, eps_rescale, r)
            noisy = np.rint(noisy * rescaled.factor).astype(np.int64)
        release: Release = kind.publish(noisy, noise, total, r, per_user)[0]
        _describe(release, spec, choice, total, parts, bound, rescaled)
        return release

    return Draft(header, description, draw)


def _describe(
    release: Release,
    spec: Bounded,
    choice: BoundChoice,
    total: Cost,
    parts: list[tuple[str, Cost]],
    bound: int | None,
    rescaled: Rescale | None,
) -> None:
    """The release as charged (total cost, parts) and what the choice and rescale were: the
    header says the bound is chosen after the charge, the drawn release says which."""
    release.cost = total
    release.cost_parts = parts
    release.params["epsilon"] = spec.epsilon
    release.params["bound_choice"] = choice.to_dict(spec.epsilon)
    bounds = release.bounds.to_json()
    key = next(k for k in bounds if k.startswith("max_"))
    if choice.auto:
        bounds[key] = CHOSEN if bound is None else bound
        bounds["bound_candidates"] = [1, choice.max_bound]
    release.bounds = type(release.bounds).of(bounds)
    noise = release.noise.to_json()
    if bound is None and choice.auto:  # the header: nothing said at a bound not chosen yet
        release.params.pop("expected_signal", None)
        release.params["post_processing"] = "stated in the release, at the bound chosen"
        noise["scale"] = f"M / {parts[-1][1].epsilon:g}, M the bound chosen"
        noise.pop("margin_of_error_95", None)
        noise.pop("l1_sensitivity", None)
        noise["sensitivity"] = "M (L1), the bound chosen"
    release.noise = type(release.noise).of(noise)
    if rescaled is not None:
        release.params["rescale"] = rescaled.to_dict()
        note = "first every noisy cell times params.rescale.factor, rounded"
        done = release.params.get("post_processing")
        release.params["post_processing"] = (
            {"rescale": note, **done} if isinstance(done, dict) else f"{note}; then {done}"
        )


def total_cost(parts: list[tuple[str, Cost]]) -> Cost:
    """The cost of a release charged in ``parts`` (basic composition of the parts)."""
    total = parts[0][1]
    for _, c in parts[1:]:
        total = total + c
    return total


def _fixed(spec: Bounded) -> int:
    bound = spec.fixed_bound
    if bound is None:
        raise ConfigError("rescaled counts need a bound: a whole number or auto")
    return bound


def _noise(kind: Calibrated) -> Noise:
    noise, _ = kind.calibrated
    if not isinstance(noise, Noise):
        raise ConfigError("a chosen bound needs a count with one noise on every cell")
    return noise
