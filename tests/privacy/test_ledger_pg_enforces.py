"""Issue 39, item 4: a PostgreSQL ledger enforces what an SQLite file can only detect. The
analyst's database role writes entries through one server function, ``charge``, which builds
the entry's place (dataset, id, chain, unit) on the server and checks its costs, its signer and
the budget; it cannot append a raw entry, settle another analyst's staged release, or use a
programme allowance outside a charge of its dataset. Each attack is made with real psql as the
analyst role, with an entry chained at the head and signed with the analyst's own key."""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest
from tests.privacy.test_ledger_postgres import FP, _as, _login, _role_exists, team  # noqa: F401

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger.keys import load_private
from privmob.privacy.ledger.trust import entry_message


def _psql(pg_cluster, url: str, statement: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(pg_cluster.bindir / "psql"), url, "-v", "ON_ERROR_STOP=1", "-At", "-c", statement],
        capture_output=True,
        text=True,
    )


def _forged(team, epsilon: float) -> dict:  # noqa: F811 (the fixture's type)
    """An entry of ``epsilon`` on 'd' at the ledger's head, chained and signed with alice's
    registered key: everything a client can make."""
    alice = team.opened_as("alice")
    with alice.store.connect() as con:
        last = chain.entry_rows(con)[-1]
        meta = alice.store.read_meta(con)
    row = {k: last[k] for k in chain.ROW_COLUMNS}
    row.update(
        id=last["id"] + 1,
        epsilon=epsilon,
        release_epsilon=epsilon,
        nonce=secrets.token_hex(16),
        prev_hash=meta["head_hash"],
    )
    row["row_hash"] = chain.digest(row["prev_hash"], chain.hashed(row))
    signer = load_private(team.keys["alice"])
    row["signer"] = signer.key_id
    row["signature"] = signer.sign("entry", entry_message(alice.ledger_id, row["row_hash"]))
    return row


def _literal(value: object) -> str:
    return json.dumps(value).replace("'", "''")


def test_the_analyst_role_cannot_append_a_raw_entry(team, pg_cluster):  # noqa: F811
    """Before: ``SELECT privmob.append_entry(...)`` by the analyst's role stored any signed
    entry at the head, one that overspends the budget (5 of 1) included."""
    team.opened_as("alice").charge("d", Cost.pure(0.25), kind="od", input_fingerprint=FP)
    row = _forged(team, 5.0)
    alice_url = _as(team.url, "alice")
    r = _psql(pg_cluster, alice_url, f"SELECT privmob.append_entry('{_literal(row)}'::jsonb)")
    assert r.returncode != 0 and "permission denied for function append_entry" in r.stderr
    # the one function she may call builds the entry's place and checks the budget
    r = _psql(pg_cluster, alice_url, f"SELECT privmob.charge('d', '{_literal([row])}'::jsonb)")
    assert r.returncode != 0 and "the budget of d cannot pay this charge" in r.stderr, r.stderr
    led = Ledger(team.url)
    assert len(led.entries()) == 1 and led.verify() == []
    assert led.spent("d").epsilon == pytest.approx(0.25)


def test_charge_builds_the_entry_place_on_the_server(team, pg_cluster):  # noqa: F811
    """Another dataset's entry in a charge of 'd', an id off the sequence, a unit that is not
    the budget's, or a signer that is not a key of the ledger: each refused."""
    team.opened_as("alice").charge("d", Cost.pure(0.25), kind="od", input_fingerprint=FP)
    alice_url = _as(team.url, "alice")
    cases = {
        "cannot write an entry of e": {"dataset": "e"},
        "the next entry is 2": {"id": 7},
        "not in the unit of the budget": {"unit": "trip"},
        "may not charge this ledger": {"signer": "0" * 16},
        "is not of an entry": {"signature": "zz" * 64},
    }
    for said, change in cases.items():
        row = {**_forged(team, 0.01), **change}
        r = _psql(pg_cluster, alice_url, f"SELECT privmob.charge('d', '{_literal([row])}'::jsonb)")
        assert r.returncode != 0 and said in r.stderr, (said, r.stderr)
    # the same entry unchanged is what a charge writes: accepted
    r = _psql(
        pg_cluster,
        alice_url,
        f"SELECT privmob.charge('d', '{_literal([_forged(team, 0.01)])}'::jsonb)",
    )
    assert r.returncode == 0, r.stderr
    assert Ledger(team.url).verify() == []


