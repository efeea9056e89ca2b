"""The team ledger on a real PostgreSQL server (the session's private cluster): roles enforced by
the server, append-only for everyone, export/import with SQLite, the CLI, PRIVMOB_LEDGER and
pm.Session with a URL. (The shared semantics run in both stores in test_ledger.py,
test_zcdp_accounting.py and test_programme_ledger.py.)"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.helpers import privmob_process

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
FP = "f" * 64


def _privmob(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return privmob_process(*args, cwd=ROOT, env=env)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``privmob ARGS`` in this process (fast; the exit code and both streams as a real run
    gives them). Real processes (:func:`_privmob`) where the process itself matters."""
    import contextlib
    import io

    from privmob.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def _login(pg_cluster, name: str) -> None:
    pg_cluster.sql(f'CREATE ROLE "{name}" LOGIN')


def _as(url: str, user: str) -> str:
    return url.replace("custodian@", f"{user}@", 1)


@pytest.fixture
def team(pg_cluster, pg_url, tmp_path):
    """A ledger created by the custodian (CLI, with the test's own key), with budget 'd', an
    analyst (alice: her key and database role) and an auditor (olga)."""
    r = _cli("ledger", "init", "--make-key", "--ledger", pg_url)
    assert r.returncode == 0, r.stderr
    r = _cli("ledger", "init", "d", "--epsilon", "1", "--ledger", pg_url)
    assert r.returncode == 0, r.stderr
    for user, role in (("alice", "analyst"), ("olga", "auditor")):
        if not _role_exists(pg_cluster, user):
            _login(pg_cluster, user)
        key = tmp_path / f"{user}.pem"
        assert _cli("ledger", "keygen", str(key)).returncode == 0
        r = _cli(
            "ledger",
            "grant",
            role,
            user,
            "--public-key",
            f"{key}.pub",
            "--db-role",
            user,
            "--ledger",
            pg_url,
        )
        assert r.returncode == 0, r.stderr
    return Team(pg_url, {u: tmp_path / f"{u}.pem" for u in ("alice", "olga")})


@dataclass
class Team:
    url: str  # as the custodian
    keys: dict[str, Path]

    def opened_as(self, user: str) -> Ledger:
        """The ledger as ``user``: their database role and their key."""
        return Ledger(_as(self.url, user), key=self.keys[user])


def _role_exists(pg_cluster, name: str) -> bool:
    import psycopg

    with psycopg.connect(pg_cluster.url("pgsuper", "postgres")) as con:
        return (
            con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is not None
        )


DIRECT_WRITES = [
    "UPDATE releases SET epsilon = 0",
    "DELETE FROM releases",
    "INSERT INTO releases (id, dataset, created_at, kind, epsilon, delta, unit, release_epsilon,"
    " release_delta, release_unit, for_publication) VALUES (99, 'd', 'x', 'od', 0, 0, 'user',"
    " 0, 0, 'user', 1)",
    "INSERT INTO budgets (dataset, epsilon, delta, unit, created_at) "
    "VALUES ('e', 9, 0, 'user', 'x')",
    "UPDATE budgets SET epsilon = 1000",
    "DELETE FROM budgets",
    "UPDATE ledger_meta SET value = '0' WHERE key = 'head_count'",
    "DELETE FROM staged_releases",
    "INSERT INTO programme_allowances (dataset, kind, reason) VALUES ('d', 'od', 'x')",
    "TRUNCATE releases",
]


