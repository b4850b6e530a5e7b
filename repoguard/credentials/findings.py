"""A credential finding and its fingerprint.

The fingerprint is `rule_id:path:h` with h = the first 32 hex digits of HMAC-SHA256 of the secret
under the repository's fingerprint key (`credentials.keys`): no line number and no commit, so it
survives line moves, rebases and squash merges (a gitleaks complaint), and it is no offline
verifier (a plain hash of a weak password is recovered by a dictionary). Findings carry only that
keyed hash and a redacted form that holds no character of the secret (`****(N chars)`); the
secret text never leaves the engine.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from repoguard.credentials.keys import fingerprint


def secret_hash(secret: bytes, key: bytes) -> str:
    """HMAC-SHA256 of the secret bytes under `key`, hex, truncated to 32 digits (128 bits)."""
    return fingerprint(key, secret)


def redact_secret(secret: bytes) -> str:
    """`****(N chars)`: the secret's length in characters, no character of it."""
    return f"****({len(secret.decode('utf-8', errors='replace'))} chars)"


@dataclass
class Finding:
    """One detected credential. `line`/`column` are 1-based (column in characters); `start`/
    `end` are byte offsets of the secret in the scanned text (of the whole encoded blob when the
    secret was found by decoding base64/hex, named in `decoded`). History fields (`commit`,
    `author`, `date`, `present_at_head`) are None outside `--history`. Triage (credentials.triage):
    `location` (fixture/test/docs/example/config/source), `severity` (critical/high/medium/low)
    and `checksum` ("valid"/"invalid" for formats that carry one, else ""). `found_in`: "" for
    a file's content, "file name" or "commit message" (credentials.names; a name finding's
    `path` is already redacted there, its line 1 and column the place in the path). `confidence`:
    "high", or "low" for a generic finding on a value beside a vendor's name that no shape known
    for that vendor accepts (not reported by default, still redacted from training text)."""

    rule_id: str
    path: str
    line: int
    column: int
    end_line: int
    start: int
    end: int
    secret_hmac: str
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
    found_in: str = ""
    confidence: str = "high"

    @property
    def fingerprint(self) -> str:
        """`rule_id:path:h` (module doc), with ` (file name)`/` (commit message)` after the path for a
        finding in a name: no line, no commit, so it survives moves, rebases and squash merges."""
        where = f" ({self.found_in})" if self.found_in else ""   # a name's token is not its file's
        return f"{self.rule_id}:{self.path}{where}:{self.secret_hmac}"

    def to_json(self) -> dict:
        """The finding as a JSON object for reports and baselines: every field but the byte offsets
        `start`/`end`, plus `fingerprint`; `entropy` rounded to 3 decimals."""
        d = asdict(self)
        d.pop("start")
        d.pop("end")
        d["fingerprint"] = self.fingerprint
        d["entropy"] = round(self.entropy, 3)
        return d
