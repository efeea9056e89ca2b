"""Roles on an SQLite ledger are the possession of a registered key: the custodian sets budgets,
grants, rotates, links families and approves same-data releases; an analyst charges existing
budgets only; an auditor (or anyone with no key) reads and verifies. Keys are real Ed25519 key
files; racing releasers are real processes."""

import os
import sqlite3
import stat
from pathlib import Path

import pytest
from tests.privacy.racing import race_for_budget

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger
from privmob.privacy.ledger.keys import Signer, default_key_path, generate, load_private

FP = "c" * 64


@pytest.fixture
def team(tmp_path):
    """A ledger whose custodian, analyst and auditor each hold their own key file."""
    keys = {
        role: generate(tmp_path / f"{role}.pem") for role in ("custodian", "analyst", "auditor")
    }
    path = tmp_path / "team.sqlite"
    led = Ledger(path, key=keys["custodian"])
    led.grant("analyst", "ana", keys["analyst"].public_hex)
    led.grant("auditor", "aud", keys["auditor"].public_hex)
    led.set_budget("cdr-2026-01", 2.0)
    return path, keys


def test_a_new_ledger_makes_the_users_own_key_its_custodian(tmp_path):
    led = Ledger(tmp_path / "mine.sqlite")
    key = default_key_path()
    assert key.exists() and stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert led.role() == "custodian" and led.key_ring().root == load_private(key).key_id
    led.set_budget("d", 1.0)
    led.charge("d", Cost.pure(0.5), kind="od")
    assert led.verify() == []
    assert b"PRIVATE" not in (tmp_path / "mine.sqlite").read_bytes()  # public keys only


def test_the_analyst_charges_existing_budgets_only(team):
    path, keys = team
    ana = Ledger(path, key=keys["analyst"])
    assert ana.role() == "analyst"
    ana.charge("cdr-2026-01", Cost.pure(0.5), kind="od", input_fingerprint=FP)
    with pytest.raises(BudgetError, match="only a custodian may"):
        ana.set_budget("cdr-2026-02", 5.0)
    ana.set_budget("cdr-2026-01", 2.0)  # the existing budget again: a no-op, allowed
    with pytest.raises(BudgetError, match="only a custodian may"):
        ana.link("cdr-2026-01", "cdr-2026-02")
    with pytest.raises(BudgetError, match="only a custodian may"):
        ana.grant("analyst", "mallory", Signer.ephemeral().public_hex)
    with pytest.raises(BudgetError, match="only a custodian may"):
        ana.checkpoint()
    assert Ledger(path, key=keys["auditor"]).verify() == []


def test_a_same_data_release_under_another_name_needs_the_custodians_approval(team):
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.set_budget("copy", 2.0)
    ana = Ledger(path, key=keys["analyst"])
    ana.charge("cdr-2026-01", Cost.pure(0.5), kind="od", input_fingerprint=FP)
    with pytest.raises(BudgetError, match="already released under dataset 'cdr-2026-01'"):
        ana.check_input("copy", FP)
    with pytest.raises(BudgetError, match="approve-same-data copy"):
        ana.charge(
            "copy", Cost.pure(0.5), kind="od", input_fingerprint=FP, new_dataset_for_same_data=True
        )
    assert not ana.approved_same_data("copy")
    cus.approve_same_data("copy", "a separate study, agreed with the DPO")
    assert ana.approved_same_data("copy")
    ana.check_input("copy", FP, new_dataset_for_same_data=True)
    ana.charge(
        "copy", Cost.pure(0.5), kind="od", input_fingerprint=FP, new_dataset_for_same_data=True
    )
    assert ana.verify() == []


def test_auditors_and_keyless_readers_verify_but_never_write(team, monkeypatch):
    path, keys = team
    aud = Ledger(path, key=keys["auditor"])
    with pytest.raises(BudgetError, match=r"known .*auditor|the auditor key"):
        aud.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    monkeypatch.setenv("XDG_DATA_HOME", str(path.parent / "nobody"))
    anyone = Ledger(path, create=False)
    assert anyone.signer is None and anyone.verify() == []
    assert anyone.spent("cdr-2026-01").epsilon == 0
    with pytest.raises(BudgetError, match="no key"):
        anyone.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    stranger = Ledger(path, key=Signer.ephemeral())
    with pytest.raises(BudgetError, match="does not know"):
        stranger.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    assert len(anyone.entries()) == 0


def test_a_family_shares_one_per_person_budget(team):
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    assert cus.link("cdr-2026-01", "cdr-2026-02") == "cdr-2026-01"
    ana = Ledger(path, key=keys["analyst"])
    assert ana.shares_budget("cdr-2026-01", "cdr-2026-02")
    assert not ana.shares_budget("cdr-2026-01", "other")
    ana.charge("cdr-2026-01", Cost.pure(1.2), kind="od", input_fingerprint=FP)
    with pytest.raises(BudgetError, match="cannot pay"):
        ana.charge("cdr-2026-02", Cost.pure(1.0), kind="od", input_fingerprint="d" * 64)
    ana.charge("cdr-2026-02", Cost.pure(0.8), kind="od", input_fingerprint="d" * 64)
    assert ana.remaining("cdr-2026-02").epsilon == pytest.approx(0.0)
    # the same data under a linked name is not a foreign input
    ana.check_input("cdr-2026-02", FP)
    with pytest.raises(BudgetError, match="family"):
        cus.set_budget("cdr-2026-02", 10.0)
    assert ana.verify() == []


