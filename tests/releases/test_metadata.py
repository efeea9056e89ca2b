"""metadata.json as typed values (privmob.releases.metadata): the kinds' dictionaries convert to
the typed values and back to the same JSON, in the same order; what is not a declared bound is
refused; the ledger records plain JSON, never a typed value's text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.helpers import settle_by_hand

from privmob.errors import ConfigError
from privmob.privacy.costs import Cost, PrivacyUnit
from privmob.privacy.ledger import Ledger
from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.releases.base import Accountant
from privmob.releases.metadata import (
    NOT_FOR_PUBLICATION,
    Bounds,
    Definitions,
    NoiseDescription,
    PublicDomain,
    StayPoints,
)
from privmob.releases.release import Release

#: the noise dicts the kinds hand in (od and the count kinds, density, the report, landmark)
NOISE_DICTS = [
    {
        **Noise(NoiseKind.DISCRETE_LAPLACE, 3.0).to_dict(),
        "l1_sensitivity": 3,
        "margin_of_error_95": 9,
    },
    {"kind": "fourier-perturbation", "mechanism": "efpa", "steps": [1, 2]},
    {"kind": "discrete-laplace", "confidence": 0.95},
    {"kind": "laplace", "scale": "sensitivity / epsilon_t per timestamp (see the budgets table)"},
    {},
]


@pytest.mark.parametrize("given", NOISE_DICTS)
def test_a_kinds_noise_dict_round_trips_in_order(given):
    noise = NoiseDescription.of(given)
    assert list(noise.to_json().items()) == list(given.items())
    assert dict(noise) == given  # read like the dict it replaces


def test_key_order_does_not_decide_whether_metadata_builds():
    """Issue 41: the typed keys were read only when they came first; a kind that wrote its
    own key before them failed to build its metadata ("may not repeat")."""
    given = {"mechanism": "mine", "margin_of_error_95": 4, "kind": "laplace", "scale": 2.0}
    noise = NoiseDescription.of(given)
    assert (noise.kind, noise.scale, noise.margin_of_error_95) == ("laplace", 2.0, 4)
    assert dict(noise) == given and noise.details == {"mechanism": "mine"}


def test_noise_fields_are_typed():
    noise = NoiseDescription.of(NOISE_DICTS[0])
    assert (noise.kind, noise.scale, noise.l1_sensitivity, noise.margin_of_error_95) == (
        "discrete-laplace",
        3.0,
        3,
        9,
    )
    assert noise["scale"] == 3.0 and noise.get("confidence") is None
    with pytest.raises(ConfigError, match="may not repeat"):
        NoiseDescription(kind="laplace", details={"scale": 1.0})


def test_a_count_kinds_noise_is_described_from_its_calibration():
    """What od, population and the count template hand in today, from the Noise itself."""
    noise = Noise(NoiseKind.DISCRETE_GAUSSIAN, 2.5)
    given = {
        **noise.to_dict(),
        "l1_sensitivity": 3,
        "margin_of_error_95": noise.margin_of_error(0.95),
    }
    typed = NoiseDescription.calibrated(noise, 3)
    assert list(typed.to_json().items()) == list(given.items())


def test_bounds_are_declared_values_not_data():
    bounds = Bounds({"max_trips_per_user": np.int64(3), "bound_per": "release", "v": [0, 1.5]})
    assert bounds["max_trips_per_user"] == 3 and list(bounds) == [
        "max_trips_per_user",
        "bound_per",
        "v",
    ]
    for data in (pd.Series([1, 2]), np.array([1, 2]), {"a": 1}):
        with pytest.raises(ConfigError, match="declared number"):
            Bounds({"b": data})


def test_typed_values_are_read_only():
    given = {"tiles": 9}
    domain = PublicDomain.of(given)
    given["tiles"] = 10  # the caller's dict is copied
    assert domain["tiles"] == 9
    with pytest.raises(TypeError):
        domain.named["tiles"] = 1  # type: ignore[index]


def test_a_release_can_be_pickled_and_copied():
    import copy
    import pickle

    rel = _release()
    rel.extra["definitions"] = {"period": {"bins": 1}, "input_shape": "trips"}
    rel.definitions = Definitions.of(rel.extra["definitions"])
    for twin in (pickle.loads(pickle.dumps(rel)), copy.deepcopy(rel)):
        assert twin.metadata() == rel.metadata()
        with pytest.raises(TypeError):
            twin.bounds.named["max_trips_per_user"] = 1  # type: ignore[index]


def test_definitions_keep_the_recorded_keys_only():
    trips = {
        "period": {"granularity": "all", "bins": 1},
        "input_shape": "gps",
        "timezone": "UTC",
        "input_timezone": "UTC",
        "trip_rule": "the points between two stay points",
        "stay_points": {"distance_m": 200.0, "minutes": 20.0},
        "same_tile_trips": None,
    }
    d = Definitions.of(trips)
    assert d.stay_points == StayPoints(200.0, 20.0)
    assert list(d.to_json().items()) == list(trips.items())
    series = {"period": {"start": "2024-01-01", "bin": "1h"}}
    assert Definitions.of(series).to_json() == series  # no key a kind does not record
    with pytest.raises(ConfigError, match="unknown definitions"):
        Definitions(recorded=("day",))


def _release(**kw) -> Release:
    return Release(
        "od",
        Cost.pure(1.0, PrivacyUnit.USER),
        PrivacyUnit.USER,
        {"max_trips_per_user": 3},
        NOISE_DICTS[0],
        {"epsilon": 1.0},
        {"tiles": 9},
        {"od": pd.DataFrame({"count": [1]})},
        **kw,
    )


def test_the_document_is_built_from_the_typed_values():
    rel = _release(for_publication=False, extra={"analyses": {"a": 1}})
    rel.extra["definitions"] = {"period": None, "input_shape": "trips"}  # as the session does
    assert isinstance(rel.bounds, Bounds) and isinstance(rel.domain, PublicDomain)
    meta = rel.typed_metadata()
    assert meta.definitions is not None and meta.definitions.input_shape == "trips"
    doc = rel.metadata()
    assert list(doc) == [
        "kind", "privacy", "params", "domain", "for_publication", "software", "created_at",
        "ledger_entries", "analyses", "definitions", "warning",
    ]  # fmt: skip
    assert doc["privacy"]["bounds"] == {"max_trips_per_user": 3}
    assert doc["warning"] == NOT_FOR_PUBLICATION
    rel.publication_note = "the domain was read from the data"
    assert rel.metadata()["warning"] == "the domain was read from the data"
    for key in ("ledger", "domain", "software"):
        with pytest.raises(ConfigError, match="may not replace"):
            _release(extra={key: 1}).metadata()


def test_the_ledger_and_metadata_json_record_plain_json(tmp_path: Path):
    """The charge records the bounds and noise as JSON objects (not the text of a typed value)
    and metadata.json writes them as the kind gave them."""
    ledger = Ledger(tmp_path / "l.sqlite")
    acct = Accountant(ledger, "d", budget=2.0)
    rel = settle_by_hand(_release(), acct)
    entry = ledger.entries("d")[-1]
    assert entry.params["bounds"] == {"max_trips_per_user": 3}
    assert entry.params["noise"] == NOISE_DICTS[0]
    from privmob.releases.files import write_metadata_file

    (path,) = write_metadata_file(rel, tmp_path)
    doc = json.loads(path.read_text())
    assert doc["privacy"]["noise"] == NOISE_DICTS[0] and doc["domain"] == {"tiles": 9}
    assert doc["ledger"]["entry_ids"] == [entry.id]