@pytest.mark.parametrize("user", ["alice", "olga"])
def test_analyst_and_auditor_cannot_write_any_table(team, user):
    """The server refuses every direct write of an analyst's or auditor's role; the analyst
    charges through privmob (the SECURITY DEFINER functions), the auditor cannot."""
    import psycopg

    team.opened_as("alice").charge("d", Cost.pure(0.25), kind="od", input_fingerprint=FP)
    for statement in DIRECT_WRITES:
        with (
            psycopg.connect(_as(team.url, user), options="-c search_path=privmob") as con,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            con.execute(statement)  # type: ignore[arg-type]
    led = Ledger(team.url)
    assert len(led.entries("d")) == 1 and led.verify() == []
    assert led.spent("d").epsilon == pytest.approx(0.25)


def test_roles_through_privmob(team):
    """Both layers refuse: the key's role (signed in the ledger) and the database role (the
    server), each on its own: an analyst holding the custodian's key still cannot set a
    budget, since her database role cannot write the table."""
    analyst, auditor = team.opened_as("alice"), team.opened_as("olga")
    analyst.charge("d", Cost.pure(0.5), kind="od")
    with pytest.raises(BudgetError):
        analyst.set_budget("new", 5.0)  # by her key
    with pytest.raises(BudgetError):
        auditor.charge("d", Cost.pure(0.1), kind="od")  # an auditor only reads
    custodian_key_as_alice = Ledger(_as(team.url, "alice"))  # the test's own key: custodian's
    with pytest.raises(BudgetError, match="may not"):
        custodian_key_as_alice.set_budget("new", 5.0)  # by the server
    with pytest.raises(BudgetError, match="may not"):
        Ledger(_as(team.url, "olga")).charge("d", Cost.pure(0.1), kind="od")
    assert auditor.verify() == [] and auditor.spent("d").epsilon == pytest.approx(0.5)
    # on the command line: a refusal is exit 3, one line, no traceback
    r = _privmob("ledger", "init", "new", "--epsilon", "5", "--ledger", _as(team.url, "alice"))
    assert r.returncode == 3 and "Traceback" not in r.stderr and "may not" in r.stderr, r.stderr
    r = _cli("ledger", "verify", "--ledger", _as(team.url, "olga"))
    assert r.returncode == 0 and "verifies" in r.stdout, r.stdout + r.stderr
    assert len(Ledger(team.url).entries()) == 1 and not Ledger(team.url).has_budget("new")


def test_the_owner_cannot_edit_history_either(team):
    """Append-only triggers hold for the custodian (the schema's owner) too."""
    import psycopg

    Ledger(team.url).charge("d", Cost.pure(0.5), kind="od")
    for statement in (
        "UPDATE releases SET epsilon = 0",
        "DELETE FROM releases",
        "UPDATE budgets SET epsilon = 100",
        "TRUNCATE releases",
    ):
        with (
            psycopg.connect(team.url, options="-c search_path=privmob") as con,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"),
        ):
            con.execute(statement)  # type: ignore[arg-type]


def test_an_entry_off_the_chain_head_is_refused_by_the_server(team):
    """``charge`` refuses an entry that does not continue the chain (the analyst's only write
    of entries cannot splice history)."""
    import psycopg

    Ledger(team.url).charge("d", Cost.pure(0.1), kind="od")
    row = {
        "id": 50,
        "dataset": "d",
        "created_at": "x",
        "kind": "od",
        "epsilon": 0.0,
        "delta": 0.0,
        "unit": "user",
        "release_epsilon": 0.0,
        "release_delta": 0.0,
        "release_unit": "user",
        "for_publication": 1,
        "prev_hash": "0" * 64,
        "row_hash": "1" * 64,
    }
    with (
        psycopg.connect(_as(team.url, "alice"), options="-c search_path=privmob") as con,
        pytest.raises(psycopg.errors.SerializationFailure),
    ):
        con.execute("SELECT charge('d', %s::jsonb)", (json.dumps([row]),))
    assert Ledger(team.url).verify() == []


def test_analyst_cannot_create_the_ledger(pg_cluster, pg_url):
    if not _role_exists(pg_cluster, "bob"):
        _login(pg_cluster, "bob")
    with pytest.raises(ConfigError, match="no privmob ledger"):
        Ledger(_as(pg_url, "bob"), create=False)
    r = _cli("ledger", "show", "--ledger", _as(pg_url, "bob"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "no privmob ledger" in r.stderr


def test_export_import_sqlite_to_postgresql_and_back(tmp_path, pg_url, pg_cluster):
    src = Ledger(tmp_path / "a.sqlite")
    src.set_budget("d", 3.0, 1e-6)
    src.charge("d", Cost.pure(0.5), kind="od", input_fingerprint=FP, input_rows=10)
    src.charge_parts("d", [("p1", Cost(0.2, 1e-7, rho=0.01)), ("p2", Cost.pure(0.3))], kind="x")
    exported = tmp_path / "ledger.json"
    r = _privmob("ledger", "export", str(exported), "--ledger", str(tmp_path / "a.sqlite"))
    assert r.returncode == 0, r.stderr
    assert exported.stat().st_mode & 0o777 == 0o600
    r = _cli("ledger", "import", str(exported), "--ledger", pg_url)  # creates the ledger
    assert r.returncode == 0, r.stderr
    pg = Ledger(pg_url)
    assert pg.ledger_id == src.ledger_id and pg.verify() == []
    assert [e.row_hash for e in pg.entries()] == [e.row_hash for e in src.entries()]
    assert pg.spent("d") == src.spent("d")
    # a release paid from the file verifies against the database it moved to
    meta = {"ledger": {"id": src.ledger_id, "entry_ids": [e.id for e in src.entries()]}}
    assert pg.verify_release(meta) == []
    pg.charge("d", Cost.pure(0.1), kind="od")  # the chain goes on in the database
    back = tmp_path / "back.json"
    assert _cli("ledger", "export", str(back), "--ledger", pg_url).returncode == 0
    r = _cli("ledger", "import", str(back), "--ledger", str(tmp_path / "b.sqlite"))
    assert r.returncode == 0, r.stderr
    b = Ledger(tmp_path / "b.sqlite")
    assert b.verify() == [] and len(b.entries()) == 4 and b.ledger_id == src.ledger_id
    # importing twice, or into a ledger that holds entries: refused
    r = _cli("ledger", "import", str(back), "--ledger", str(tmp_path / "b.sqlite"))
    assert r.returncode == 2 and "creates a new one" in r.stderr
    r = _cli("ledger", "import", str(back), "--ledger", pg_url)
    assert r.returncode == 2 and "creates a new one" in r.stderr


def test_an_edited_export_is_not_imported(tmp_path, pg_url):
    src = Ledger(tmp_path / "a.sqlite")
    src.set_budget("d", 3.0)
    src.charge("d", Cost.pure(2.5), kind="od")
    exported = tmp_path / "ledger.json"
    assert _cli("ledger", "export", str(exported), "--ledger", str(src.path)).returncode == 0
    doc = json.loads(exported.read_text())
    doc["tables"]["releases"][0]["epsilon"] = 0.001  # spend forged down
    exported.write_text(json.dumps(doc))
    r = _privmob("ledger", "import", str(exported), "--ledger", pg_url)
    assert r.returncode == 3 and "does not verify" in r.stderr
    with pytest.raises(ConfigError, match="no privmob ledger"):  # nothing, not an empty schema
        Ledger(pg_url, create=False)
    assert _schema_exists(pg_url) is False
    r = _cli("ledger", "import", str(tmp_path / "ledger.json"), "--ledger", str(tmp_path / "n.db"))
    assert r.returncode == 3 and not (tmp_path / "n.db").exists()


def test_env_and_session_take_a_url(pg_url, tmp_path, monkeypatch):
    """PRIVMOB_LEDGER=postgresql://... for the CLI, pm.Session(ledger=url) for Python: a real
    release charged to the server, published, verified."""
    from tests.helpers import box_grid, random_trips

    import privmob as pm

    monkeypatch.setenv("PRIVMOB_LEDGER", pg_url)
    assert Ledger().path == pg_url
    r = _cli("ledger", "init", "trips", "--epsilon", "10", "--make-key")  # from PRIVMOB_LEDGER
    assert r.returncode == 0, r.stderr
    with pm.Session(
        random_trips(300, 9, seed=3), tessellation=box_grid(3).gdf, ledger=pg_url, dataset="trips"
    ) as s:
        od = s.od(epsilon=1, max_trips=4, output=str(tmp_path / "od"))
        assert s.ledger.path == pg_url and s.ledger.spent() == pytest.approx(1.0)
    meta = json.loads((tmp_path / "od" / "metadata.json").read_text())
    led = Ledger(pg_url)
    assert led.verify() == [] and led.verify_release(meta) == []
    assert od.written and [e.kind for e in led.entries("trips")] == ["od"]
    r = _privmob("ledger", "show", "trips", env={"PRIVMOB_LEDGER": pg_url})
    assert r.returncode == 0 and " od " in r.stdout


def _schema_exists(url: str) -> bool:
    import psycopg

    with psycopg.connect(url) as con:
        row = con.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'privmob'").fetchone()
    return row is not None


def test_a_negative_spend_is_refused_by_the_server(team, pg_cluster):
    """Issue 39: an entry of epsilon -100, chained at the head and signed with the analyst's own
    key, sent by the analyst's role with psql (``SELECT privmob.charge(...)``). Before,
    the server stored it and the next release was charged against a refilled budget."""
    import secrets

    from privmob.privacy.ledger import chain as chain
    from privmob.privacy.ledger.keys import load_private
    from privmob.privacy.ledger.trust import entry_message

    alice = team.opened_as("alice")
    alice.charge("d", Cost.pure(0.75), kind="od", input_fingerprint=FP)
    with alice.store.connect() as con:
        last = chain.entry_rows(con)[-1]
        meta = alice.store.read_meta(con)
    row = {k: last[k] for k in chain.ROW_COLUMNS}
    row.update(
        id=last["id"] + 1, epsilon=-100.0, release_epsilon=-100.0, nonce=secrets.token_hex(16)
    )
    row["prev_hash"] = meta["head_hash"]
    row["row_hash"] = chain.digest(row["prev_hash"], chain.hashed(row))
    signer = load_private(team.keys["alice"])
    row["signer"] = signer.key_id
    row["signature"] = signer.sign("entry", entry_message(alice.ledger_id, row["row_hash"]))
    literal = json.dumps(row).replace("'", "''")
    r = subprocess.run(
        [
            str(pg_cluster.bindir / "psql"),
            _as(team.url, "alice"),
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            f"SELECT privmob.charge('d', '[{literal}]'::jsonb)",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0 and "entry 2: its cost is not a valid spend" in r.stderr, r.stderr
    with pytest.raises(BudgetError, match="cannot pay"):  # 0.75 spent of 1: 0.5 does not fit
        alice.charge("d", Cost.pure(0.5), kind="od", input_fingerprint=FP)
    assert len(alice.entries()) == 1 and Ledger(team.url).verify() == []


def test_the_analyst_role_stores_a_people_sketch_only_with_a_charge(team, pg_cluster):
    """Issue 39: ``store_people`` called by the analyst's role on its own switched the people
    check off (an empty sketch) or broke every release (a 1-byte one)."""
    for sketch in ("\\x00", "\\x"):
        r = subprocess.run(
            [
                str(pg_cluster.bindir / "psql"),
                _as(team.url, "alice"),
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                f"SELECT privmob.store_people('d', '{sketch}'::bytea, 'now')",
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode != 0 and "with a charge of its dataset only" in r.stderr, r.stderr
    team.opened_as("alice").charge("d", Cost.pure(0.25), kind="od", input_fingerprint=FP)
    assert Ledger(team.url).verify() == []
