"""The ledger bound to its data and chained: fingerprints, provenance, hash chain, tampering
(real sqlite3 edits), the first schema's files, the default location."""

import os
import sqlite3
import stat
import warnings
from pathlib import Path

import pytest

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger, LedgerMigrated, default_ledger_path
from privmob.privacy.ledger.schema import FIRST_SCHEMA  # the first ledger files' schema

FP = "a" * 64
OTHER_FP = "b" * 64


def _charged(path, n=3):
    led = Ledger(path)
    led.set_budget("d", 10.0)
    for i in range(n):
        led.charge("d", Cost.pure(0.5), kind="od", description=f"r{i}", input_fingerprint=FP)
    return led


def _sql(path, *statements):
    con = sqlite3.connect(path, isolation_level=None)
    try:
        for s in statements:
            con.execute(s)
    finally:
        con.close()


def test_entries_record_input_output_user_and_host(ledger):
    ledger.set_budget("d", 1.0)
    e = ledger.charge(
        "d",
        Cost.pure(0.1),
        kind="od",
        input_fingerprint=FP,
        input_rows=123,
        output_dir="out",
        output_hashes={"od.parquet": "c" * 64},
    )
    (stored,) = ledger.entries("d")
    assert stored.provenance == e.provenance
    assert stored.provenance["input_fingerprint"] == FP
    assert stored.provenance["input_rows"] == 123
    assert stored.provenance["output_dir"] == os.path.abspath("out")
    assert stored.provenance["output_hashes"] == {"od.parquet": "c" * 64}
    assert stored.provenance["os_user"] and stored.provenance["host"]
    assert stored.row_hash == e.row_hash and len(e.row_hash) == 64
    assert ledger.verify() == []


def test_same_content_under_another_dataset_is_refused(ledger):
    ledger.set_budget("trips", 1.0)
    ledger.set_budget("census", 1.0)
    ledger.charge("trips", Cost.pure(0.1), kind="od", input_fingerprint=FP)
    with pytest.raises(BudgetError, match="already released under dataset 'trips'") as err:
        ledger.charge("census", Cost.pure(0.1), kind="od", input_fingerprint=FP)
    assert FP[:8] not in str(err.value)  # no hash of the data in a message
    with pytest.raises(BudgetError, match="'trips'"):
        ledger.check_input("census", FP)
    assert ledger.entries("census") == []
    # other content is fine, and the owner keeps releasing its own content
    ledger.charge("census", Cost.pure(0.1), kind="od", input_fingerprint=OTHER_FP)
    ledger.charge("trips", Cost.pure(0.1), kind="od", input_fingerprint=FP)


def test_stated_new_dataset_for_same_data_is_allowed_and_recorded(ledger):
    ledger.set_budget("trips", 1.0)
    ledger.set_budget("trips-2027", 1.0)
    ledger.charge("trips", Cost.pure(0.1), kind="od", input_fingerprint=FP)
    e = ledger.charge(
        "trips-2027",
        Cost.pure(0.1),
        kind="od",
        input_fingerprint=FP,
        new_dataset_for_same_data=True,
    )
    assert e.provenance["new_dataset_for_same_data"] is True
    assert ledger.entries("trips-2027")[0].provenance["new_dataset_for_same_data"] is True
    # stated once: that dataset now holds the content too
    ledger.charge("trips-2027", Cost.pure(0.1), kind="od", input_fingerprint=FP)
    assert ledger.verify() == []


def test_a_fresh_ledger_verifies_and_has_an_identity(tmp_path):
    led = _charged(tmp_path / "l.sqlite")
    assert led.verify() == []
    assert len(led.ledger_id) == 32
    assert Ledger(tmp_path / "l.sqlite").ledger_id == led.ledger_id  # created once


def test_an_edited_entry_is_detected(tmp_path):
    path = tmp_path / "l.sqlite"
    led = _charged(path)
    _sql(
        path,
        "DROP TRIGGER releases_append_only_u",
        "UPDATE releases SET epsilon = 0.01 WHERE id = 2",
    )
    problems = led.verify()
    assert any("entry 2" in p and "edited" in p for p in problems)
    assert led.spent("d").epsilon == pytest.approx(1.01)  # what the tamperer wanted


