"""Issue 27's attacks on the ledger file, each made by a real process (the sqlite3 command or a
Python script in a subprocess) after a budget of 6 was spent to 5 by four releases; then a
release of epsilon 1.5 must be refused (exit 3, naming ``privmob ledger verify``, nothing
written) and ``privmob ledger verify`` must exit 3. On the code before signed ledgers every one
of these releases exited 0 and charged (and ``verify`` exited 0 for the forged histories)."""

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from tests.helpers import box_grid, random_trips

from privmob.cli import main

SQLITE3 = shutil.which("sqlite3")


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0)


def _od(tmp_path, out: str, epsilon: str) -> int:
    return _run(
        "od",
        str(tmp_path / "trips.parquet"),
        "-t",
        str(tmp_path / "grid.geojson"),
        "-e",
        epsilon,
        "-T",
        "2",
        "--ledger",
        str(tmp_path / "ledger.sqlite"),
        "-o",
        str(tmp_path / out),
        "--quiet",
    )


def _entries(path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT count(*) FROM releases").fetchone()[0])
    finally:
        con.close()


@pytest.fixture
def spent(tmp_path):
    """Budget 6 for 'trips', spent 5 by four releases r0..r3 of 1.25."""
    random_trips(20, 9, seed=3).to_parquet(tmp_path / "trips.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    ledger = str(tmp_path / "ledger.sqlite")
    assert _run("ledger", "init", "trips", "--epsilon", "6", "--make-key", "--ledger", ledger) == 0
    for i in range(4):
        assert _od(tmp_path, f"r{i}", "1.25") == 0
    return tmp_path


def _sqlite(path, script: str) -> None:
    """Edit the ledger with the sqlite3 command (another process, as an insider would)."""
    if SQLITE3 is None:  # the same statements through Python's sqlite3, in a subprocess
        _python(f"import sqlite3\nc = sqlite3.connect({str(path)!r})\nc.executescript({script!r})")
        return
    subprocess.run([SQLITE3, str(path)], input=script, text=True, check=True)


def _python(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True)


def _refused_and_unverified(tmp_path, capsys, why: str = "", epsilon: str = "1.5") -> str:
    ledger = tmp_path / "ledger.sqlite"
    before = _entries(ledger) if why != "damaged" else None
    capsys.readouterr()
    assert _od(tmp_path, "late", epsilon) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "privmob ledger verify" in err
    assert not (tmp_path / "late").exists()
    if before is not None:
        assert _entries(ledger) == before  # nothing written
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 3
    return err + " " + " ".join(capsys.readouterr().err.split())


def test_dropped_triggers_and_edited_epsilons(spent, capsys):
    _sqlite(
        spent / "ledger.sqlite",
        "DROP TRIGGER releases_append_only_u;\n"
        "UPDATE releases SET epsilon = 0.001, release_epsilon = 0.001 WHERE id <= 4;\n",
    )
    text = _refused_and_unverified(spent, capsys)
    assert "entry 1" in text


def test_raised_budget(spent, capsys):
    _sqlite(
        spent / "ledger.sqlite",
        "DROP TRIGGER budgets_fixed_u;\nUPDATE budgets SET epsilon = 1000;\n",
    )
    assert "budget of 'trips'" in _refused_and_unverified(spent, capsys)


def test_reordered_entries(spent, capsys):
    _sqlite(
        spent / "ledger.sqlite",
        "DROP TRIGGER releases_append_only_u;\n"
        "UPDATE releases SET id = 100 WHERE id = 1;\n"
        "UPDATE releases SET id = 1 WHERE id = 2;\n"
        "UPDATE releases SET id = 2 WHERE id = 100;\n",
    )
    # the order changes no sum: a release that fits is refused all the same
    _refused_and_unverified(spent, capsys, epsilon="0.5")


def test_deleted_last_entries_with_the_head_set_by_hand(spent, capsys):
    ledger = spent / "ledger.sqlite"
    _sqlite(
        ledger,
        "DROP TRIGGER releases_append_only_d;\n"
        "DELETE FROM releases WHERE id > 2;\n"
        "UPDATE ledger_meta SET value = '2' WHERE key = 'head_count';\n"
        "UPDATE ledger_meta SET value = (SELECT row_hash FROM releases WHERE id = 2) "
        "WHERE key = 'head_hash';\n",
    )
    assert "no longer holds entry 4" in _refused_and_unverified(spent, capsys)
    # an auditor without this user's position cache sees it from the release folders
    capsys.readouterr()
    code = _run("ledger", "verify", "--ledger", str(ledger), "--releases", str(spent / "r3"))
    assert code == 3
    assert "entries were deleted at the end" in " ".join(capsys.readouterr().err.split())


def test_deleted_last_entries_are_seen_from_the_release_folders_alone(spent, capsys, monkeypatch):
    ledger = spent / "ledger.sqlite"
    _sqlite(
        ledger,
        "DROP TRIGGER releases_append_only_d;\n"
        "DELETE FROM releases WHERE id = 4;\n"
        "UPDATE ledger_meta SET value = '3' WHERE key = 'head_count';\n"
        "UPDATE ledger_meta SET value = (SELECT row_hash FROM releases WHERE id = 3) "
        "WHERE key = 'head_hash';\n",
    )
    monkeypatch.setenv("XDG_DATA_HOME", str(spent / "auditor"))  # no key, no cache: an auditor
    capsys.readouterr()
    releases = [str(spent / f"r{i}") for i in range(4)]
    assert _run("ledger", "verify", "--ledger", str(ledger), *releases[:3]) == 0
    assert _run("ledger", "verify", "--ledger", str(ledger), *releases) == 3
    assert "r3: its ledger entries [4] are missing" in " ".join(capsys.readouterr().err.split())


RECHAIN = """
import json, sqlite3
from privmob.privacy.ledger import chain as chain
c = sqlite3.connect({path!r}, isolation_level=None)
c.execute("DROP TRIGGER releases_append_only_u")
c.execute("DROP TRIGGER budgets_fixed_u")
c.execute("UPDATE releases SET epsilon = 0.001 WHERE id = 2")
c.execute("UPDATE budgets SET epsilon = 100")
lid = dict(c.execute("SELECT key, value FROM ledger_meta").fetchall())["ledger_id"]
prev = chain.genesis(lid)
for row in chain.entry_rows(c):
    own = chain.digest(prev, chain.hashed(row))
    c.execute("UPDATE releases SET prev_hash = ?, row_hash = ? WHERE id = ?",
              (prev, own, row["id"]))
    prev = own
c.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head_hash'", (prev,))
cols = ", ".join(chain.BUDGET_COLUMNS)
for b in c.execute(f"SELECT {{cols}} FROM budgets").fetchall():
    row = dict(zip(chain.BUDGET_COLUMNS, b))
    c.execute("UPDATE budgets SET row_hash = ? WHERE dataset = ?",
              (chain.budget_hash(lid, row), row["dataset"]))
"""


def test_edited_epsilon_and_budget_with_the_sha256_chain_recomputed(spent, capsys):
    _python(RECHAIN.format(path=str(spent / "ledger.sqlite")))
    text = _refused_and_unverified(spent, capsys)
    assert "signed" in text


@pytest.mark.filterwarnings("ignore:.*not signed:privmob.privacy.ledger.LedgerMigrated")
def test_nulled_hashes_and_deleted_meta_do_not_launder_the_ledger(spent, capsys):
    script = (
        "DROP TRIGGER releases_append_only_u;\nDROP TRIGGER budgets_fixed_u;\n"
        "UPDATE releases SET prev_hash = NULL, row_hash = NULL, epsilon = 0.001;\n"
        "UPDATE budgets SET row_hash = NULL;\nDROP TABLE ledger_meta;\n"
    )
    con = sqlite3.connect(spent / "ledger.sqlite")
    signed = "ledger_keys" in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()
    if signed:  # and every trace of the signatures
        script += "DROP TABLE ledger_keys;\nDROP TABLE checkpoints;\n"
    _sqlite(spent / "ledger.sqlite", script)
    text = _refused_and_unverified(spent, capsys)
    assert "not signed" in text


def test_a_truncated_file_is_ledger_damaged_not_an_internal_error(spent, capsys):
    ledger = spent / "ledger.sqlite"
    size = ledger.stat().st_size
    _python(f"import os\nos.truncate({str(ledger)!r}, {size // 2})")
    text = _refused_and_unverified(spent, capsys, "damaged")
    assert "ledger damaged" in text and "internal error" not in text


def test_verify_on_a_missing_path_is_an_error_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "ledger.sqlite"
    assert _run("ledger", "verify", "--ledger", str(missing)) == 2
    assert "no ledger at" in " ".join(capsys.readouterr().err.split())
    assert not missing.exists() and not missing.parent.exists()
    assert _run("ledger", "show", "--ledger", str(missing)) == 2
    assert not missing.exists()


def test_the_release_carries_the_ledger_head(spent):
    meta = json.loads((spent / "r3" / "metadata.json").read_text())
    head = meta["ledger"]["head"]
    assert head["count"] == 4 and len(head["hash"]) == 64 and len(head["root"]) == 32
    con = sqlite3.connect(spent / "ledger.sqlite")
    (row_hash,) = con.execute("SELECT row_hash FROM releases WHERE id = 4").fetchone()
    con.close()
    assert row_hash not in json.dumps(meta)  # a commitment, never the entry's own hash


def test_an_auditor_pins_the_custodian_key(spent, capsys, monkeypatch):
    """A ledger re-signed by someone else (here: a whole new ledger at the same path, which
    verifies on its own) fails against the custodian key the auditor holds."""
    from privmob.privacy.ledger.keys import default_key_path, generate, load_private, public_pem

    ledger = str(spent / "ledger.sqlite")
    pub = spent / "custodian.pub"
    pub.write_bytes(public_pem(load_private(default_key_path())))
    assert _run("ledger", "verify", "--ledger", ledger, "--custodian-key", str(pub)) == 0
    (spent / "ledger.sqlite").unlink()
    other = generate(spent / "mallory.pem")
    monkeypatch.setenv("PRIVMOB_KEY", str(other.path))
    assert (
        _run("ledger", "init", "trips", "--epsilon", "1000", "--make-key", "--ledger", ledger) == 0
    )
    capsys.readouterr()
    assert _run("ledger", "verify", "--ledger", ledger, "--custodian-key", str(pub)) == 3
    assert "root (custodian) key is not" in " ".join(capsys.readouterr().err.split())


# -- issue 39: an insider who holds only an analyst key and can write the file ---------------
FORGE_ENTRY = """
import secrets, sqlite3, sys
from privmob.privacy.ledger import chain as chain
from privmob.privacy.ledger.keys import load_private
from privmob.privacy.ledger.trust import entry_message
path, key, epsilon = sys.argv[1], sys.argv[2], float(sys.argv[3])
c = sqlite3.connect(path)
meta = dict(c.execute("SELECT key, value FROM ledger_meta").fetchall())
last = chain.entry_rows(c)[-1]
row = {k: last[k] for k in chain.ROW_COLUMNS}
row.update(id=last["id"] + 1, epsilon=epsilon, release_epsilon=epsilon,
           nonce=secrets.token_hex(16), prev_hash=meta["head_hash"])
own = chain.digest(row["prev_hash"], chain.hashed(row))
signer = load_private(key)
row.update(row_hash=own, signer=signer.key_id,
           signature=signer.sign("entry", entry_message(meta["ledger_id"], own)))
def literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, float) and abs(v) == float("inf"):
        return "9e999" if v > 0 else "-9e999"
    return repr(v) if isinstance(v, (int, float)) else "'" + str(v).replace("'", "''") + "'"
print("DROP TRIGGER IF EXISTS releases_valid_spend;")
print(f"INSERT INTO releases ({', '.join(row)}) VALUES ({', '.join(map(literal, row.values()))});")
print(f"UPDATE ledger_meta SET value = '{int(meta['head_count']) + 1}' WHERE key = 'head_count';")
print(f"UPDATE ledger_meta SET value = '{own}' WHERE key = 'head_hash';")
"""


def _analyst(tmp_path, name: str = "ana") -> str:
    """A registered analyst's private key file (made and granted through the CLI)."""
    key = tmp_path / f"{name}.pem"
    assert _run("ledger", "keygen", str(key)) == 0
    ledger = str(tmp_path / "ledger.sqlite")
    code = _run(
        "ledger", "grant", "analyst", name, "--public-key", f"{key}.pub", "--ledger", ledger
    )
    assert code == 0
    return str(key)


def _forge_entry(ledger, key: str, epsilon: float) -> None:
    """An entry chained at the head and signed with ``key``, written by the sqlite3 command."""
    script = subprocess.run(
        [sys.executable, "-c", FORGE_ENTRY, str(ledger), key, str(epsilon)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    _sqlite(ledger, script)


def test_a_negative_spend_signed_by_an_analyst_refills_nothing(spent, capsys, monkeypatch):
    """Issue 39: an entry of epsilon -100, chained and signed with the analyst's own key, made
    by a real sqlite3 edit. Before, the next release of 20 was charged ("80 left")."""
    key = _analyst(spent)
    _forge_entry(spent / "ledger.sqlite", key, -100.0)
    monkeypatch.setenv("PRIVMOB_KEY", key)  # the analyst releases next
    text = _refused_and_unverified(spent, capsys, epsilon="20")
    assert "entry 5: epsilon=-100.0 is not a valid spend" in text
    monkeypatch.delenv("PRIVMOB_KEY")
    monkeypatch.setenv("XDG_DATA_HOME", str(spent / "auditor"))  # no key: an auditor
    capsys.readouterr()
    assert _run("ledger", "verify", "--ledger", str(spent / "ledger.sqlite")) == 3
    assert "entry 5: epsilon=-100.0" in " ".join(capsys.readouterr().err.split())
    assert _run("ledger", "show", "--ledger", str(spent / "ledger.sqlite")) == 3
    assert "entry 5" in " ".join(capsys.readouterr().err.split())


def test_an_infinite_spend_is_reported_by_entry_not_as_an_internal_error(spent, capsys):
    key = _analyst(spent)
    _forge_entry(spent / "ledger.sqlite", key, float("inf"))
    text = _refused_and_unverified(spent, capsys, epsilon="0.5")
    assert "entry 5: epsilon=inf is not a valid spend" in text and "internal" not in text


def test_a_revoked_analyst_replaying_her_grant_gets_nothing(spent, capsys, monkeypatch):
    """Issue 39: her own grant row copied again after her revocation (a plain INSERT, no
    trigger dropped). Before, her release succeeded and ``ledger keys`` showed her active."""
    from privmob.privacy.ledger.keys import load_private

    key = _analyst(spent)
    kid = load_private(key).key_id
    ledger = str(spent / "ledger.sqlite")
    assert _run("ledger", "revoke", kid, "--ledger", ledger) == 0
    _sqlite(
        spent / "ledger.sqlite",
        "INSERT INTO ledger_keys (key_id, action, role, name, public_key, at_count, created_at, "
        "signer, signature) SELECT key_id, action, role, name, public_key, at_count, created_at, "
        "signer, signature FROM ledger_keys WHERE name = 'ana' AND action = 'grant';\n",
    )
    monkeypatch.setenv("PRIVMOB_KEY", key)
    text = _refused_and_unverified(spent, capsys, epsilon="0.5")
    # her row copied again is in no entry of the custodian's chain: it counts for nothing
    assert "(grant ana): in no entry of the custodian's governance chain" in text


def test_a_deleted_family_link_does_not_double_the_budget(spent, capsys):
    """Issue 39: 'trips-2' shares the budget of 'trips' (6, 5 spent); the link row deleted, it
    was charged against a budget of its own (spent 3 of 2 in the issue's case)."""
    from privmob.errors import BudgetError
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger

    ledger = spent / "ledger.sqlite"
    assert _run("ledger", "link", "trips", "trips-2", "--ledger", str(ledger)) == 0
    _sqlite(ledger, "DROP TRIGGER dataset_links_append_only_d;\nDELETE FROM dataset_links;\n")
    with pytest.raises(
        BudgetError, match=r"governance entry \d+ \(family link\): its record is gone"
    ):
        Ledger(ledger).charge("trips-2", Cost.pure(1.5), kind="od")
    assert _entries(ledger) == 4
    capsys.readouterr()
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "(family link): its record is gone" in err and "a family link" in err


def test_a_deleted_family_link_and_its_checkpoints_are_seen_by_a_witness(spent, capsys):
    """The link and every checkpoint signed since deleted, so that no checkpoint in the file
    vouches for it any more: the custodian, who verified the ledger after linking, witnessed
    the checkpoint that did."""
    from privmob.errors import BudgetError
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger

    ledger = spent / "ledger.sqlite"
    assert _run("ledger", "link", "trips", "trips-2", "--ledger", str(ledger)) == 0
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 0  # the custodian looks
    _sqlite(
        ledger,
        "DROP TRIGGER dataset_links_append_only_d;\nDELETE FROM dataset_links;\n"
        "DROP TRIGGER checkpoints_append_only_d;\nDELETE FROM checkpoints;\n",
    )
    with pytest.raises(BudgetError, match=r"\(family link\): its record is gone"):
        Ledger(ledger).charge("trips-2", Cost.pure(1.5), kind="od")
    assert _entries(ledger) == 4
    capsys.readouterr()
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 3
    assert "which you witnessed, is gone" in " ".join(capsys.readouterr().err.split())


# a Python script run as another process by the insider: deletes the rows named, and their
# entries of the custodian's governance chain too where the ledger has one (on the code before
# the chain, the table did not exist), then sets nothing else
DELETE_GOVERNED = """
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
doomed = json.loads(sys.argv[2])  # {table: SQL condition}
has_chain = c.execute("SELECT 1 FROM sqlite_master WHERE name = 'governance'").fetchone()
if has_chain:
    from privmob.privacy.ledger import governance as governance
for table, where in doomed.items():
    c.execute(f"DROP TRIGGER IF EXISTS {table}_append_only_d")
    c.execute(f"DROP TRIGGER IF EXISTS {table}_fixed_d")
    cur = c.execute(f"SELECT * FROM {table} WHERE {where}")
    names = [d[0] for d in cur.description]
    for r in cur.fetchall():
        if has_chain and table != "governance":
            digest = governance.record_digest(table, dict(zip(names, r)))
            c.execute("DROP TRIGGER IF EXISTS governance_append_only_d")
            c.execute("DELETE FROM governance WHERE kind = ? AND record = ?", (table, digest))
    c.execute(f"DELETE FROM {table} WHERE {where}")
"""


def _delete_governed(ledger, doomed: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", DELETE_GOVERNED, str(ledger), json.dumps(doomed)], check=True
    )


def _as_someone_else(monkeypatch, spent, who: str, key: str | None = None) -> None:
    """Another user: their own data directory (no witness of what the custodian saw)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(spent / who))
    if key is None:
        monkeypatch.delenv("PRIVMOB_KEY", raising=False)
    else:
        monkeypatch.setenv("PRIVMOB_KEY", key)


def test_a_revoked_analyst_deleting_her_revocation_gets_nothing(spent, capsys, monkeypatch):
    """Issue 39 item 2: her revocation row deleted (the trigger dropped first, by a real
    sqlite3 process). Before the governance chain her key was active again: her release of 0.5
    succeeded and ``verify`` (with no witness) exited 0. Now the chain's entry for the
    revocation has lost its record: every charge and ``verify`` refuse, naming the entry."""
    from privmob.privacy.ledger.keys import load_private

    key = _analyst(spent)
    ledger = spent / "ledger.sqlite"
    assert _run("ledger", "revoke", load_private(key).key_id, "--ledger", str(ledger)) == 0
    _sqlite(
        ledger,
        "DROP TRIGGER ledger_keys_append_only_d;\n"
        "DELETE FROM ledger_keys WHERE name = 'ana' AND action = 'revoke';\n",
    )
    _as_someone_else(monkeypatch, spent, "ana-home", key)
    from privmob.errors import BudgetError
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger

    with pytest.raises(BudgetError, match=r"\(key event\): its record is gone"):
        Ledger(ledger, key=key).charge("trips", Cost.pure(0.5), kind="od")
    text = _refused_and_unverified(spent, capsys, epsilon="0.5")
    assert "(key event): its record is gone" in text
    _as_someone_else(monkeypatch, spent, "auditor-home")  # a keyless auditor sees it too
    capsys.readouterr()
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 3
    assert "(key event): its record is gone" in capsys.readouterr().err


def test_a_family_link_deleted_with_its_chain_entries_and_checkpoints(spent, capsys, monkeypatch):
    """Issue 39 item 2: after 'trips-2' joined the family of 'trips' (budget 6, 5 spent), the
    insider deletes the link, every checkpoint, and (on a ledger that has them) their entries
    of the governance chain, then releases 1.5 of 'trips-2' with her own key and no witness.
    Before: charged against a budget of 6 of its own (the family's budget doubled) and a
    keyless ``verify`` exited 0. Now the member's budget entry no longer follows the chain."""
    key = _analyst(spent)
    ledger = spent / "ledger.sqlite"
    assert _run("ledger", "link", "trips", "trips-2", "--ledger", str(ledger)) == 0
    _delete_governed(ledger, {"dataset_links": "1", "checkpoints": "1"})
    _as_someone_else(monkeypatch, spent, "ana-home", key)
    from privmob.errors import BudgetError
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger

    with pytest.raises(BudgetError, match=r"governance entry \d+: the previous entry's hash"):
        Ledger(ledger).charge("trips-2", Cost.pure(1.5), kind="od")
    assert _entries(ledger) == 4
    _as_someone_else(monkeypatch, spent, "auditor-home")
    capsys.readouterr()
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 3
    assert "previous entry's hash does not match" in " ".join(capsys.readouterr().err.split())


def test_a_whole_family_link_cut_from_the_end_of_the_chain_doubles_nothing(spent, monkeypatch):
    """The link, the member's budget, the checkpoint and all their chain entries deleted (the
    chain cut consistently at its end): 'trips-2' then has no budget at all, so nothing is
    charged to it; what is left verifies (the cut is seen by witnesses of the later head)."""
    key = _analyst(spent)
    ledger = spent / "ledger.sqlite"
    assert _run("ledger", "link", "trips", "trips-2", "--ledger", str(ledger)) == 0
    _delete_governed(
        ledger,
        {"dataset_links": "1", "checkpoints": "1", "budgets": "dataset = 'trips-2'"},
    )
    _as_someone_else(monkeypatch, spent, "ana-home", key)
    from privmob.errors import BudgetError
    from privmob.privacy.costs import Cost
    from privmob.privacy.ledger import Ledger

    with pytest.raises(BudgetError, match="no privacy budget is set for dataset 'trips-2'"):
        Ledger(ledger).charge("trips-2", Cost.pure(1.5), kind="od")
    assert _entries(ledger) == 4


def test_a_people_sketch_replaced_by_another_well_formed_one(spent, capsys):
    """Issue 39: the sketch of 'trips' replaced (the sqlite3 command) by a well-formed sketch
    of other users, of the same size, switched the people check off and passed verify. Now
    the entries name the sketch they merged: the next release is refused (exit 3, one line
    naming the dataset, never the sketch or a hash) and verify exits 3."""
    import re

    from privmob.privacy.people import PeopleSketch

    ledger = spent / "ledger.sqlite"
    con = sqlite3.connect(ledger)
    try:
        (stored,) = con.execute(
            "SELECT sketch FROM dataset_people WHERE dataset = 'trips'"
        ).fetchone()
    finally:
        con.close()
    n = len(PeopleSketch.from_bytes(stored).hashes)
    forged = PeopleSketch.of(range(1, 2 * n + 1, 2)).to_bytes()
    assert len(forged) == len(stored) and forged != stored
    _sqlite(ledger, f"UPDATE dataset_people SET sketch = X'{forged.hex()}';\n")
    before = _entries(ledger)
    capsys.readouterr()
    assert _od(spent, "late", "0.5") == 3
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "the people sketch of dataset 'trips'" in lines[0], err
    assert not re.search(r"[0-9a-f]{64}", err)
    assert _entries(ledger) == before and not (spent / "late").exists()
    assert _run("ledger", "verify", "--ledger", str(ledger)) == 3
    assert "people sketch of dataset 'trips'" in capsys.readouterr().err