def test_a_staged_release_is_settled_by_its_owner_only(team, pg_cluster, tmp_path):  # noqa: F811
    """Before: ``stage_update`` worked on any row: another analyst marked alice's staged
    release abandoned (recover then removed her files) or charged without a charge."""
    from privmob.privacy.staging import StagingTable

    if not _role_exists(pg_cluster, "bob"):
        _login(pg_cluster, "bob")
    pg_cluster.sql("GRANT privmob_analyst TO bob")
    row = StagingTable(_as(team.url, "alice")).begin("d", tmp_path / "stage", [], [])
    bob_url = _as(team.url, "bob")
    for state in ("abandoned", "charged"):
        r = _psql(
            pg_cluster,
            bob_url,
            f"SELECT privmob.stage_update({row}, '{state}', '[1]', 'x', NULL, 'now')",
        )
        assert r.returncode != 0 and f"staged release {row} is not yours" in r.stderr, r.stderr
    # alice herself cannot mark it charged without a charge
    r = _psql(
        pg_cluster,
        _as(team.url, "alice"),
        f"SELECT privmob.stage_update({row}, 'charged', '[1]', 'x', NULL, 'now')",
    )
    assert r.returncode != 0 and "by its charge only" in r.stderr, r.stderr
    assert [s.state for s in StagingTable(team.url).rows(("writing", "charged", "abandoned"))] == [
        "writing"
    ]
    StagingTable(_as(team.url, "alice")).set_state(row, "abandoned")  # her own: yes


def test_an_allowance_is_used_only_by_a_charge(team, pg_cluster):  # noqa: F811
    """Before: the analyst's role burned the custodian's allowances with ``use_allowance``
    without releasing anything; now only a charge of the dataset uses one, in its
    transaction (the release outside the programme that it lets through)."""
    from privmob.privacy import programme_ledger as programme

    led = Ledger(team.url)
    programme.allow(led, "d", "od", "a test")
    r = _psql(pg_cluster, _as(team.url, "alice"), "SELECT privmob.use_allowance('d', 'od', 'od')")
    assert r.returncode != 0 and "with a charge of its dataset only" in r.stderr, r.stderr
    r = _psql(pg_cluster, team.url, "SELECT count(*) FROM privmob.programme_allowances")
    assert r.stdout.strip() == "1"


def test_a_release_outside_the_programme_uses_its_allowance_in_the_charge(
    team,  # noqa: F811
    pg_cluster,
):
    """The analyst's release the allowance lets through: charged, the allowance used in the
    same transaction; the next one is refused and charges nothing."""
    from privmob.privacy import programme_ledger as programme

    led = Ledger(team.url)
    plan = {"releases": [{"kind": "od", "count": 1, "epsilon_per_release": 0.1}]}
    with led.store.connect() as con:  # the custodian's recorded programme: one od of 0.1
        con.execute("INSERT INTO programmes VALUES ('d', 'now', 0, ?)", (json.dumps(plan),))
    programme.allow(led, "d", "od", "one larger release")
    alice = team.opened_as("alice")
    alice.charge("d", Cost.pure(0.3), kind="od", input_fingerprint=FP)
    with pytest.raises(
        BudgetError, match=r"planned od releases of 'd' are done; nothing was charged"
    ):
        alice.charge("d", Cost.pure(0.3), kind="od", input_fingerprint=FP)
    assert len(led.entries()) == 1 and led.verify() == []
    r = _psql(pg_cluster, team.url, "SELECT count(*) FROM privmob.programme_allowances")
    assert r.stdout.strip() == "0"


def test_a_ledger_made_by_an_earlier_privmob_is_charged_as_then(pg_url):
    """A database ledger whose functions predate ``charge``: charged through its
    ``append_entry``, as the privmob that made it did (no internal error)."""
    import psycopg

    Ledger(pg_url).set_budget("d", 1.0)
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DROP FUNCTION privmob.charge(text, jsonb)")
    led = Ledger(pg_url)
    led.charge("d", Cost.pure(0.25), kind="od", input_fingerprint=FP)
    assert len(led.entries()) == 1 and led.verify() == []


