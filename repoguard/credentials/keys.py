"""The per-repository fingerprint key: credential fingerprints are keyed hashes, never plain ones.

A plain SHA-256 of a credential is an offline verifier: anyone holding a published fingerprint
(SARIF, `findings.json`, a baseline, a secret id in the ledger or `sensitive.toml`) tests
candidate passwords against it. Fingerprints are therefore HMAC-SHA256(K, value) with a key K
that never enters the repository or the output directory [RFC 2104]:

    K = HMAC-SHA256(file key, "repoguard-fingerprint-v2\\0" + repository identity)

* The file key is `$REPOGUARD_KEY_FILE` when set (a team's or CI's shared key: any file of at
  least 16 bytes, e.g. 64 hex digits from `python -c "import secrets; print(secrets.token_hex(32))"`),
  else `<key dir>/<sha256(identity)[:24]>.key`, created on first use with 32 random bytes
  (mode 0600, directory 0700). The key dir is `$REPOGUARD_KEY_DIR`, else `$REPOGUARD_CACHE_DIR/keys`
  when that is set, else `$XDG_CONFIG_HOME/repoguard/keys` (`~/.config/repoguard/keys`).
* The repository identity is its root commit (the smallest, when several), so every clone on
  the machine, and every machine with the same key file, gets the same fingerprints; a directory
  without commits is identified by its real path.

Deleting the key changes every fingerprint: baselines then need `--update-baseline` and secret
ids change (a new plan). `key_id` names a key without revealing it (baselines record it).
Engines used only for redaction may use `process_key()`, a random per-process key.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import secrets
import stat
import subprocess
import tempfile
from pathlib import Path

from repoguard.core.errors import InputError

KEY_FILE_ENV = "REPOGUARD_KEY_FILE"
KEY_DIR_ENV = "REPOGUARD_KEY_DIR"
_CONTEXT = b"repoguard-fingerprint-v2\0"
log = logging.getLogger("repoguard")


def key_dir() -> Path:
    """Where per-repository keys are created (module docstring); not created here."""
    env = os.environ.get(KEY_DIR_ENV)
    if env:
        return Path(env)
    cache = os.environ.get("REPOGUARD_CACHE_DIR")
    if cache:
        return Path(cache) / "keys"
    return Path(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")) / "repoguard" / "keys"


@functools.lru_cache(maxsize=64)
def repo_identity(root: str) -> str:
    """`git:<root commit>` (the smallest root of HEAD's history) or `dir:<real path>`."""
    try:
        r = subprocess.run(["git", "-C", root, "rev-list", "--max-parents=0", "HEAD"],
                           capture_output=True, text=True, timeout=60)
        roots = sorted(r.stdout.split()) if r.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        roots = []
    return f"git:{roots[0]}" if roots else f"dir:{os.path.realpath(root)}"


def key_path(root: str | os.PathLike) -> Path:
    """The key file used for the repository at `root`."""
    env = os.environ.get(KEY_FILE_ENV)
    if env:
        return Path(env)
    ident = repo_identity(os.path.realpath(os.fspath(root)))
    return key_dir() / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.key"


def _read_key(path: Path) -> bytes:
    try:
        raw = path.read_bytes().strip()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the fingerprint key ({exc.strerror})") from None
    try:
        key = bytes.fromhex(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = raw
    if len(key) < 16:
        raise InputError(f"{path}: fingerprint key too short ({len(key)} bytes; need at least 16)")
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            log.warning("repoguard: %s: the fingerprint key is readable by other users (chmod 600 it)", path)
    except OSError:
        pass
    return key


def _create_key(path: Path) -> None:
    """Create `path` with 32 random bytes (hex), mode 0600, without ever replacing an existing key
    (a concurrent creator wins; both then read the same file)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".key.", dir=path.parent)   # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


@functools.lru_cache(maxsize=64)
def _repo_key(root: str, path: str, ident: str) -> bytes:
    p = Path(path)
    if not p.exists():
        if os.environ.get(KEY_FILE_ENV):
            raise InputError(f"{p}: fingerprint key file not found (${KEY_FILE_ENV})")
        try:
            _create_key(p)
        except OSError as exc:
            raise InputError(f"{p}: cannot create the fingerprint key ({exc.strerror}); "
                             f"set ${KEY_FILE_ENV} or ${KEY_DIR_ENV}") from None
    return hmac.new(_read_key(p), _CONTEXT + ident.encode(), hashlib.sha256).digest()


def repo_key(root: str | os.PathLike) -> bytes:
    """The fingerprint key K of the repository at `root` (32 bytes), creating the key file on
    first use. Raises InputError naming the key file when it cannot be read or created."""
    real = os.path.realpath(os.fspath(root))
    return _repo_key(real, str(key_path(real)), repo_identity(real))


@functools.lru_cache(maxsize=1)
def process_key() -> bytes:
    """A random key for this process only: fingerprints made with it match nothing published."""
    return secrets.token_bytes(32)


def fingerprint(key: bytes, value: bytes) -> str:
    """HMAC-SHA256(key, value), hex, first 32 digits (128 bits)."""
    return hmac.new(key, value, hashlib.sha256).hexdigest()[:32]


def key_id(key: bytes) -> str:
    """A name for `key` that reveals nothing about it or any value: HMAC(key, "key-id"), 12 hex."""
    return hmac.new(key, b"repoguard-key-id", hashlib.sha256).hexdigest()[:12]