def test_a_forged_link_is_refused_at_charge_time(team):
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.set_budget("big", 100.0)
    con = sqlite3.connect(path, isolation_level=None)  # an insider links a name by hand
    con.execute(
        "INSERT INTO dataset_links VALUES ('cdr-2026-01', 'big', 0, '2026-01-01', 'x', 'y')"
    )
    con.close()
    ana = Ledger(path, key=keys["analyst"])
    with pytest.raises(
        BudgetError, match=r"family link of 'cdr-2026-01': in no entry.*ledger verify"
    ):
        ana.charge("cdr-2026-01", Cost.pure(5.0), kind="od")
    assert any("dataset_links" in p for p in ana.verify())


def test_rotation_keeps_old_entries_verifiable_and_retires_the_old_key(team, tmp_path):
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.charge("cdr-2026-01", Cost.pure(0.5), kind="od")
    new = generate(tmp_path / "custodian-2027.pem")
    cus.rotate(new)
    assert Ledger(path, key=new).role() == "custodian"
    old = Ledger(path, key=keys["custodian"])
    assert old.role() is None
    with pytest.raises(BudgetError, match="revoked"):
        old.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    with pytest.raises(BudgetError):
        old.set_budget("x", 1.0)
    Ledger(path, key=new).set_budget("cdr-2026-02", 1.0)
    Ledger(path, key=keys["analyst"]).charge("cdr-2026-01", Cost.pure(0.5), kind="od")
    assert Ledger(path, key=keys["auditor"]).verify() == []


def test_an_entry_signed_after_its_key_was_revoked_does_not_verify(team):
    path, keys = team
    ana = Ledger(path, key=keys["analyst"])
    ana.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    cus = Ledger(path, key=keys["custodian"])
    cus.revoke(keys["analyst"].key_id)
    with pytest.raises(BudgetError, match="revoked"):
        ana.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    assert cus.verify() == []
    # its entry 1 stays valid; an entry 2 it signed (appended by hand) would not verify
    ring = cus.key_ring()
    assert ring.entry_public(keys["analyst"].key_id, 2) is None
    assert ring.entry_public(keys["analyst"].key_id, 1) is not None


def test_checkpoints_make_charges_start_late_and_are_verified(team):
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    ana = Ledger(path, key=keys["analyst"])
    for _ in range(3):
        ana.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    pos = cus.checkpoint()
    assert pos.count == 3 and pos.totals["cdr-2026-01"][0] == pytest.approx(0.3)
    # an edit before the checkpoint changes nothing a charge decides: 2.0 - 0.3 is left
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("DROP TRIGGER releases_append_only_u")
    con.execute("UPDATE releases SET epsilon = 0.0 WHERE id = 1")
    con.close()
    with pytest.raises(BudgetError, match="cannot pay"):
        ana.charge("cdr-2026-01", Cost.pure(1.75), kind="od")
    assert any("entry 1" in p for p in ana.verify())
    ana.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    con = sqlite3.connect(path, isolation_level=None)  # an edit after the checkpoint
    con.execute("UPDATE releases SET epsilon = 0.0 WHERE id = 4")
    con.close()
    with pytest.raises(BudgetError, match=r"entry 4.*ledger verify"):
        ana.charge("cdr-2026-01", Cost.pure(0.1), kind="od")
    with pytest.raises(BudgetError, match="does not verify"):
        cus.checkpoint()  # a custodian never signs over a broken history


def test_a_forged_checkpoint_is_refused(team):
    path, keys = team
    ana = Ledger(path, key=keys["analyst"])
    ana.charge("cdr-2026-01", Cost.pure(1.5), kind="od")
    con = sqlite3.connect(path, isolation_level=None)
    (h,) = con.execute("SELECT row_hash FROM releases WHERE id = 1").fetchone()
    con.execute(
        "INSERT INTO checkpoints (entry_count, last_id, head_hash, totals, adopted, created_at, "
        "signer, signature) VALUES (1, 1, ?, '{}', 0, 'now', ?, ?)",
        (h, keys["custodian"].key_id, "00" * 64),
    )
    con.close()
    with pytest.raises(BudgetError, match=r"checkpoint 1: in no entry of the custodian's"):
        ana.charge("cdr-2026-01", Cost.pure(1.0), kind="od")
    assert any(
        "checkpoint 1: not signed" in p for p in Ledger(path, key=keys["custodian"]).verify()
    )


