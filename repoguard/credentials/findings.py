"""A credential finding and its fingerprint.

The fingerprint is `rule_id:path:h` with h = the first 32 hex digits of SHA-256 of the secret: no
line number and no commit, so it survives line moves, rebases and squash merges (a gitleaks
complaint), and it never contains the secret itself. Findings carry only the secret's hash and
its redacted form (first 4 characters, then `…`); the secret text never leaves the engine.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass


def secret_hash(secret: bytes) -> str:
    """SHA-256 of the secret bytes, hex, truncated to 32 digits (128 bits)."""
    return hashlib.sha256(secret).hexdigest()[:32]


def redact_secret(secret: bytes) -> str:
    """The first 4 characters of the secret, then `…` (never more, whatever its length)."""
    text = secret.decode("utf-8", errors="replace")
    return text[:4] + "…"


@dataclass
class Finding:
    """One detected credential. `line`/`column` are 1-based (column in characters); `start`/
    `end` are byte offsets of the secret in the scanned text (of the whole encoded blob when the
    secret was found by decoding base64/hex, named in `decoded`). History fields (`commit`,
    `author`, `date`, `present_at_head`) are None outside `--history`. Triage (credentials.triage):
    `location` (fixture/test/docs/example/config/source), `severity` (critical/high/medium/low)
    and `checksum` ("valid"/"invalid" for formats that carry one, else "")."""

    rule_id: str
    path: str
    line: int
    column: int
    end_line: int
    start: int
    end: int
    secret_sha256: str
    redacted: str
    entropy: float
    description: str = ""
    decoded: str = ""
    commit: str | None = None
    author: str | None = None
    date: str | None = None
    present_at_head: bool | None = None
    location: str = "source"
    severity: str = "high"
    checksum: str = ""

    @property
    def fingerprint(self) -> str:
        return f"{self.rule_id}:{self.path}:{self.secret_sha256}"

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("start")
        d.pop("end")
        d["fingerprint"] = self.fingerprint
        d["entropy"] = round(self.entropy, 3)
        return d
