"""What a release's ``metadata.json`` says, as typed values: the enforced :class:`Bounds`, the
:class:`NoiseDescription`, the :class:`PublicDomain`, the :class:`Definitions` (what was
counted), the :class:`Provenance` (software, time, ledger) and the whole
:class:`ReleaseMetadata`, whose :meth:`~ReleaseMetadata.to_json` is the document
``releases/files.py`` writes (and ``report.json`` embeds).

Every value is frozen and holds only public things: declared parameters and sizes fixed before
the data is read, the noise, the ledger's entries. The JSON keeps the names and order it has
always had (``tests/releases/test_golden.py`` compares it with the golden files).

The bounds, noise and domain read like the dictionaries they replace (``release.noise["kind"]``,
``release.bounds.get("bound_per")``): each is a read-only :class:`~collections.abc.Mapping`
from its ``metadata.json`` keys. A kind may still hand :class:`~privmob.releases.release.Release`
plain dictionaries; :meth:`Bounds.of` and the like convert them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from numbers import Number
from types import MappingProxyType
from typing import Self, TypedDict, cast

from privmob.errors import ConfigError
from privmob.json_types import JSON, JSONObject
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger.entries import Entry
from privmob.privacy.mechanisms import Noise

NOT_FOR_PUBLICATION = (
    "NOT FOR PUBLICATION: made with a fixed seed for testing; the noise is predictable and "
    "gives no privacy"
)


def json_object(value: JSON) -> JSONObject:
    """``value`` read back as a JSON object (a section such as ``params["hierarchy"]``): itself,
    or an empty one when it is absent (``None``) or not an object."""
    return value if isinstance(value, dict) else {}


def json_list(value: JSON) -> list[JSON]:
    """``value`` read back as a JSON array: itself, or an empty one when it is not one."""
    return value if isinstance(value, list) else []


def _frozen(values: Mapping[str, JSON]) -> Mapping[str, JSON]:
    return MappingProxyType(dict(values))


class _JsonMapping(Mapping[str, JSON]):
    """Read access by ``metadata.json`` key to a typed value (``to_json``'s keys)."""

    def to_json(self) -> JSONObject:
        raise NotImplementedError

    def __getitem__(self, key: str) -> JSON:
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())

    # a release stays picklable and copyable (a mappingproxy is neither): plain dicts out,
    # read-only views back in
    def __getstate__(self) -> dict[str, object]:
        return {k: dict(v) if isinstance(v, MappingProxyType) else v for k, v in vars(self).items()}

    def __setstate__(self, state: dict[str, object]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, _frozen(v) if isinstance(v, dict) else v)


@dataclass(frozen=True, eq=False)
class _Named(_JsonMapping):
    """Values by ``metadata.json`` name, in the kind's order (copied, read-only)."""

    named: Mapping[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "named", _frozen(self.named))

    @classmethod
    def of(cls, value: Self | Mapping[str, JSON]) -> Self:
        """``value`` as this type (a kind's dict converted)."""
        return value if isinstance(value, cls) else cls(value)

    def to_json(self) -> JSONObject:
        return dict(self.named)


@dataclass(frozen=True, eq=False)
class Bounds(_Named):
    """The enforced bounds a release's sensitivity is derived from (``privacy.bounds``), by
    their ``metadata.json`` names (the kind's bound is the registry's ``Bound.metadata`` key,
    e.g. ``max_trips_per_user``), in the order the kind states them. Declared, never read from
    the data: a value is a number, a text, a truth value, ``None`` or a list of those."""

    def __post_init__(self) -> None:
        for name, value in self.named.items():
            items = value if isinstance(value, list | tuple) else [value]
            if not all(v is None or isinstance(v, Number | str) for v in items):
                raise ConfigError(
                    f"bound {name!r} is {type(value).__name__}: a bound is a declared number "
                    "or text (it says what the sensitivity comes from)"
                )
        super().__post_init__()


class NoiseFields(TypedDict, total=False):
    """The typed keys of ``privacy.noise`` (:class:`NoiseDescription`), as a kind's dict holds
    them."""

    kind: str
    scale: float | str
    l1_sensitivity: float
    margin_of_error_95: float


