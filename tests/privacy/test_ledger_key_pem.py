"""A ledger key in the PEM form ``privmob ledger keygen`` writes is read without cryptography's
serialization package (issue 43), as that package reads it; any other form goes to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from privmob.errors import ConfigError
from privmob.privacy.ledger import keys as keys


def _raw(key: ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes_raw()


def test_a_generated_key_reads_as_cryptography_reads_it(tmp_path: Path) -> None:
    for n in range(20):
        signer = keys.generate(tmp_path / f"k{n}.pem")
        data = (tmp_path / f"k{n}.pem").read_bytes()
        assert keys._seed_of(data) is not None  # the fast path is the one taken
        loaded = keys.load_private(tmp_path / f"k{n}.pem")
        reference = serialization.load_pem_private_key(data, password=None)
        assert isinstance(reference, ed25519.Ed25519PrivateKey)
        assert _raw(loaded.private) == _raw(reference) == _raw(signer.private)
        assert loaded.public == reference.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        assert keys.verified(loaded.public_hex, loaded.sign("d", b"m"), "d", b"m")


def test_other_forms_are_read_by_cryptography(tmp_path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    windows = pem.replace(b"\n", b"\r\n")  # line ends: the same key either way
    assert _raw(keys._private_from_pem(windows, "w")) == _raw(key)
    commented = b"a key\n" + pem  # text before the block: cryptography's reader
    assert keys._seed_of(commented) is None
    assert _raw(keys._private_from_pem(commented, "c")) == _raw(key)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    assert keys._seed_of(encrypted) is None
    with pytest.raises(ConfigError, match="not an unencrypted Ed25519 private key"):
        keys._private_from_pem(encrypted, "e")
    other = pem.replace(pem.splitlines()[1], b"MC4CAQAwBQYDK2VxBCIEI" + pem.splitlines()[1][21:])
    assert keys._seed_of(other) is None  # another algorithm's identifier (Ed448's OID)


def test_reading_the_key_imports_no_serialization_package(tmp_path: Path) -> None:
    keys.generate(tmp_path / "key.pem")
    code = (
        "import sys; from privmob.privacy.ledger import keys as k; "
        f"s = k.load_private({str(tmp_path / 'key.pem')!r}); s.sign('d', b'm'); s.public_hex; "
        "print(sorted(m for m in sys.modules if m.startswith('cryptography.hazmat.primitives.s')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