def test_an_over_budget_entry_carrying_a_rho_is_refused_by_the_server(team, pg_cluster):  # noqa: F811
    """Before: the server's budget check summed the entries without rho only, so an entry of
    epsilon 5 that carries a rho (a zCDP release) passed a budget of 1 whole. Now the family's
    totals with the charge must fit by one of the two accountings, as privmob's own check."""
    team.opened_as("alice").charge("d", Cost.pure(0.25), kind="od", input_fingerprint=FP)
    row = {**_forged(team, 5.0), "rho": 5.0}
    row["row_hash"] = chain.digest(row["prev_hash"], chain.hashed(row))
    signer = load_private(team.keys["alice"])
    row["signature"] = signer.sign(
        "entry", entry_message(Ledger(team.url).ledger_id, row["row_hash"])
    )
    r = _psql(
        pg_cluster,
        _as(team.url, "alice"),
        f"SELECT privmob.charge('d', '{_literal([row])}'::jsonb)",
    )
    assert r.returncode != 0 and "the budget of d cannot pay this charge" in r.stderr, r.stderr
    led = Ledger(team.url)
    assert len(led.entries()) == 1 and led.verify() == []


def test_the_server_counts_zcdp_releases_as_privmob_does(team, pg_cluster):  # noqa: F811
    """Gaussian releases of rho 0.005 at delta 1e-6 on a budget of (1, 1e-5): by basic
    composition the third no longer fits (3 x 0.53), by zCDP it does (rho 0.015 -> about 0.8
    at delta 1e-5); the server accepts what privmob accepts and refuses the first that fits by
    neither, after privmob itself refused it (nothing written either way)."""
    Ledger(team.url).set_budget("z", 1.0, 1e-5)
    alice = team.opened_as("alice")
    for _ in range(3):
        alice.charge("z", Cost.zcdp(0.005, 1e-6), kind="gauss")
    assert alice.accounts("z").tighter == "zCDP" and not alice.accounts("z").basic_fits
    with pytest.raises(BudgetError, match="cannot pay for it"):
        alice.charge("z", Cost.zcdp(0.05, 1e-6), kind="gauss")
    assert len(Ledger(team.url).entries()) == 3
    # the same over-budget entry sent to the server directly: refused there too
    with alice.store.connect() as con:
        last = chain.entry_rows(con)[-1]
        meta = alice.store.read_meta(con)
    big = Cost.zcdp(0.05, 1e-6)
    row = {k: last[k] for k in chain.ROW_COLUMNS}
    row.update(
        id=last["id"] + 1,
        epsilon=big.epsilon,
        release_epsilon=big.epsilon,
        rho=big.rho,
        nonce=secrets.token_hex(16),
        prev_hash=meta["head_hash"],
    )
    row["row_hash"] = chain.digest(row["prev_hash"], chain.hashed(row))
    signer = load_private(team.keys["alice"])
    row["signer"] = signer.key_id
    row["signature"] = signer.sign("entry", entry_message(alice.ledger_id, row["row_hash"]))
    r = _psql(
        pg_cluster,
        _as(team.url, "alice"),
        f"SELECT privmob.charge('z', '{_literal([row])}'::jsonb)",
    )
    assert r.returncode != 0 and "the budget of z cannot pay this charge" in r.stderr, r.stderr
    # a smaller one that zCDP still pays: accepted by the server (no refusal privmob would not
    # make)
    small = Cost.zcdp(0.001, 1e-6)
    row.update(epsilon=small.epsilon, release_epsilon=small.epsilon, rho=small.rho)
    row["row_hash"] = chain.digest(row["prev_hash"], chain.hashed(row))
    row["signature"] = signer.sign("entry", entry_message(alice.ledger_id, row["row_hash"]))
    r = _psql(
        pg_cluster,
        _as(team.url, "alice"),
        f"SELECT privmob.charge('z', '{_literal([row])}'::jsonb)",
    )
    assert r.returncode == 0, r.stderr
    assert Ledger(team.url).verify() == []