def test_people_key_is_the_custodians_and_stays_outside_the_ledger(team, monkeypatch):
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    secret = cus.people_key()
    assert len(secret) == 32 and secret == Ledger(path, key=keys["custodian"]).people_key()
    assert secret.hex().encode() not in path.read_bytes()
    stored = keys["custodian"].path.parent / f"people-{cus.ledger_id}.key"
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    # an analyst whose key lives elsewhere gets it only from the custodian
    other = generate(path.parent / "elsewhere" / "ana.pem")
    cus.grant("analyst", "ana2", other.public_hex)
    with pytest.raises(BudgetError, match="people key"):
        Ledger(path, key=other).people_key()
    monkeypatch.setenv("PRIVMOB_PEOPLE_KEY", secret.hex())
    assert Ledger(path, key=other).people_key() == secret


def test_an_ephemeral_key_signs_a_throw_away_ledger(tmp_path):
    led = Ledger(tmp_path / "t.sqlite", key=Signer.ephemeral())
    led.set_budget("d", 1.0)
    led.charge("d", Cost.pure(0.5), kind="od")
    assert led.verify() == [] and not default_key_path().exists()
    assert len(led.people_key()) == 32


def test_a_key_file_others_can_read_is_refused(tmp_path):
    key = generate(tmp_path / "k.pem")
    os.chmod(key.path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        Ledger(tmp_path / "l.sqlite", key=key.path)
    with pytest.raises(ConfigError, match="never overwritten"):
        generate(tmp_path / "k.pem")


def test_32_racing_signing_processes_cannot_overspend(tmp_path: Path) -> None:
    """32 real processes, each signing with the analyst's key, race for a budget that fits 3
    charges: 3 land, all signed, the ledger verifies."""
    cus = generate(tmp_path / "custodian.pem")
    ana = generate(tmp_path / "analyst.pem")
    path = str(tmp_path / "race.sqlite")
    led = Ledger(path, key=cus)
    led.grant("analyst", "ana", ana.public_hex)
    led.set_budget("d", 1.0)
    assert sum(race_for_budget(path, 32, key=str(ana.path), join_seconds=900)) == 3
    assert len(led.entries("d")) == 3 and led.verify() == []
    assert led.spent("d").epsilon == pytest.approx(0.9)


def test_only_the_custodian_records_or_loosens_a_programme(team):
    from privmob.privacy import programme_ledger as pl

    path, keys = team
    with pytest.raises(BudgetError, match="only a custodian may"):
        pl.allow(Ledger(path, key=keys["analyst"]), "cdr-2026-01", "od", reason="in a hurry")
    pl.allow(Ledger(path, key=keys["custodian"]), "cdr-2026-01", "od", reason="flood response")


def test_a_retired_custodian_key_can_no_longer_sign_anything_that_counts(team, tmp_path):
    """Whoever keeps (or steals) a rotated-out custodian key signs a new budget row, a family
    link, a key grant and a checkpoint with it, dating them before its retirement: refused."""
    from privmob.privacy.ledger import chain as chain
    from privmob.privacy.ledger import trust as trust

    path, keys = team
    old = keys["custodian"]
    cus = Ledger(path, key=old)
    cus.set_budget("other", 1.0)
    new = generate(tmp_path / "new-custodian.pem")
    cus.rotate(new)
    ana = Ledger(path, key=keys["analyst"])
    ana.charge("cdr-2026-01", Cost.pure(0.5), kind="od")  # what the old key signed still counts
    lid = ana.ledger_id
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("DROP TRIGGER budgets_fixed_d")
    con.execute("DELETE FROM budgets WHERE dataset = 'cdr-2026-01'")  # re-made at epsilon 100
    row = {
        "dataset": "cdr-2026-01",
        "epsilon": 100.0,
        "delta": 0.0,
        "unit": "user",
        "created_at": "2026-01-01T00:00:00",
        "note": "",
    }
    own = chain.budget_hash(lid, row)
    con.execute(
        "INSERT INTO budgets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*row.values(), own, old.key_id, trust.budget_signature(old, lid, own)),
    )
    trust.add_key_event(
        con,
        lid,
        old,
        action="grant",
        role="custodian",
        name="me",
        public_hex=Signer.ephemeral().public_hex,
        at_count=0,
        created="2026-01-01",
    )
    con.close()
    with pytest.raises(BudgetError, match=r"does not verify.*ledger verify"):
        ana.charge("cdr-2026-01", Cost.pure(5.0), kind="od")
    problems = ana.verify()
    assert any("budget of 'cdr-2026-01'" in p and "revoked" in p for p in problems)
    assert any("key event" in p for p in problems)


def test_a_checkpoint_signed_with_a_retired_key_is_refused(team, tmp_path):
    from privmob.privacy.ledger import trust as trust

    path, keys = team
    Ledger(path, key=keys["custodian"]).rotate(generate(tmp_path / "new-custodian.pem"))
    ana = Ledger(path, key=keys["analyst"])
    ana.charge("cdr-2026-01", Cost.pure(1.5), kind="od")
    con = sqlite3.connect(path, isolation_level=None)  # totals of nothing: "all spent is 0"
    trust.add_checkpoint(con, ana.ledger_id, keys["custodian"], trust.GENESIS, "2026-01-01")
    con.close()
    # its governance entry is signed by a key revoked before its place in the chain
    with pytest.raises(BudgetError, match=r"\(checkpoint\): not signed by a custodian key active"):
        ana.charge("cdr-2026-01", Cost.pure(1.0), kind="od")
