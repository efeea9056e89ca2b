"""Issue 39: a dataset's people sketch is bound to the signed, hash-chained entries. The charge
that merges a sketch names the merged sketch's SHA-256 in its entries (``params``, under the
reserved key ``people_sketch``); every charge that reads sketches, and ``ledger verify``, refuse
a stored sketch whose digest is not the one the latest entry of its dataset names. Before, a
sketch replaced by another well-formed one (a real ``sqlite3`` process) switched the people
check off: the same people were charged again under another dataset's budget, and verify
passed. Messages name the dataset, never the sketch, a hash or a user."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from tests.privacy.test_ledger_roles import team  # noqa: F401
from tests.privacy.test_people import _sketch, _users

from privmob.errors import BudgetError, ConfigError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger

SQLITE3 = shutil.which("sqlite3")
HEX64 = re.compile(r"[0-9a-f]{64}")


def _sqlite(path, script: str) -> None:
    """Edit the ledger with the sqlite3 command (another process, as an insider would)."""
    if SQLITE3 is None:  # the same statements through Python's sqlite3, in a subprocess
        code = f"import sqlite3\nsqlite3.connect({str(path)!r}).executescript({script!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
        return
    subprocess.run([SQLITE3, str(path)], input=script, text=True, check=True)


def _stored(path, dataset: str) -> bytes:
    con = sqlite3.connect(path)
    try:
        row = con.execute("SELECT sketch FROM dataset_people WHERE dataset = ?", (dataset,))
        return bytes(row.fetchone()[0])
    finally:
        con.close()


def _charge(led: Ledger, dataset: str, people, fingerprint: str) -> None:
    led.charge_parts(
        dataset, [("", Cost(0.25))], kind="t", input_fingerprint=fingerprint, people=people
    )


def test_each_charge_names_the_sketch_it_merged(team):  # noqa: F811
    """The entries of a charge with people name the SHA-256 of the merged sketch (each merge
    its own); the ledger verifies; a caller may not set the reserved key."""
    path, keys = team
    ana = Ledger(path, key=keys["analyst"])
    rng = np.random.default_rng(4)
    first, second = _sketch(_users(rng, 3_000)), _sketch(_users(rng, 3_000))
    _charge(ana, "cdr-2026-01", first, "f1")
    named_first = ana.entries("cdr-2026-01")[-1].provenance["people_sketch"]
    assert named_first == hashlib.sha256(first.to_bytes()).hexdigest()
    _charge(ana, "cdr-2026-01", second, "f1")
    named = ana.entries("cdr-2026-01")[-1].provenance["people_sketch"]
    assert named == hashlib.sha256(_stored(path, "cdr-2026-01")).hexdigest() != named_first
    ana.charge("cdr-2026-01", Cost(0.25), kind="t")  # no people: the sketch stays as named
    assert ana.verify() == []
    with pytest.raises(ConfigError, match="people_sketch"):
        ana.charge("cdr-2026-01", Cost(0.25), kind="t", params={"people_sketch": "0" * 64})


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_sketch_replaced_by_another_well_formed_one_is_refused(team, checkpointed):  # noqa: F811
    """The sketch of 'cdr-2026-01' replaced (a real sqlite3 process) by the sketch of other
    users, of the same size: a release of the same people under dataset 'other' is refused
    (it was charged before), as is any charge that reads the sketches; verify reports it,
    naming the dataset only."""
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.set_budget("other", 10.0)
    people = _sketch(_users(np.random.default_rng(4), 5_000))
    ana = Ledger(path, key=keys["analyst"])
    _charge(ana, "cdr-2026-01", people, "f1")
    if checkpointed:
        cus.checkpoint()
    with pytest.raises(BudgetError, match="are users of dataset 'cdr-2026-01'"):
        _charge(ana, "other", people, "f2")
    forged = _sketch(_users(np.random.default_rng(5), 5_000)).to_bytes()
    assert len(forged) == len(_stored(path, "cdr-2026-01"))
    _sqlite(
        path,
        f"UPDATE dataset_people SET sketch = X'{forged.hex()}' WHERE dataset = 'cdr-2026-01';",
    )
    for dataset in ("other", "cdr-2026-01"):
        with pytest.raises(BudgetError) as refused:
            _charge(ana, dataset, people, "f2")
        said = str(refused.value)
        assert "the people sketch of dataset 'cdr-2026-01'" in said, said
        assert "\n" not in said and not HEX64.search(said)
    assert ana.entries("other") == [] and len(ana.entries("cdr-2026-01")) == 1
    problems = Ledger(path, key=keys["auditor"]).verify()
    found = [p for p in problems if "people sketch of dataset 'cdr-2026-01'" in p]
    assert found and not any(HEX64.search(p) for p in problems), problems


def test_a_sketch_no_entry_names_is_read_as_before(team):  # noqa: F811
    """A ledger made before entries named their sketch (a row written directly, as an earlier
    privmob's charge did): read and merged as then, and the merge is named from then on."""
    path, keys = team
    people = _sketch(_users(np.random.default_rng(4), 2_000))
    _sqlite(
        path,
        "INSERT INTO dataset_people (dataset, sketch, updated) VALUES "
        f"('cdr-2026-01', X'{people.to_bytes().hex()}', 'then');",
    )
    ana = Ledger(path, key=keys["analyst"])
    ana.check_input("cdr-2026-01", None, people=people)
    _charge(ana, "cdr-2026-01", people, "f1")
    entry = ana.entries("cdr-2026-01")[-1]
    named = entry.provenance["people_sketch"]
    assert named == hashlib.sha256(_stored(path, "cdr-2026-01")).hexdigest()
    assert "people_sketch" not in entry.params  # the ledger's binding, not a release parameter
    assert ana.verify() == []
    assert json.loads(json.dumps(entry.params)) == entry.params


def test_a_deleted_sketch_its_entries_name_is_refused_without_a_checkpoint(team):  # noqa: F811
    """Before: a sketch made since the latest checkpoint (none here) could be deleted (a real
    sqlite3 process) unseen, and the same people were charged again under another name. Its
    entries name it: every charge that reads the sketches and verify refuse its absence."""
    path, keys = team
    Ledger(path, key=keys["custodian"]).set_budget("other", 10.0)
    people = _sketch(_users(np.random.default_rng(4), 5_000))
    ana = Ledger(path, key=keys["analyst"])
    _charge(ana, "cdr-2026-01", people, "f1")
    _sqlite(path, "DELETE FROM dataset_people;")
    with pytest.raises(BudgetError) as refused:
        _charge(ana, "other", people, "f2")
    said = str(refused.value)
    assert "the people sketch of dataset 'cdr-2026-01'" in said and "gone" in said, said
    assert ana.entries("other") == []
    # nor is a new sketch stored in its place (a release stated as a new dataset for the same
    # data reads no other sketch, but merges into its own)
    with pytest.raises(BudgetError, match=r"people sketch of dataset 'cdr-2026-01'.*is gone"):
        Ledger(path, key=keys["custodian"]).charge_parts(
            "cdr-2026-01",
            [("", Cost(0.25))],
            kind="t",
            people=people,
            new_dataset_for_same_data=True,
        )
    problems = Ledger(path, key=keys["auditor"]).verify()
    assert any("people sketch of dataset 'cdr-2026-01'" in p for p in problems), problems


def test_export_and_import_carry_the_people_sketches(team, tmp_path):  # noqa: F811
    """Before: an export left the sketches out, so a ledger whose checkpoint named one could
    not be imported ("is gone"), and one without a checkpoint lost its people check. Now they
    move with it (hex in the export): the import verifies, still refuses the same people under
    another name, and exports byte-identically."""
    from privmob.privacy.ledger.transfer import export_ledger, import_ledger

    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.set_budget("other", 10.0)
    people = _sketch(_users(np.random.default_rng(4), 5_000))
    _charge(Ledger(path, key=keys["analyst"]), "cdr-2026-01", people, "f1")
    cus.checkpoint()
    first = tmp_path / "first.json"
    export_ledger(cus, first)
    moved = import_ledger(tmp_path / "moved.sqlite", first)
    assert moved.verify() == []
    again = tmp_path / "again.json"
    export_ledger(moved, again)
    assert again.read_bytes() == first.read_bytes()
    with pytest.raises(BudgetError, match="are users of dataset 'cdr-2026-01'"):
        _charge(Ledger(tmp_path / "moved.sqlite", key=keys["analyst"]), "other", people, "f2")