def test_governance_is_one_chain_on_postgresql_too(team, pg_cluster):  # noqa: F811
    """The same chain as on SQLite (one code): every custodian act an entry, in order; the
    schema's owner (who can drop a trigger) deleting a revocation is refused by every charge
    and reported by verify, naming the chain's entry."""
    led = Ledger(team.url)
    kid = load_private(team.keys["alice"]).key_id
    led.link("d", "d-2")
    led.revoke(kid)
    with led.store.connect() as con:
        kinds = [r[0] for r in con.execute("SELECT kind FROM governance ORDER BY seq").fetchall()]
    assert kinds == [
        *["ledger_keys", "budgets", "ledger_keys", "ledger_keys"],  # custodian, d, alice, olga
        *["dataset_links", "budgets", "checkpoints"],  # the link, the member, its checkpoint
        *["ledger_keys", "checkpoints"],  # the revocation and its checkpoint
    ]
    assert led.verify() == []
    r = _psql(
        pg_cluster,
        team.url,
        "ALTER TABLE privmob.ledger_keys DISABLE TRIGGER ledger_keys_append_only; "
        "DELETE FROM privmob.ledger_keys WHERE action = 'revoke'",
    )
    assert r.returncode == 0, r.stderr
    with pytest.raises(BudgetError, match=r"\(key event\): its record is gone"):
        Ledger(team.url, key=team.keys["alice"]).charge("d", Cost.pure(0.1), kind="od")
    assert any("(key event): its record is gone" in p for p in Ledger(team.url).verify())


# -- people sketches bound to the signed entries (issue 39) -----------------------------------
def _people(seed: int, n: int = 3_000):
    import numpy as np
    from tests.privacy.test_people import _sketch, _users

    return _sketch(_users(np.random.default_rng(seed), n))


def _stored_sketch(team) -> bytes:  # noqa: F811 (the fixture's type)
    with Ledger(team.url).store.connect() as con:
        return bytes(
            con.execute("SELECT sketch FROM dataset_people WHERE dataset = 'd'").fetchone()[0]
        )


def test_the_analyst_role_stores_only_the_sketch_her_entries_name(team, pg_cluster):  # noqa: F811
    """Before: within her charge's transaction, the analyst's role stored any well-formed
    sketch of at least the stored one's size (a same-size garbage sketch switched the people
    check off for 'd'). Now ``store_people`` stores only the sketch whose SHA-256 the entries of
    that charge name; the sketch they name is stored (real psql, one transaction each)."""
    import hashlib

    from privmob.privacy.people import PeopleSketch

    alice = team.opened_as("alice")
    alice.charge_parts(
        "d", [("", Cost.pure(0.1))], kind="od", input_fingerprint=FP, people=_people(1)
    )
    before = _stored_sketch(team)
    merged = PeopleSketch.from_bytes(before).merge(_people(2)).to_bytes()
    garbage = _people(3, 6_000).to_bytes()[: len(merged)]  # well-formed, the same size
    assert PeopleSketch.from_bytes(garbage).hashes and len(garbage) == len(merged)
    named = hashlib.sha256(merged).hexdigest()

    def attempt(sketch: bytes, params: dict) -> subprocess.CompletedProcess[str]:
        row = _forged(team, 0.01)
        row["params"] = json.dumps(params)
        row["row_hash"] = chain.digest(row["prev_hash"], chain.hashed(row))
        signer = load_private(team.keys["alice"])
        row["signature"] = signer.sign("entry", entry_message(alice.ledger_id, row["row_hash"]))
        return subprocess.run(
            [str(pg_cluster.bindir / "psql"), _as(team.url, "alice"), "-v", "ON_ERROR_STOP=1"],
            input=f"BEGIN;\nSELECT privmob.charge('d', '{_literal([row])}'::jsonb);\n"
            f"SELECT privmob.store_people('d', '\\x{sketch.hex()}'::bytea, 'now');\nCOMMIT;\n",
            capture_output=True,
            text=True,
        )

    for params in ({"people_sketch": named}, {}):  # entries naming another sketch, or none
        r = attempt(garbage, params)
        assert r.returncode != 0 and "as the entries of its charge name it" in r.stderr, r.stderr
        assert _stored_sketch(team) == before
    assert len(Ledger(team.url).entries()) == 1
    r = attempt(merged, {"people_sketch": named})  # the sketch they name: stored
    assert r.returncode == 0, r.stderr
    assert _stored_sketch(team) == merged and Ledger(team.url).verify() == []


