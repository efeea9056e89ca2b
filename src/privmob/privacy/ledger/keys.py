"""Ed25519 keys of the privacy ledger: who may append what is decided by who holds which key.

A private key lives in a PEM file of mode 0600 (``$PRIVMOB_KEY`` names it) or in the
environment (``$PRIVMOB_KEY_PEM``), never in the ledger; the ledger keeps public keys only, so
verifying it needs no secret. Without either, the key is the user's own in their private data
directory (``$XDG_DATA_HOME/privmob/keys/key.pem``), created by the first ledger they create.

A key is named in the ledger by its id: the first 32 hex digits of the SHA-256 of its public
key. Signatures (:func:`sign`, :func:`verified`) are over a domain-separated message, so a
signature made for one kind of record never verifies as another.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    from cryptography import exceptions
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )
else:  # imported when a key is first used, not when a release plans (issue 43)
    exceptions = lazy_module("cryptography.exceptions")
    serialization = lazy_module("cryptography.hazmat.primitives.serialization")
    ed25519 = lazy_module("cryptography.hazmat.primitives.asymmetric.ed25519")

KEY_ENV = "PRIVMOB_KEY"
KEY_PEM_ENV = "PRIVMOB_KEY_PEM"
KEY_FILE_NAME = "key.pem"


def keys_dir() -> Path:
    """The user's private key folder: ``$XDG_DATA_HOME/privmob/keys`` (``~/.local/share/...``)."""
    data_home = os.environ.get("XDG_DATA_HOME") or ""
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "privmob" / "keys"


def default_key_path() -> Path:
    return keys_dir() / KEY_FILE_NAME


def key_id(public: bytes) -> str:
    return hashlib.sha256(public).hexdigest()[:32]


@dataclass(frozen=True)
class Signer:
    """A private key that appends to a ledger; ``path`` is None for a key from the environment
    or an ephemeral one (test mode)."""

    private: Ed25519PrivateKey
    path: Path | None = None
    #: a key that lives as long as the process (:meth:`ephemeral`): its ledgers are throw-away
    #: ones, which no witness keeps (privacy/ledger/witness.py)
    throwaway: bool = False

    @property
    def public(self) -> bytes:
        return self.private.public_key().public_bytes_raw()

    @property
    def public_hex(self) -> str:
        return self.public.hex()

    @property
    def key_id(self) -> str:
        return key_id(self.public)

    def sign(self, domain: str, message: bytes) -> str:
        return self.private.sign(_framed(domain, message)).hex()

    @classmethod
    def ephemeral(cls) -> Signer:
        """A key that lives as long as the process (throw-away ledgers of test mode)."""
        return cls(ed25519.Ed25519PrivateKey.generate(), throwaway=True)


def _framed(domain: str, message: bytes) -> bytes:
    return b"privmob-ledger-signature\n" + domain.encode() + b"\n" + message


@functools.lru_cache(maxsize=64)
def _public_key(public_hex: str) -> Ed25519PublicKey:
    return ed25519.Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex))


@functools.lru_cache(maxsize=1 << 16)
def verified(public_hex: str, signature_hex: str | None, domain: str, message: bytes) -> bool:
    """True when ``signature_hex`` is ``public_hex``'s signature of ``message`` in ``domain``
    (remembered for this process: the governance chain and key events are read by every
    charge, their signatures verified once)."""
    if not signature_hex:
        return False
    try:
        _public_key(public_hex).verify(bytes.fromhex(signature_hex), _framed(domain, message))
    except (exceptions.InvalidSignature, ValueError):
        return False
    return True