@pytest.mark.parametrize(
    ("deleted", "said"),
    [(2, ("entry 3", "deleted")), (3, ("holds 2 entries but recorded 3",))],
    ids=["a deleted entry", "a truncated ledger"],
)
def test_a_deleted_entry_is_detected_and_refused(
    tmp_path: Path, deleted: int, said: tuple[str, ...]
) -> None:
    path = tmp_path / "l.sqlite"
    led = _charged(path)
    _sql(path, "DROP TRIGGER releases_append_only_d", f"DELETE FROM releases WHERE id = {deleted}")
    assert any(all(words in p for words in said) for p in led.verify())
    with pytest.raises(BudgetError, match="damaged"):
        led.charge("d", Cost.pure(0.1), kind="od")


def test_an_edited_budget_is_detected(tmp_path):
    path = tmp_path / "l.sqlite"
    led = _charged(path)
    _sql(path, "DROP TRIGGER budgets_fixed_u", "UPDATE budgets SET epsilon = 100")
    assert any("budget of 'd'" in p for p in led.verify())


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ("releases", "its table releases was dropped"),
        ("ledger_meta", "table ledger_meta was dropped"),
    ],
)
def test_a_dropped_table_is_refused_not_recreated_as_spent_zero(
    tmp_path: Path, table: str, said: str
) -> None:
    path = tmp_path / "l.sqlite"
    _charged(path)
    _sql(path, f"DROP TABLE {table}")
    with pytest.raises(BudgetError, match=said):
        Ledger(path)
    con = sqlite3.connect(path)
    assert table not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()


def test_a_recreated_empty_table_is_refused(tmp_path):
    path = tmp_path / "l.sqlite"
    _charged(path)
    con = sqlite3.connect(path, isolation_level=None)
    (create,) = con.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'releases'"
    ).fetchone()
    con.execute("DROP TABLE releases")
    con.execute(create)
    con.close()
    led = Ledger(path)
    assert any("holds 0 entries but recorded 3" in p for p in led.verify())
    with pytest.raises(BudgetError, match="damaged"):
        led.charge("d", Cost.pure(0.1), kind="od")


def test_a_ledger_of_the_first_schema_opens_and_is_chained(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path, isolation_level=None)
    con.executescript(FIRST_SCHEMA)
    con.execute("INSERT INTO budgets VALUES ('d', 2.0, 0.0, 'user', '2026-01-01', '')")
    for i in range(2):
        con.execute(
            "INSERT INTO releases (dataset, created_at, kind, epsilon, delta, rho, unit, "
            "release_epsilon, release_delta, release_unit, group_size, for_publication, "
            "description, params) VALUES ('d', '2026-01-02', 'od', 0.5, 0, NULL, 'user', 0.5, "
            f"0, 'user', NULL, 1, 'old {i}', '{{}}')"
        )
    con.close()
    with pytest.warns(LedgerMigrated, match="2 existing entries"):
        led = Ledger(path)
    # chained but unsigned: nothing is charged until its custodian adopts it (signs it once)
    assert any("not signed" in p for p in led.verify())
    with pytest.raises(BudgetError, match=r"not signed.*ledger verify"):
        led.charge("d", Cost.pure(0.5), kind="od", input_fingerprint=FP)
    assert led.adopt() == 2
    assert led.verify() == []
    assert led.spent("d").epsilon == pytest.approx(1.0)
    led.charge("d", Cost.pure(0.5), kind="od", input_fingerprint=FP)
    assert [e.description for e in led.entries("d")] == ["old 0", "old 1", ""]
    assert led.verify() == []
    # the append-only triggers are back after the one-off chaining
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        _sql(path, "UPDATE releases SET epsilon = 0")
    with pytest.raises(sqlite3.DatabaseError, match="set once"):
        _sql(path, "UPDATE budgets SET epsilon = 100")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LedgerMigrated)
        assert Ledger(path).migrated is None  # chained once, never again