@dataclass(frozen=True, eq=False)
class NoiseDescription(_JsonMapping):
    """The noise a release added (``privacy.noise``): its ``kind`` (a
    :class:`~privmob.privacy.mechanisms.NoiseKind` value, or the kind's own name for a scheme:
    ``fourier-perturbation``), its ``scale`` (a number; a text when it varies, e.g. per
    timestamp), the L1 sensitivity it was calibrated to and the 95% margin of one value, when
    they are one number; ``details`` holds what a kind says more (in its order)."""

    kind: str | None = None
    scale: float | str | None = None
    l1_sensitivity: float | None = None
    margin_of_error_95: float | None = None
    details: Mapping[str, JSON] = field(default_factory=dict)

    _TYPED = ("kind", "scale", "l1_sensitivity", "margin_of_error_95")

    def __post_init__(self) -> None:
        clash = set(self.details) & set(self._TYPED)
        if clash:
            raise ConfigError(f"noise details may not repeat {sorted(clash)}")
        object.__setattr__(self, "details", _frozen(self.details))

    @classmethod
    def calibrated(cls, noise: Noise, l1_sensitivity: float) -> NoiseDescription:
        """The description of a count release's ``noise`` (one scale for every cell),
        calibrated to ``l1_sensitivity``: kind, scale, sensitivity and 95% margin."""
        return cls(
            kind=noise.kind.value,
            scale=noise.scale,
            l1_sensitivity=l1_sensitivity,
            margin_of_error_95=noise.margin_of_error(0.95),
        )

    @classmethod
    def of(cls, value: NoiseDescription | Mapping[str, JSON]) -> NoiseDescription:
        """The typed description of ``value`` (a kind's dict: ``{**noise.to_dict(), ...}``):
        the typed keys wherever they are in the dict (the JSON writes them first, in
        :attr:`_TYPED`'s order; a ``None`` one is left out), everything else in ``details``
        in its order."""
        if isinstance(value, NoiseDescription):
            return value
        typed = {k: v for k, v in value.items() if k in cls._TYPED and v is not None}
        details = {k: v for k, v in value.items() if k not in cls._TYPED}
        # a kind's dict holds its typed keys with their types (NoiseFields says which)
        return cls(**cast("NoiseFields", typed), details=details)

    def to_json(self) -> JSONObject:
        out: JSONObject = {}
        for name in self._TYPED:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self.details)
        return out


@dataclass(frozen=True, eq=False)
class PublicDomain(_Named):
    """The public domain a release covers (``domain``): the sizes and labels of its cells
    (tiles, periods, OD cells, outlier cells, ...), fixed from declared parameters before the
    data is read, by name in the kind's order."""


@dataclass(frozen=True)
class StayPoints:
    """The stay-point thresholds that cut raw GPS traces into trips."""

    distance_m: float
    minutes: float

    def to_json(self) -> JSONObject:
        return {"distance_m": self.distance_m, "minutes": self.minutes}


class DefinitionFields(TypedDict, total=False):
    """The typed keys of ``definitions`` (:class:`Definitions`), as the session records them."""

    input_shape: str | None
    timezone: str | None
    input_timezone: str | None
    trip_rule: str | None
    stay_points: StayPoints | None
    same_tile_trips: str | None


@dataclass(frozen=True, eq=False)
class Definitions(_JsonMapping):
    """What a release counted (``definitions``): the declared ``period`` and, for the keys its
    kind lists in the registry (:attr:`privmob.releases.kinds.Kind.definitions`; ``recorded``),
    the input shape, the time zones, what a trip was, the stay-point thresholds and the rule for
    trips within one tile. A key not ``recorded`` is left out of the JSON (a key recorded as
    ``None``: not applicable to this input)."""

    period: Mapping[str, JSON] | None = None
    input_shape: str | None = None
    timezone: str | None = None
    input_timezone: str | None = None
    trip_rule: str | None = None
    stay_points: StayPoints | None = None
    same_tile_trips: str | None = None
    recorded: tuple[str, ...] = ()
    #: definitions of a newer kind, by name (after the typed ones)
    more: Mapping[str, JSON] = field(default_factory=dict)

    _TYPED = (
        "input_shape",
        "timezone",
        "input_timezone",
        "trip_rule",
        "stay_points",
        "same_tile_trips",
    )

    def __post_init__(self) -> None:
        unknown = set(self.recorded) - set(self._TYPED)
        if unknown:
            raise ConfigError(f"unknown definitions {sorted(unknown)} (give them in `more`)")
        object.__setattr__(self, "more", _frozen(self.more))
        if self.period is not None:
            object.__setattr__(self, "period", _frozen(self.period))

    @classmethod
    def of(cls, value: Definitions | Mapping[str, JSON]) -> Definitions:
        """The typed definitions of ``value`` (the dict the session records today)."""
        if isinstance(value, Definitions):
            return value
        rest = dict(value)
        period = rest.pop("period", None)
        recorded = tuple(k for k in cls._TYPED if k in rest)
        typed: dict[str, object] = {k: rest.pop(k) for k in recorded}
        stay = typed.get("stay_points")
        if isinstance(stay, Mapping):
            typed["stay_points"] = StayPoints(float(stay["distance_m"]), float(stay["minutes"]))
        # the recorded dict holds the typed keys with their types (DefinitionFields says which)
        return cls(
            period=cast("Mapping[str, JSON] | None", period),
            recorded=recorded,
            more=rest,
            **cast("DefinitionFields", typed),
        )

    def to_json(self) -> JSONObject:
        out: JSONObject = {"period": None if self.period is None else dict(self.period)}
        for name in self._TYPED:
            if name in self.recorded:
                value = getattr(self, name)
                out[name] = value.to_json() if isinstance(value, StayPoints) else value
        out.update(self.more)
        return out