def generate(path: str | os.PathLike[str]) -> Signer:
    """A new private key written to ``path`` (mode 0600; refused if the file exists)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # written aside, then linked into place: a racing process never reads half a key
    fd, tmp = tempfile.mkstemp(prefix=".key-", dir=target.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise ConfigError(
                f"{target} exists: a key is never overwritten",
                hint="choose another file name, or use that key",
            ) from None
    finally:
        os.unlink(tmp)
    return Signer(key, target)


def load_private(path: str | os.PathLike[str]) -> Signer:
    """The private key in ``path``; refused if others may read the file."""
    source = Path(path)
    try:
        mode = source.stat().st_mode
        data = source.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the private key {source}: {exc.strerror}",
            hint="create one with: privmob ledger keygen FILE",
        ) from None
    if os.name == "posix" and mode & 0o077:
        raise ConfigError(
            f"the private key {source} may be read by other users (mode {mode & 0o777:o})",
            hint=f"chmod 600 {source}",
        )
    return Signer(_private_from_pem(data, str(source)), source)


def _pem_key(load: Callable[[bytes], object], data: bytes) -> object | None:
    """The key that ``load`` reads from the PEM ``data``, or None where it reads none."""
    try:
        return load(data)
    except (ValueError, TypeError):
        return None


#: the DER of an unencrypted Ed25519 PKCS#8 key (RFC 8410) before its 32-byte seed
_ED25519_PKCS8 = bytes.fromhex("302e020100300506032b657004220420")


def _seed_of(data: bytes) -> bytes | None:
    """The seed of an unencrypted Ed25519 key in the one PEM form :func:`generate` writes (a
    single base64 line of the 48-byte PKCS#8 DER), else None: read without
    ``cryptography``'s serialization package, whose import (SSH keys, ciphers) cost more than
    a release's plan before its plan line (issue 43)."""
    lines = data.strip().split(b"\n")
    if len(lines) != 3 or lines[0].strip() != b"-----BEGIN PRIVATE KEY-----":
        return None
    if lines[2].strip() != b"-----END PRIVATE KEY-----":
        return None
    try:
        der = base64.b64decode(lines[1].strip(), validate=True)
    except ValueError:  # binascii.Error
        return None
    if len(der) != 48 or not der.startswith(_ED25519_PKCS8):
        return None
    return der[len(_ED25519_PKCS8) :]


def _private_from_pem(data: bytes, where: str) -> Ed25519PrivateKey:
    seed = _seed_of(data)
    if seed is not None:  # the same key load_pem_private_key reads from it
        return ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    key = _pem_key(functools.partial(serialization.load_pem_private_key, password=None), data)
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ConfigError(
            f"{where} is not an unencrypted Ed25519 private key in PEM",
            hint="create one with: privmob ledger keygen FILE",
        )
    return key


def public_pem(signer: Signer) -> bytes:
    return signer.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_public(path: str | os.PathLike[str]) -> str:
    """The public key (hex of its 32 bytes) in ``path``: a public PEM (``privmob ledger keygen``
    writes ``FILE.pub``) or 64 hex digits."""
    source = Path(path)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the public key {source}: {exc.strerror}") from None
    text = data.decode("ascii", "replace").strip()
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text.lower()):
        return text.lower()
    pub = _pem_key(serialization.load_pem_public_key, data)
    if not isinstance(pub, ed25519.Ed25519PublicKey):
        raise ConfigError(
            f"{source} is not an Ed25519 public key (PEM or 64 hex digits)",
            hint="the key holder makes one with: privmob ledger keygen FILE (it writes FILE.pub)",
        )
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def resolve(key: Signer | str | os.PathLike[str] | None) -> Signer | None:
    """The key a ledger is opened with: ``key`` if given (a :class:`Signer` or a file), else
    ``$PRIVMOB_KEY_PEM``, ``$PRIVMOB_KEY``, or the user's default key if it exists."""
    if isinstance(key, Signer):
        return key
    if key is not None:
        return load_private(key)
    pem = os.environ.get(KEY_PEM_ENV)
    if pem:
        return Signer(_private_from_pem(pem.encode(), f"${KEY_PEM_ENV}"))
    named = os.environ.get(KEY_ENV)
    if named:
        return load_private(named)
    default = default_key_path()
    return load_private(default) if default.exists() else None


def own_key() -> Signer:
    """The user's default key, created on first use (the single-user path: whoever creates a
    ledger without naming a key is its custodian)."""
    default = default_key_path()
    if default.exists():
        return load_private(default)
    try:
        return generate(default)
    except ConfigError:  # another process created it meanwhile
        return load_private(default)
