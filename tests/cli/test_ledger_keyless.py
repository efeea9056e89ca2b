"""Issue 39: no key is written as a side effect. A user without a key who creates a ledger with
``ledger init`` is refused, and nothing is written (neither the ledger nor a key), unless they
ask for their own key with ``--make-key`` (then told it was made: it is the new ledger's
custodian key); commands that only read or settle a ledger (``ledger recover``, ``ledger
programme show``) create neither a ledger nor a key where there is none."""

from __future__ import annotations

import pytest

from privmob.cli import main
from privmob.privacy.ledger.keys import default_key_path


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0)


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    for name in ("PRIVMOB_KEY", "PRIVMOB_KEY_PEM", "PRIVMOB_LEDGER"):
        monkeypatch.delenv(name, raising=False)
    assert not default_key_path().exists()


def test_a_keyless_init_writes_nothing(tmp_path, capsys):
    """Before: ``ledger init`` without a key made the user's key file (and said so)."""
    new = tmp_path / "new.sqlite"
    assert _run("ledger", "init", "d", "--epsilon", "1", "--ledger", str(new)) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no key to sign the new ledger" in err and "--make-key" in err, err
    assert not default_key_path().exists() and not new.exists()
    assert not default_key_path().parent.exists()  # not even its folder


def test_a_keyless_init_with_make_key_says_it_made_the_custodian_key(tmp_path, capsys):
    assert _run("ledger", "init", "--make-key", "--ledger", str(tmp_path / "new.sqlite")) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert default_key_path().exists()
    assert f"made your private key {default_key_path()}" in out and "custodian key" in out
    assert _run("ledger", "init", "--ledger", str(tmp_path / "other.sqlite")) == 0
    assert "made your private key" not in capsys.readouterr().out  # made once, then used


@pytest.mark.parametrize(
    "command",
    [["ledger", "recover"], ["ledger", "programme", "show", "--dataset", "trips"]],
)
def test_reading_a_missing_ledger_makes_no_ledger_and_no_key(tmp_path, capsys, command):
    missing = tmp_path / "missing.sqlite"
    assert _run(*command, "--ledger", str(missing)) == 2
    assert "no ledger at" in " ".join(capsys.readouterr().err.split())
    assert not missing.exists() and not default_key_path().exists()
