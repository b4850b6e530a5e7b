"""Credentials. Takes the checkout's files (tree, staged change or history) and the rule files;
writes `OUT/scan/findings.json` (redacted, keyed fingerprints), SARIF and baselines; hands
findings to `analyzers` (credential secrets) and the redaction API to `training`.

Credential scanning: gitleaks-schema rules (`rules/*.toml`), a Hyperscan/RE2 engine, scan modes,
baselines, reports and the redaction API used by training.

    from repoguard.credentials import redact
    clean, findings = redact(text, "src/app/settings.py")   # secrets → <REDACTED:rule-id>
"""
from __future__ import annotations

from repoguard.credentials.findings import Finding
from repoguard.credentials.redact import redact

__all__ = ["Finding", "redact"]