@dataclass(frozen=True, repr=False)
class Provenance:
    """Where a release comes from: the software, when it was made, the ledger charged (its
    random id, the entries and the head after the charge) and whether it may be published
    (``warning``: why not)."""

    software_version: str
    created_at: str
    for_publication: bool = True
    warning: str | None = None
    ledger_id: str | None = None
    ledger_entries: tuple[Entry, ...] = ()

    def __post_init__(self) -> None:
        if not self.for_publication and not self.warning:
            object.__setattr__(self, "warning", NOT_FOR_PUBLICATION)

    def __repr__(self) -> str:
        """What ``metadata.json`` shows: the entries as published (:meth:`Entry.to_dict`),
        never their input fingerprint, input row count or row hash, which the ledger keeps."""
        entries = [e.to_dict() for e in self.ledger_entries]
        return (
            f"Provenance(software_version={self.software_version!r}, "
            f"created_at={self.created_at!r}, for_publication={self.for_publication!r}, "
            f"warning={self.warning!r}, ledger={self.ledger!r}, ledger_entries={entries!r})"
        )

    @property
    def ledger(self) -> JSONObject | None:
        """``metadata.json``'s ``ledger``: the ledger's id, the entry ids, the head after the
        charge and its signature (a rollback or truncation shows to whoever holds this)."""
        if self.ledger_id is None:
            return None
        out: JSONObject = {
            "id": self.ledger_id,
            "entry_ids": [e.id for e in self.ledger_entries],
        }
        if self.ledger_entries and self.ledger_entries[-1].head:
            out["head"] = self.ledger_entries[-1].head
        if self.ledger_entries and self.ledger_entries[-1].head_signature:
            # the head signed by the key that charged: the release is a witness whoever
            # holds it (privmob ledger verify RELEASE checks it)
            out["head_signature"] = dict(self.ledger_entries[-1].head_signature)
        return out


@dataclass(frozen=True)
class ReleaseMetadata:
    """The whole of ``metadata.json``: :meth:`to_json` is what is written."""

    kind: str
    unit: PrivacyUnit
    cost: Cost
    bounds: Bounds
    noise: NoiseDescription
    params: Mapping[str, JSON]
    domain: PublicDomain
    provenance: Provenance
    definitions: Definitions | None = None
    #: what a kind adds at the top level (``analyses``, ``test_mode``, ...), in its order;
    #: written after the ledger, before the definitions
    extra: Mapping[str, JSON] = field(default_factory=dict)

    #: the keys :meth:`to_json` writes itself (an extra may not replace one)
    OWN = frozenset(
        {
            "kind",
            "privacy",
            "params",
            "domain",
            "for_publication",
            "software",
            "created_at",
            "ledger_entries",
            "ledger",
            "definitions",
            "warning",
        }
    )

    @property
    def for_publication(self) -> bool:
        return self.provenance.for_publication

    @property
    def margin_of_error_95(self) -> float | None:
        """The 95% margin of one released value, when the release states one number."""
        value = self.noise.margin_of_error_95
        return None if value is None else float(value)

    def __post_init__(self) -> None:
        clash = set(self.extra) & self.OWN
        if clash:  # a release's extras must never overwrite its cost, unit or seed stamp
            raise ConfigError(f"release extras may not replace {sorted(clash)}")

    def to_json(self) -> JSONObject:
        """The document (plain dicts and lists, in the order ``metadata.json`` always had)."""
        p = self.provenance
        meta: JSONObject = {
            "kind": self.kind,
            "privacy": {
                "unit": self.unit.value,
                "cost": self.cost.to_dict(),
                "bounds": self.bounds.to_json(),
                "noise": self.noise.to_json(),
            },
            "params": dict(self.params),
            "domain": self.domain.to_json(),
            "for_publication": p.for_publication,
            "software": {"name": "privmob", "version": p.software_version},
            "created_at": p.created_at,
            "ledger_entries": [e.to_dict() for e in p.ledger_entries],
        }
        ledger = p.ledger
        if ledger is not None:
            meta["ledger"] = ledger
        meta.update(self.extra)
        if self.definitions is not None:
            meta["definitions"] = self.definitions.to_json()
        if not p.for_publication:
            meta["warning"] = p.warning
        return meta