def test_default_ledger_is_in_the_user_data_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVMOB_LEDGER", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert default_ledger_path() == tmp_path / "data" / "privmob" / "ledger.sqlite"
    led = Ledger()
    assert led.path == tmp_path / "data" / "privmob" / "ledger.sqlite"
    assert stat.S_IMODE(os.stat(led.path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(led.path).st_mode) == 0o600
    assert not (tmp_path / "privmob-ledger.sqlite").exists()
    monkeypatch.setenv("PRIVMOB_LEDGER", str(tmp_path / "mine.sqlite"))
    assert default_ledger_path() == tmp_path / "mine.sqlite"  # the variable still wins
    monkeypatch.delenv("PRIVMOB_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # XDG: relative paths are invalid
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_ledger_path() == tmp_path / "home" / ".local/share/privmob/ledger.sqlite"


def _open_and_charge(path: str, barrier, results) -> None:
    barrier.wait()  # all open the file at once
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LedgerMigrated)
            led = Ledger(path)
        if led.key_ring().root is None:  # a first-schema ledger: chained once, unsigned
            results.put("unsigned")
            return
        led.set_budget("d", 2.0)  # the same budget again is a no-op
        led.charge("d", Cost.pure(0.1), kind="race", input_fingerprint=FP)
        results.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(repr(exc))


def _race_open(path, n: int = 4, expect: str = "ok") -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_open_and_charge, args=(str(path), barrier, results)) for _ in range(n)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
    assert [results.get(timeout=60) for _ in procs] == [expect] * n


def test_racing_processes_create_a_ledger_once(tmp_path):
    """Four real processes create the same new ledger at once and charge it."""
    path = tmp_path / "new.sqlite"
    _race_open(path)
    led = Ledger(path)
    assert len(led.entries("d")) == 4 and led.verify() == []


def test_racing_processes_upgrade_a_first_schema_ledger_once(tmp_path):
    """Four real processes open the same first-schema ledger at once and charge it: one of
    them chains the old entry, all charges land, and the chain verifies."""
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path, isolation_level=None)
    con.executescript(FIRST_SCHEMA)
    con.execute("INSERT INTO budgets VALUES ('d', 2.0, 0.0, 'user', '2026-01-01', '')")
    con.execute(
        "INSERT INTO releases (dataset, created_at, kind, epsilon, delta, rho, unit, "
        "release_epsilon, release_delta, release_unit, group_size, for_publication, "
        "description, params) VALUES ('d', '2026-01-02', 'od', 0.5, 0, NULL, 'user', 0.5, "
        "0, 'user', NULL, 1, 'old', '{}')"
    )
    con.close()
    _race_open(path, expect="unsigned")
    led = Ledger(path)
    assert len(led.entries("d")) == 1 and led.adopt() == 1 and led.verify() == []
    _race_open(path)
    assert len(led.entries("d")) == 5 and led.verify() == []


def test_integer_costs_hash_as_stored_and_older_entries_still_verify(tmp_path):
    """An epsilon given as an int is stored as REAL: its entry's hash is of the stored value (a
    charge after it verifies it); an entry an older privmob hashed with the int still verifies,
    and an edit of it does not."""
    from privmob.privacy.ledger import chain as chain

    led = Ledger(tmp_path / "l.sqlite")
    led.set_budget("d", 10)
    led.charge("d", Cost.pure(1), kind="od")
    led.charge("d", Cost.pure(2), kind="od")  # verifies entry 1 first
    assert led.verify() == []
    row = {"id": 1, "prev_hash": "p", "epsilon": 1.0, "delta": 0.0, "rho": None}
    old = {**chain.hashed(row), "epsilon": 1}
    row["row_hash"] = chain.digest("p", old)
    assert chain.entry_digest(row) == row["row_hash"]
    assert chain.entry_digest({**row, "epsilon": 0.5}) != row["row_hash"]
