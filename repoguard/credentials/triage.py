"""Triage context for a finding: where the credential lives and how much it matters.

`location(path, line)` → one of `fixture`, `test`, `docs`, `example`, `config`, `source`, from the
path (directories such as `tests/`, `fixtures/`, `testdata/`, `docs/`, `examples/`; file names such
as `test_*.py`, `*_test.go`, `*.spec.ts`, `README.md`, `.env.example`) and, for source and config
files, the surrounding line (`example`, `dummy`, `fake`, `sample`... mark a sample value).

`severity(rule_id, source, location, checksum)` → `critical` (private keys), `high` (a vendor
token or a structural credential in source or config), `medium` (generic rules, and keyword-anchored
vendor values: `rules/vendor_keywords.toml`, found only by the vendor's name nearby), one step lower in
tests, fixtures, docs and examples, and `low` whatever the rule when the token's own checksum
fails (a hand-made sample). SARIF `level`: critical/high → error, medium → warning, low → note.
"""
from __future__ import annotations

import re

LOCATIONS = ("fixture", "test", "docs", "example", "config", "source")
SEVERITIES = ("critical", "high", "medium", "low")
SARIF_LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "note"}
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "2.0"}

_FIXTURE_DIRS = {"fixtures", "fixture", "__fixtures__", "testdata", "test_data", "test-data",
                 "testfiles", "test-fixtures", "mocks", "__mocks__", "mock", "stubs", "snapshots",
                 "__snapshots__", "cassettes", "golden", "testresources"}
_TEST_DIRS = {"test", "tests", "__tests__", "spec", "specs", "testing", "e2e", "integration-tests",
              "unittests", "unit_tests", "androidtest", "src/test", "funtests", "functional_tests",
              "testsuite", "testsuites", "test-suite", "test_suite"}
_DOC_DIRS = {"docs", "doc", "documentation", "man", "site", "website", "wiki", "_site"}
_EXAMPLE_DIRS = {"examples", "example", "samples", "sample", "demo", "demos", "tutorial",
                 "tutorials", "quickstart", "playground", "sandbox", "templates"}
_TEST_FILE = re.compile(r"(?:^test_.*|.*_test\.[a-z]+|.*\.(?:test|spec)\.[a-z]+|.*Tests?\.(?:java|kt|cs|scala|swift)"
                        r"|conftest\.py|.*_spec\.rb|test\.[a-z]+|tests\.py)$")
_DOC_FILE = re.compile(r"(?i).*\.(?:md|markdown|rst|adoc|asciidoc|txt|ipynb|html?|tex)$|readme.*|changelog.*")
_EXAMPLE_FILE = re.compile(r"(?i).*[._-](?:example|sample|template|dist|tmpl|tpl)(?:\.[a-z0-9]+)?$|.*\.example\..*")
_CONFIG_FILE = re.compile(
    r"(?i)(?:.*\.(?:env|ya?ml|toml|ini|cfg|conf|properties|json|xml|tf|tfvars|hcl|plist|config)"
    r"|\.env.*|\.npmrc|\.netrc|_netrc|\.pypirc|pip\.conf|dockerfile.*|docker-compose.*|.*\.dockerfile"
    r"|\.htpasswd|credentials|config|settings\.py|.*\.gradle|gradle\.properties|\.?bashrc|\.?zshrc|\.?profile)$")
_SAMPLE_WORDS = re.compile(rb"(?i)\b(?:example|sample|dummy|fake|placeholder|for testing|test[_ -]?(?:key|token|secret|password)|not a real|mock)\b")


def location(path: str, line: bytes = b"") -> str:
    """Where a finding lives (one of LOCATIONS), from its repository-relative POSIX `path` and
    the text of its line."""
    parts = [p.lower() for p in path.split("/")]
    dirs, name = parts[:-1], path.rsplit("/", 1)[-1]
    if any(d in _FIXTURE_DIRS for d in dirs):
        return "fixture"
    if any(d in _TEST_DIRS for d in dirs) or _TEST_FILE.match(name) or dirs[:1] == ["t"]:
        return "test"   # a top-level t/ is Perl's test directory, and celery's (t/unit, t/integration)
    if any(d in _EXAMPLE_DIRS for d in dirs) or _EXAMPLE_FILE.match(name):
        return "example"
    if any(d in _DOC_DIRS for d in dirs) or _DOC_FILE.match(name):
        return "docs"
    if line and _SAMPLE_WORDS.search(line):
        return "example"
    return "config" if _CONFIG_FILE.match(name) else "source"


def severity(rule_id: str, source: str, where: str, checksum: str = "") -> str:
    """One of SEVERITIES (see the module docstring)."""
    if checksum == "invalid":
        return "low"
    if "private-key" in rule_id or rule_id.endswith(("-private-key", "-private-key-block")):
        base = 0
    elif rule_id.startswith("generic") or source.endswith("generic.toml") \
            or "vendor_keywords.toml" in source:
        base = 2  # generic rules, and vendor values found only by the vendor's name nearby
    else:
        base = 1
    if checksum == "valid":
        base = min(base, 1)
    if where in ("fixture", "test", "docs", "example"):
        base += 1
    return SEVERITIES[min(base, 3)]


def summary(findings) -> str:
    """One line: counts by location, and "all in tests/fixtures/docs/examples" when no finding
    lives in source or config (empty string for no findings)."""
    if not findings:
        return ""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.location or "source"] = counts.get(f.location or "source", 0) + 1
    parts = ", ".join(f"{counts[k]} {k}" for k in LOCATIONS if k in counts)
    sev = {}
    for f in findings:
        sev[f.severity] = sev.get(f.severity, 0) + 1
    sevs = ", ".join(f"{sev[k]} {k}" for k in SEVERITIES if k in sev)
    line = f"{len(findings)} finding(s): {parts}; severity {sevs}"
    if not (counts.get("source") or counts.get("config")):
        line += " — all in tests, fixtures, docs or examples (likely samples)"
    return line