def test_a_replaced_sketch_is_refused_on_postgresql_too(team, pg_cluster):  # noqa: F811
    """The schema's owner (who can write the table) replaces the sketch of 'd' by another
    well-formed one: the analyst's next charge with people is refused (one code for both
    stores) and verify reports it, naming the dataset only."""
    alice = team.opened_as("alice")
    alice.charge_parts(
        "d", [("", Cost.pure(0.1))], kind="od", input_fingerprint=FP, people=_people(1)
    )
    forged = _people(4).to_bytes()
    r = _psql(
        pg_cluster,
        team.url,
        f"UPDATE privmob.dataset_people SET sketch = '\\x{forged.hex()}'::bytea "
        "WHERE dataset = 'd'",
    )
    assert r.returncode == 0, r.stderr
    with pytest.raises(BudgetError, match="the people sketch of dataset 'd' is not the one"):
        alice.charge_parts(
            "d", [("", Cost.pure(0.1))], kind="od", input_fingerprint=FP, people=_people(1)
        )
    assert len(Ledger(team.url).entries()) == 1
    assert any("people sketch of dataset 'd'" in p for p in Ledger(team.url).verify())


def test_privmobs_own_entries_below_the_conversion_of_their_rho_are_charged(team, tmp_path):  # noqa: F811
    """Why neither store refuses an entry whose epsilon is below the zCDP conversion of its
    rho: privmob writes such entries itself. A discrete Gaussian of L1 = L2 sensitivity 1
    (``population``, counts with -T 1) is calibrated by the exact (epsilon, delta) of
    Canonne-Kamath-Steinke 2020, Theorem 7, which is 4-14% below the conversion of its rho at
    delta 1e-6..1e-12, and arbitrarily far below it at a large delta. So no check from rho alone
    tells an understated entry from them (and an entry without a rho understates the same way):
    such an entry is attributed to the key that signed it. Both stores charge them, and both
    verify."""
    from privmob.privacy.mechanisms import NoiseKind, calibrate
    from privmob.privacy.zcdp import zcdp_epsilon

    _, cost = calibrate(
        NoiseKind.DISCRETE_GAUSSIAN, 0.5, l1_sensitivity=1, l2_sensitivity=1, delta=1e-6
    )
    assert cost.rho is not None and cost.epsilon < 0.95 * zcdp_epsilon(cost.rho, cost.delta)
    Ledger(team.url).set_budget("g", 1.0, 1e-5)
    team.opened_as("alice").charge("g", cost, kind="population")
    in_file = Ledger(tmp_path / "own.sqlite")
    in_file.set_budget("g", 1.0, 1e-5)
    in_file.charge("g", cost, kind="population")
    assert Ledger(team.url).verify() == [] and in_file.verify() == []


def test_the_people_sketches_move_to_postgresql_and_back(pg_url, tmp_path):
    """An SQLite ledger whose checkpoint names a people sketch: imported into a database (it was
    refused before: the sketch "is gone"), it verifies, refuses the same people under another
    name, and exports its sketches, entries and checkpoints as they were."""
    from privmob.privacy.ledger.transfer import export_ledger, import_ledger

    src = Ledger(tmp_path / "a.sqlite")
    src.set_budget("d", 3.0)
    src.set_budget("e", 3.0)
    people = _people(1)
    src.charge_parts("d", [("", Cost.pure(0.5))], kind="od", input_fingerprint=FP, people=people)
    src.checkpoint()
    first = tmp_path / "first.json"
    export_ledger(src, first)
    pg = import_ledger(pg_url, first)
    assert pg.verify() == []
    again = tmp_path / "again.json"
    export_ledger(pg, again)
    moved, before = (json.loads(f.read_text())["tables"] for f in (again, first))
    for table in ("dataset_people", "releases", "checkpoints"):  # (a database has programmes)
        assert moved[table] == before[table], table
    with pytest.raises(BudgetError, match="are users of dataset 'd'"):
        pg.charge_parts("e", [("", Cost.pure(0.5))], kind="od", people=people)
