"""Issue 39: every head is witnessed. An insider who holds an analyst key and can write the
SQLite file rolls it back (an older copy put back with ``cp``), deletes its last entries and
sets the head by hand (``sqlite3``), forks it, or replaces its root (a re-created file, a ledger
emptied of its keys and adopted with the analyst's key). Each user (a data directory of their
own: their key and their witness store) who verified or charged the ledger before refuses it
afterwards: ``ledger verify`` and ``ledger checkpoint`` and every release exit 3. On the code
before witness stores each of these passed ``verify`` and ``checkpoint`` (only the releaser's
own position cache, kept per key and only by charges, saw some of them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import box_grid, random_trips

from privmob.cli import main
from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger

SQLITE3 = shutil.which("sqlite3")


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0)


class Users:
    """Users of one ledger, each with a home of their own (their key, their witness store)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.ledger = root / "ledger.sqlite"
        self.mp = monkeypatch

    def be(self, name: str) -> Path:
        """Act as ``name`` from now on (their data directory and key, if they have one);
        returns their key file."""
        home = self.root / f"home-{name}"
        self.mp.setenv("XDG_DATA_HOME", str(home))
        key = home / "privmob" / "keys" / "key.pem"
        if name != "custodian" and key.exists():
            self.mp.setenv("PRIVMOB_KEY", str(key))
        else:
            self.mp.delenv("PRIVMOB_KEY", raising=False)
        return key

    def charge(self, name: str, epsilon: float) -> None:
        self.be(name)
        Ledger(self.ledger).charge("trips", Cost.pure(epsilon), kind="od")

    def cli(self, name: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
        self.be(name)
        capsys.readouterr()
        code = _run(*args)
        captured = capsys.readouterr()
        return code, " ".join((captured.out + captured.err).split())

    def verify(self, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        return self.cli(name, capsys, "ledger", "verify", "--ledger", str(self.ledger))

    def checkpoint(self, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        return self.cli(name, capsys, "ledger", "checkpoint", "--ledger", str(self.ledger))

    def release(self, name: str, capsys: pytest.CaptureFixture[str], out: str) -> tuple[int, str]:
        return self.cli(
            name,
            capsys,
            "od",
            str(self.root / "trips.parquet"),
            "-t",
            str(self.root / "grid.geojson"),
            "-e",
            "0.5",
            "-T",
            "2",
            "--ledger",
            str(self.ledger),
            "-o",
            str(self.root / out),
            "--quiet",
        )


@pytest.fixture
def users(tmp_path, monkeypatch, capsys):
    """Budget 6 for 'trips' (the custodian's), analysts ana and bob (keys of their own, granted
    by the custodian), an auditor olga (no key); ana has spent 2.5 in two charges, a copy of the
    ledger was taken then (``ledger.old``), and she spent 2.5 more; bob and the custodian
    verified the ledger at its head (4 entries), olga never looked."""
    random_trips(20, 9, seed=3).to_parquet(tmp_path / "trips.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    u = Users(tmp_path, monkeypatch)
    monkeypatch.setenv("PRIVMOB_PEOPLE_KEY", "ab" * 32)  # the custodian gave it to the analysts
    u.be("custodian")
    assert (
        _run("ledger", "init", "trips", "--epsilon", "6", "--make-key", "--ledger", str(u.ledger))
        == 0
    )
    for name in ("ana", "bob"):
        key = u.be(name)
        assert _run("ledger", "keygen", str(key)) == 0
        u.be("custodian")
        assert (
            _run(
                "ledger",
                "grant",
                "analyst",
                name,
                "--public-key",
                f"{key}.pub",
                "--ledger",
                str(u.ledger),
            )
            == 0
        )
    u.charge("ana", 1.25)
    u.charge("ana", 1.25)
    subprocess.run(["cp", str(u.ledger), str(tmp_path / "ledger.old")], check=True)
    u.charge("ana", 1.25)
    u.charge("ana", 1.25)
    for name in ("bob", "custodian"):
        assert u.verify(name, capsys)[0] == 0
    return u


def _sqlite(path: Path, script: str) -> None:
    """Edit the ledger with the sqlite3 command (another process, as an insider would)."""
    if SQLITE3 is None:
        code = f"import sqlite3\nc = sqlite3.connect({str(path)!r})\nc.executescript({script!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
        return
    subprocess.run([SQLITE3, str(path)], input=script, text=True, check=True)


def _entries(path: Path) -> int:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sqlite3; print(sqlite3.connect({str(path)!r})"
            ".execute('SELECT count(*) FROM releases').fetchone()[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def _refused_by_witnesses(u: Users, capsys, why: str) -> None:
    """bob's next release, the custodian's verify and checkpoint: exit 3 naming ``why``."""
    before = _entries(u.ledger)
    code, text = u.release("bob", capsys, "late")
    assert code == 3 and why in text, text
    assert not (u.root / "late").exists() and _entries(u.ledger) == before  # nothing charged
    code, text = u.verify("custodian", capsys)
    assert code == 3 and why in text, text
    code, text = u.checkpoint("custodian", capsys)
    assert code == 3 and why in text and "no checkpoint was signed" in text, text


def test_a_copy_put_back_is_behind_every_witness(users, capsys):
    subprocess.run(["cp", str(users.root / "ledger.old"), str(users.ledger)], check=True)
    _refused_by_witnesses(users, capsys, "behind the head you witnessed (4 entries")
    # what no witness saw is not detected: an auditor who never looked verifies the copy
    code, text = users.verify("olga", capsys)
    assert code == 0, text


def test_last_entries_deleted_with_the_head_set_by_hand(users, capsys):
    _sqlite(
        users.ledger,
        "DROP TRIGGER releases_append_only_d;\n"
        "DELETE FROM releases WHERE id > 2;\n"
        "UPDATE ledger_meta SET value = '2' WHERE key = 'head_count';\n"
        "UPDATE ledger_meta SET value = (SELECT row_hash FROM releases WHERE id = 2) "
        "WHERE key = 'head_hash';\n",
    )
    _refused_by_witnesses(users, capsys, "behind the head you witnessed (4 entries")


def test_a_rolled_back_ledger_charged_again_is_forked(users, capsys):
    """ana puts the old copy back, forgets her own witness and charges twice more: the ledger
    holds 4 entries again, but not the 4 bob and the custodian saw."""
    subprocess.run(["cp", str(users.root / "ledger.old"), str(users.ledger)], check=True)
    for own in ("witness", "keys/verified"):  # her own witness and position cache
        shutil.rmtree(users.root / "home-ana" / "privmob" / own)
    users.charge("ana", 0.5)
    users.charge("ana", 0.5)
    _refused_by_witnesses(users, capsys, "its entry 4 is not the one you witnessed")


def test_a_re_created_file_for_a_known_location_is_refused(users, capsys):
    """ana deletes the ledger and creates a new one there with her own key as custodian and a
    budget of 1000 (in a data directory without her witness)."""
    users.ledger.unlink()
    users.be("ana")
    users.mp.setenv("XDG_DATA_HOME", str(users.root / "home-ana-fresh"))
    assert (
        _run(
            "ledger",
            "init",
            "trips",
            "--epsilon",
            "1000",
            "--make-key",
            "--ledger",
            str(users.ledger),
        )
        == 0
    )
    for name in ("bob", "custodian"):
        code, text = users.verify(name, capsys)
        assert code == 3 and "deleted and re-created, or replaced" in text, text


ADOPT_AS_ANALYST = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
for t in ("ledger_keys", "checkpoints", "governance"):  # the custodian's chain too
    c.execute(f"DROP TRIGGER IF EXISTS {t}_append_only_d")
    c.execute(f"DELETE FROM {t}")
c.execute("DROP TRIGGER budgets_fixed_u")
c.execute("UPDATE budgets SET signer = NULL, signature = NULL")
"""


def test_a_ledger_adopted_by_an_analyst_key_is_refused(users, capsys):
    """ana removes every key and signature of the custodian and adopts the ledger with her own
    key: on its own it verifies, rooted at her key."""
    subprocess.run([sys.executable, "-c", ADOPT_AS_ANALYST, str(users.ledger)], check=True)
    code, text = users.cli("ana", capsys, "ledger", "adopt", "--ledger", str(users.ledger))
    assert code == 0, text
    code, text = users.verify("olga", capsys)  # no witness: only a pinned key tells
    assert code == 0, text
    for name in ("bob", "custodian"):
        code, text = users.verify(name, capsys)
        assert code == 3 and "adopted by another key" in text, text
    code, text = users.release("bob", capsys, "late")  # (bob's key is not in her ledger)
    assert code == 3 and not (users.root / "late").exists(), text


def test_a_charge_returns_a_signed_head(users):
    """The head a charge returns is signed by the charging key: whoever keeps it (with the
    release) can show the ledger behind or forked from it; a forged one does not verify."""
    users.be("bob")
    led = Ledger(users.ledger)
    entry = led.charge("trips", Cost.pure(0.25), kind="od")
    assert entry.head["count"] == 5 and len(entry.head_signature["signature"]) == 128
    block = {
        "id": led.ledger_id,
        "entry_ids": [entry.id],
        "head": entry.head,
        "head_signature": entry.head_signature,
    }
    assert led.verify_release({"ledger": block}) == []
    forged = {**block, "head_signature": {**entry.head_signature, "signer": "0" * 32}}
    assert "not signed by a key of this ledger" in led.verify_release({"ledger": forged})[0]
    subprocess.run(["cp", str(users.root / "ledger.old"), str(users.ledger)], check=True)
    users.be("olga")  # an auditor without a witness, holding the release's signed head
    assert "entries [5] are missing" in Ledger(users.ledger).verify_release({"ledger": block})[0]


def test_an_honest_ledger_passes_every_witness(users, capsys):
    """No false alarm: charges by several users, verify, checkpoint, verify again."""
    users.charge("bob", 0.25)
    users.charge("ana", 0.25)
    for name in ("bob", "custodian", "olga", "ana"):
        code, text = users.verify(name, capsys)
        assert code == 0, text
    code, text = users.checkpoint("custodian", capsys)
    assert code == 0, text
    code, text = users.release("bob", capsys, "r")
    assert code == 0, text
    with pytest.raises(BudgetError, match="cannot pay"):
        users.charge("ana", 2.0)
