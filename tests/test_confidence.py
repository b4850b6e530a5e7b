"""Low confidence (issue 43): a generic finding on a value beside a vendor's name that fits no shape
known for that vendor is kept at low confidence — redacted from training text, shown by
`repoguard scan --confidence low`, not reported by default and not blocking the pre-commit scan
(`--staged`). A vendor we know no shape for, or a value of the vendor's shape, stays reported."""
from __future__ import annotations

import json

import pytest

from repoguard.cli import main
from repoguard.credentials.engine import Engine
from repoguard.credentials.redact import redact
from repoguard.credentials.rules import load_rules
from conftest import git

ODD = "q7Hk2mZp9XvB4nLr8TcW3sYd6FgJ1aQe5uRoP"   # 37 characters: no Mailgun shape, no common key length
COMMON = "q7Hk2mZp9XvB4nLr8TcW3sYd6FgJ1aQe5uRo"  # 36: a common key shape, still no Mailgun shape
MAILGUN = "key-" + "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e"  # Mailgun's documented `key-` + 32 hex


@pytest.fixture(scope="module")
def engine():
    return Engine.build(load_rules())


def _found(engine, text: str, path: str = "app/settings.py") -> list[tuple[str, str]]:
    return [(f.rule_id, f.confidence) for f in engine.scan(text.encode(), path)]


@pytest.mark.parametrize("value", [ODD, COMMON])
def test_wrong_shape_beside_a_vendor_is_low(engine, value):
    assert _found(engine, f'MAILGUN_API_KEY = "{value}"') == [("generic-api-key", "low")]
    # the twins: no vendor named (we know no shape to hold it to), a vendor's own shape
    assert _found(engine, f'ACMEPAY_API_KEY = "{value}"') == [("generic-api-key", "high")]
    assert _found(engine, f"MAILGUN_API_KEY = \"{MAILGUN}\"") == [("mailgun-private-api-token", "high")]


def test_low_findings_are_redacted(engine):
    text = f'MAILGUN_API_KEY = "{ODD}"\nACMEPAY_API_KEY = "{ODD[::-1]}"\n'
    out, findings = redact(text, "app/settings.py", engine=engine)
    assert ODD not in out and ODD[::-1] not in out
    assert sorted(f.confidence for f in findings) == ["high", "low"]


def test_scan_reports_low_only_when_asked(make_repo, capsys):
    repo = make_repo({"app/settings.py": f'MAILGUN_API_KEY = "{ODD}"\n'})
    rc = main(["scan", "--jobs", "1", "--format", "json", str(repo)])
    out, err = capsys.readouterr()
    assert rc == 0 and json.loads(out)["findings"] == [] and ODD not in out + err
    rc = main(["scan", "--jobs", "1", "--format", "json", "--confidence", "low", str(repo)])
    out, err = capsys.readouterr()
    got = json.loads(out)["findings"]
    assert rc == 1 and [(f["rule_id"], f["confidence"]) for f in got] == [("generic-api-key", "low")]
    assert ODD not in out + err


def test_low_finding_does_not_block_a_commit(make_repo, capsys):
    repo = make_repo({"README.md": "x\n"})
    (repo / "settings.py").write_text(f'MAILGUN_API_KEY = "{ODD}"\n')
    git(repo, "add", "settings.py")
    assert main(["scan", "--jobs", "1", "-q", "--staged", str(repo)]) == 0
    (repo / "billing.py").write_text(f'ACMEPAY_API_KEY = "{ODD}"\n')
    git(repo, "add", "billing.py")
    assert main(["scan", "--jobs", "1", "-q", "--staged", str(repo)]) == 1
    out, err = capsys.readouterr()
    assert ODD not in out + err


def test_a_word_glued_before_a_wrong_length_value(engine):
    """`key-<38 hex>` beside Mailgun's name: the generic rules read the tail, which fits none of
    Mailgun's shapes (`key-` + 32 hex): low. The documented length, and an unknown vendor, report."""
    h38 = "c4e8a1f39b2d7e05a6c1f8b3d9e2a7c40b5f6d"
    assert [c for _, c in _found(engine, f"INFO mailgun key: key-{h38}", "app.log")] == ["low"]
    assert _found(engine, f"INFO mailgun key: key-{h38[:32]}", "app.log") == [("mailgun-private-api-token", "high")]
    assert [c for _, c in _found(engine, f"INFO acmepay key: key-{h38}", "app.log")] == ["high"]
