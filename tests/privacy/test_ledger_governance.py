"""Issue 39 item 2: governance is one chain signed by the custodian (privacy/ledger/governance.py).
Edits are made by a real process (Python's sqlite3 in a subprocess), keys are real key files."""

import sqlite3
import subprocess
import sys
import textwrap

import pytest
from tests.privacy.test_ledger_roles import team  # noqa: F401

from privmob.errors import BudgetError
from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger
from privmob.privacy.ledger import governance as governance


def _edit(path, script: str) -> None:
    code = f"import sqlite3\nc = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
    subprocess.run([sys.executable, "-c", code + textwrap.dedent(script)], check=True)


def _chain(path) -> list[tuple[str, str]]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT kind, record FROM governance ORDER BY seq").fetchall()
    finally:
        con.close()


def test_every_custodian_act_is_an_entry_of_the_chain_in_order(team):  # noqa: F811
    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.link("cdr-2026-01", "cdr-2026-02")
    cus.approve_same_data("other")
    kinds = [k for k, _ in _chain(path)]
    assert kinds == [
        "ledger_keys",  # the custodian's own key
        "ledger_keys",  # ana
        "ledger_keys",  # aud
        "budgets",
        "dataset_links",
        "budgets",  # the member's row
        "checkpoints",  # signed with the link
        "same_data_approvals",
        "checkpoints",
    ]
    assert cus.verify() == []


def test_reordered_chain_entries_are_detected(team):  # noqa: F811
    """Two entries of the chain swapped (their row numbers exchanged): every charge refuses."""
    path, keys = team
    _edit(
        path,
        """
        c.execute("DROP TRIGGER governance_append_only_u")
        c.execute("UPDATE governance SET seq = -2 WHERE seq = 2")
        c.execute("UPDATE governance SET seq = 2 WHERE seq = 3")
        c.execute("UPDATE governance SET seq = 3 WHERE seq = -2")
        """,
    )
    with pytest.raises(BudgetError, match=r"governance entry 2: the previous entry's hash"):
        Ledger(path, key=keys["analyst"]).charge("cdr-2026-01", Cost.pure(0.5), kind="od")
    assert any("previous entry's hash" in p for p in Ledger(path, key=keys["auditor"]).verify())


def test_a_ledger_made_before_the_chain_gets_it_at_the_custodians_next_write(team):  # noqa: F811
    """The chain removed (as a ledger of the previous privmob has none, and no checkpoint
    names its head): read as before, an analyst charges; the custodian's next act gives it its
    chain, after which a deleted revocation is detected."""
    path, keys = team
    _edit(
        path,
        """
        c.execute("DROP TRIGGER governance_append_only_d")
        c.execute("DELETE FROM governance")
        """,
    )
    ana = Ledger(path, key=keys["analyst"])
    ana.charge("cdr-2026-01", Cost.pure(0.5), kind="od")
    assert _chain(path) == []
    cus = Ledger(path, key=keys["custodian"])
    cus.set_budget("new", 1.0)  # the custodian's next write
    chain = _chain(path)
    assert [k for k, _ in chain] == ["ledger_keys"] * 3 + ["budgets"] * 2
    assert cus.verify() == []
    cus.revoke(keys["analyst"].key_id)
    _edit(
        path,
        """
        c.execute("DROP TRIGGER ledger_keys_append_only_d")
        c.execute("DELETE FROM ledger_keys WHERE action = 'revoke'")
        """,
    )
    with pytest.raises(BudgetError, match=r"\(key event\): its record is gone"):
        ana.charge("cdr-2026-01", Cost.pure(0.5), kind="od")


def test_a_chain_emptied_under_a_checkpoint_is_detected(team):  # noqa: F811
    """Deleting the whole chain to pass for a ledger made before it: the latest checkpoint
    signed the chain's head, so every charge refuses."""
    path, keys = team
    Ledger(path, key=keys["custodian"]).checkpoint()
    _edit(
        path,
        """
        c.execute("DROP TRIGGER governance_append_only_d")
        c.execute("DELETE FROM governance")
        """,
    )
    with pytest.raises(BudgetError, match="no longer holds its entry 4 as checkpoint 1 signed"):
        Ledger(path, key=keys["analyst"]).charge("cdr-2026-01", Cost.pure(0.5), kind="od")


