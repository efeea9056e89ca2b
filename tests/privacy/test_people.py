"""The people sketch (privmob.privacy.people): the estimator's properties on known sets (fixed
seeds), its bytes, its keyed hash computed by DuckDB as in the Python reference, the key's file,
and the ledger's custodian-only table."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from privmob.data.validation import people_source
from privmob.engine import make_engine
from privmob.errors import BudgetError
from privmob.privacy.ledger import Ledger
from privmob.privacy.people import (
    OVERLAP_THRESHOLD,
    SKETCH_SIZE,
    PeopleSketch,
    keyed_hash,
    people_key,
)


def _users(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2)


def _sketch(values: np.ndarray) -> PeopleSketch:
    return PeopleSketch.of(int(v) for v in values)


@pytest.mark.parametrize(("n_a", "n_b", "share"), [(20_000, 20_000, 0.3), (20_000, 20_000, 0.7),
                                                   (5_000, 50_000, 0.4)])  # fmt: skip
def test_the_estimate_is_within_five_standard_errors(n_a, n_b, share):
    """A of n_a users, B of n_b of which share x min(n_a, n_b) are A's. The bound is five
    standard errors sqrt(c(1-c)/n) with n the sampled users of the smaller dataset (about
    k x smaller/larger): false failure below 1e-6 per case for these seeds' binomial draws."""
    rng = np.random.default_rng(11)
    a = _users(rng, n_a)
    common = int(share * min(n_a, n_b))
    b = np.concatenate([a[:common], _users(rng, n_b - common)])
    est = _sketch(a).overlap(_sketch(b))
    n = SKETCH_SIZE * min(n_a, n_b) / max(n_a, n_b)
    assert abs(est - share) < 5 * np.sqrt(share * (1 - share) / n)
    assert (est >= OVERLAP_THRESHOLD) == (share >= OVERLAP_THRESHOLD)


def test_copies_subsets_and_strangers():
    rng = np.random.default_rng(3)
    big = _users(rng, 200_000)
    sketch = _sketch(big)
    assert sketch.full and len(sketch.hashes) == SKETCH_SIZE
    assert sketch.overlap(_sketch(big[::-1])) == 1.0  # a copy
    assert sketch.overlap(_sketch(big[:-1])) > 0.99  # one user less
    # a subset of 5% of the users is a subset: every sampled user of it is in the big sketch
    assert sketch.overlap(_sketch(big[:10_000])) == 1.0
    assert _sketch(big[:50]).overlap(sketch) == 1.0  # a tiny subset, sketch not full
    assert sketch.overlap(_sketch(_users(rng, 200_000))) == 0.0  # other people
    assert PeopleSketch.of([]).overlap(sketch) == 0.0


def test_merge_bytes_and_repr():
    rng = np.random.default_rng(5)
    a, b = _users(rng, 6_000), _users(rng, 3_000)
    merged = _sketch(a).merge(_sketch(b))
    assert merged == _sketch(np.concatenate([a, b]))
    assert PeopleSketch.from_bytes(merged.to_bytes()) == merged
    assert str(hex(merged.hashes[0])[2:]) not in repr(merged)
    with pytest.raises(ValueError, match="not a people sketch"):
        PeopleSketch.from_bytes(b"PMPS0" + merged.to_bytes()[5:])


def test_duckdb_computes_the_reference_keyed_hash(tmp_path):
    """The SQL sketch of distinct ids equals the Python reference (text and integer ids)."""
    eng = make_engine("duckdb")
    try:
        eng.create_view("ids", "SELECT * FROM (VALUES ('u1'), ('u2'), ('u1'), ('7'), ('é')) t(uid)")
        key = os.urandom(32)
        got = people_source(eng, "ids", "CAST(uid AS VARCHAR)")(key)
        assert got == PeopleSketch.of(keyed_hash(key, u) for u in ("u1", "u2", "7", "é"))
        other = people_source(eng, "ids", "CAST(uid AS VARCHAR)")(os.urandom(32))
        assert set(other.hashes).isdisjoint(got.hashes)  # another key: unrelated values
    finally:
        eng.close()


def test_the_key_is_private_stable_and_per_ledger(tmp_path):
    first, second = Ledger(tmp_path / "a.sqlite"), Ledger(tmp_path / "b.sqlite")
    key = people_key(first)
    assert len(key) == 32 and people_key(first) == key != people_key(second)
    # the ledger's people key: a file beside the custodian's key, in the user's private data
    # directory (conftest points XDG_DATA_HOME at a temporary one), 0600, never in the ledger
    secret = next(Path(os.environ["XDG_DATA_HOME"]).rglob(f"people-{first.ledger_id}.key"))
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert key not in first.path.read_bytes() and key.hex() not in first.path.read_text("latin-1")


def test_the_ledger_stores_and_checks_people(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    for name in ("A", "B"):
        led.set_budget(name, 10.0)
    rng = np.random.default_rng(9)
    people = _sketch(_users(rng, 10_000))
    from privmob.privacy.costs import Cost

    led.charge_parts("A", [("", Cost(1.0))], kind="t", input_fingerprint="f1", people=people)
    led.check_input("A", "f2", people=people)  # its own people: fine
    with pytest.raises(BudgetError, match="are users of dataset 'A'"):
        led.check_input("B", "f2", people=people)
    with pytest.raises(BudgetError, match="are users of dataset 'A'"):
        led.charge_parts("B", [("", Cost(1.0))], kind="t", input_fingerprint="f2", people=people)
    assert led.entries("B") == []
    led.check_input("B", "f2", people=people, new_dataset_for_same_data=True)
    led.check_input("B", "f3", people=_sketch(_users(rng, 10_000)))  # other people
