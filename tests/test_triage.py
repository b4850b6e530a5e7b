"""Triage context (location, severity) and token checksums, through the real engine and the real
report writers. Tokens are minted at run time (random body, real checksum)."""
from __future__ import annotations

import json
import random
import string
import zlib

import pytest

from repoguard.credentials import report
from repoguard.credentials.checksums import base62, bech32, crc32_base62
from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules
from repoguard.credentials.triage import location, severity

RULES = load_rules()


@pytest.fixture(scope="module")
def engine():
    return Engine.build(RULES)


def _gh(prefix: str = "ghp_", valid: bool = True) -> str:
    body = "".join(random.SystemRandom().choice(string.ascii_letters + string.digits) for _ in range(30))
    crc = base62(zlib.crc32(body.encode())).decode()
    if not valid:
        crc = crc[:-1] + ("A" if crc[-1] != "A" else "B")
    return prefix + body + crc


@pytest.mark.parametrize("path, line, where", [
    ("tests/test_api.py", b"", "test"),
    ("pkg/api_test.go", b"", "test"),
    ("web/src/client.spec.ts", b"", "test"),
    ("src/test/java/AppTest.java", b"", "test"),
    ("tests/fixtures/repo/.env", b"", "fixture"),
    ("internal/testdata/creds.json", b"", "fixture"),
    ("docs/setup.md", b"", "docs"),
    ("README.md", b"", "docs"),
    ("examples/quickstart.py", b"", "example"),
    (".env.example", b"", "example"),
    ("config/settings.sample.yaml", b"", "example"),
    ("deploy/values.yaml", b"", "config"),
    (".npmrc", b"", "config"),
    ("Dockerfile", b"", "config"),
    ("app/client.py", b"TOKEN = 'abc'", "source"),
    ("app/client.py", b"TOKEN = 'abc'  # example token, not a real one", "example"),
])
def test_location(path, line, where):
    assert location(path, line) == where


def test_severity_order():
    assert severity("pem-private-key", "rules/keys.toml", "source") == "critical"
    assert severity("github-pat", "rules/vcs.toml", "source") == "high"
    assert severity("github-pat", "rules/vcs.toml", "test") == "medium"
    assert severity("generic-api-key", "rules/generic.toml", "source") == "medium"
    assert severity("generic-api-key", "rules/generic.toml", "fixture") == "low"
    assert severity("github-pat", "rules/vcs.toml", "source", "invalid") == "low"


def test_github_checksum_recorded_and_lowers_invalid(engine):
    good, bad = _gh(), _gh(valid=False)
    assert crc32_base62(good.encode()) and not crc32_base62(bad.encode())
    f_good = engine.scan(f"T = '{good}'\n".encode(), "app/client.py")
    f_bad = engine.scan(f"T = '{bad}'\n".encode(), "app/client.py")
    assert [(f.rule_id, f.checksum, f.severity) for f in f_good] == [("github-pat", "valid", "high")]
    assert [(f.rule_id, f.checksum, f.severity) for f in f_bad] == [("github-pat", "invalid", "low")]
    npm = _gh("npm_")
    assert [f.checksum for f in engine.scan(f"//r/:_authToken={npm}\n".encode(), ".npmrc")] == ["valid"]


def test_bech32_vectors():
    assert bech32(b"A12UEL5L") and bech32(b"abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw")
    assert not bech32(b"abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxx")


def test_reports_carry_triage(engine):
    tok = _gh()
    found = engine.scan(f"T = '{tok}'\n".encode(), "tests/fixtures/app.py")
    found += engine.scan(f"T = '{tok}'\n".encode(), "tests/fixtures/other.py")
    assert {f.location for f in found} == {"fixture"}
    text = report.to_text(found, {})
    assert "[low fixture]" in text or "[medium fixture]" in text
    assert "all in tests, fixtures, docs or examples" in text.splitlines()[-1]
    assert tok not in text and tok[4:] not in text
    doc = json.loads(report.to_json(found, {}))
    assert doc["findings"][0]["location"] == "fixture" and doc["findings"][0]["severity"] in ("medium", "low")
    sarif = json.loads(report.to_sarif(found, {}, RULES))
    res = sarif["runs"][0]["results"][0]
    assert res["level"] in ("warning", "note") and res["properties"]["location"] == "fixture"
    src = engine.scan(f"T = '{tok}'\n".encode(), "app/client.py")
    assert json.loads(report.to_sarif(src, {}, RULES))["runs"][0]["results"][0]["level"] == "error"
    assert "all in tests" not in report.to_text(src, {})


def test_history_head_column(engine):
    f = engine.scan(f"T = '{_gh()}'\n".encode(), "app/client.py")[0]
    f.commit, f.author, f.date, f.present_at_head = "a" * 40, "A <a@x>", "2026-01-01", True
    assert "] still at HEAD " in report.to_text([f], {})
    f.present_at_head = False
    assert "] not at HEAD " in report.to_text([f], {})
