"""Redaction for training text: every detected secret becomes `<REDACTED:rule-id>`."""
from __future__ import annotations

import threading

from repoguard.credentials.engine import Engine
from repoguard.credentials.findings import Finding
from repoguard.credentials.rules import load_rules

_LOCK = threading.Lock()
_DEFAULT: Engine | None = None


def default_engine() -> Engine:
    """The engine over the default rules, built once per process (cached compile)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = Engine.build(load_rules())
        return _DEFAULT


def redact(text: str, path: str, *, engine: Engine | None = None) -> tuple[str, list[Finding]]:
    """Replace each credential in `text` (the content of `path`, repo-relative) by
    `<REDACTED:rule-id>`. Returns (redacted text, findings); finding offsets (`start`, `end`)
    are UTF-8 byte offsets into the original `text`. Path-only findings (e.g. a `.p12` file)
    are returned but replace nothing. Never raises on content (any text, any size)."""
    eng = engine or default_engine()
    data = text.encode("utf-8", "surrogateescape")
    findings = eng.scan(data, path)
    out = bytearray()
    pos = 0
    for f in sorted((f for f in findings if f.end > f.start), key=lambda f: f.start):
        if f.start < pos:
            continue
        out += data[pos:f.start]
        out += f"<REDACTED:{f.rule_id}>".encode()
        pos = f.end
    out += data[pos:]
    return out.decode("utf-8", "surrogateescape"), findings