def test_a_governance_entry_forged_with_an_analyst_key_counts_for_nothing(team):  # noqa: F811
    """The analyst writes a budget row for a dataset of her own and attests it in the chain
    herself (both signed with her registered key): refused, by the chain's signature."""
    import json

    path, keys = team
    Ledger(path, key=keys["custodian"]).checkpoint()  # entries before it are vouched for
    forged = {
        "dataset": "mine",
        "epsilon": 1000.0,
        "delta": 0.0,
        "unit": "user",
        "created_at": "2026-01-01",
        "note": "",
    }
    _edit(
        path,
        f"""
        import json
        from privmob.privacy.ledger import chain as chain, governance as g
        from privmob.privacy.ledger import trust as trust
        from privmob.privacy.ledger.keys import load_private
        lid = c.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'").fetchone()[0]
        ana = load_private({str(path.parent / "analyst.pem")!r})
        row = json.loads({json.dumps(forged)!r})
        row["row_hash"] = chain.budget_hash(lid, row)
        c.execute("INSERT INTO budgets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  (*row.values(), ana.key_id, trust.budget_signature(ana, lid, row["row_hash"])))
        g.attest(c, lid, ana, "budgets", row, "2026-01-01")
        """,
    )
    with pytest.raises(BudgetError, match=r"\(budget\): not signed by a custodian key active"):
        Ledger(path, key=keys["analyst"]).charge("mine", Cost.pure(1.0), kind="od")


def test_the_chain_head_is_signed_by_each_checkpoint(team):  # noqa: F811
    path, keys = team
    Ledger(path, key=keys["custodian"]).checkpoint()
    con = sqlite3.connect(path)
    try:
        (vouched,) = con.execute("SELECT vouched FROM checkpoints").fetchone()
        count, last = governance.head(con, "")
    finally:
        con.close()
    import json

    assert governance.vouched_head(json.loads(vouched)) == (count - 1, _chain_hash(path, count - 1))
    assert last != _chain_hash(path, count - 1)  # the checkpoint's own entry follows it


def _chain_hash(path, n: int) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT row_hash FROM governance ORDER BY seq LIMIT 1 OFFSET ?", (n - 1,)
        ).fetchone()[0]
    finally:
        con.close()


def test_verify_checks_the_signatures_a_checkpoint_vouches_for(team):  # noqa: F811
    """A charge takes the chain up to the latest checkpoint's signed head on that checkpoint's
    word (hash links checked); ``ledger verify`` checks every signature all the same."""
    path, keys = team
    Ledger(path, key=keys["custodian"]).checkpoint()
    _edit(
        path,
        """
        c.execute("DROP TRIGGER governance_append_only_u")
        c.execute("UPDATE governance SET signature = '00' || substr(signature, 3) WHERE seq = 2")
        """,
    )
    Ledger(path, key=keys["analyst"]).charge("cdr-2026-01", Cost.pure(0.5), kind="od")
    problems = Ledger(path, key=keys["auditor"]).verify()
    assert any("governance entry 2 (key event): not signed" in p for p in problems), problems


def test_deleted_people_sketches_do_not_reopen_the_people_check(team):  # noqa: F811
    """Issue 39: deleting the ``dataset_people`` rows (a real process) let the same people be
    released again under another dataset's budget. Now the checkpoint the custodian signs names
    each dataset that has a sketch, and every charge refuses a ledger that lost one."""
    import numpy as np
    from tests.privacy.test_people import _sketch, _users

    path, keys = team
    cus = Ledger(path, key=keys["custodian"])
    cus.set_budget("other", 10.0)
    people = _sketch(_users(np.random.default_rng(4), 5_000))
    cus.charge_parts(
        "cdr-2026-01", [("", Cost(0.5))], kind="t", input_fingerprint="f1", people=people
    )
    cus.checkpoint()
    with pytest.raises(BudgetError, match="are users of dataset 'cdr-2026-01'"):
        cus.charge_parts(
            "other", [("", Cost(0.5))], kind="t", input_fingerprint="f2", people=people
        )
    _edit(path, 'c.execute("DELETE FROM dataset_people")')
    ana = Ledger(path, key=keys["analyst"])
    with pytest.raises(BudgetError, match=r"people sketch of dataset 'cdr-2026-01'.* is gone"):
        ana.charge_parts(
            "other", [("", Cost(0.5))], kind="t", input_fingerprint="f2", people=people
        )
    assert ana.entries("other") == []
    assert any("people sketch" in p for p in Ledger(path, key=keys["auditor"]).verify())
