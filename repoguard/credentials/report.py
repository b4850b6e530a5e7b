"""Scan output: text, JSON and SARIF 2.1.0 (as GitHub code scanning accepts it).

Secrets appear only redacted (`****(N chars)`: no character of the value), and fingerprints are
keyed hashes (HMAC under the repository's key, credentials.keys), never plain hashes of a value. SARIF follows OASIS SARIF 2.1.0
and GitHub's documented subset: `$schema`, `version`, one run with `tool.driver` (name, version,
informationUri, rules with id/name/shortDescription/fullDescription/help/properties.tags),
results with ruleId, ruleIndex, level, message.text, physicalLocation (relative uri, region with
startLine ≥ 1 and startColumn ≥ 1) and `partialFingerprints`.
"""
from __future__ import annotations

import json

from repoguard import __version__
from repoguard.credentials.findings import Finding
from repoguard.credentials.rules import RuleSet
from repoguard.credentials.triage import SARIF_LEVEL, SECURITY_SEVERITY, summary

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def to_json(findings: list[Finding], stats: dict) -> str:
    doc = {"findings": [f.to_json() for f in findings], "stats": stats, "summary": summary(findings)}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def to_text(findings: list[Finding], stats: dict) -> str:
    """One line per finding: `path:line:col: rule: redacted [severity location] ...`; history
    findings add a column `still at HEAD` / `not at HEAD  ` and the introducing commit.
    A last line sums findings by location and says when all are in tests/fixtures/docs."""
    lines = []
    for f in findings:
        where = f"{f.path}:{f.line}:{f.column}"
        extra = f" (in {f.decoded})" if f.decoded else ""
        extra += f" checksum={f.checksum}" if f.checksum else ""
        extra += " confidence=low" if f.confidence == "low" else ""  # shown with --confidence low only
        head = ""
        hist = ""
        if f.commit:
            head = " still at HEAD" if f.present_at_head else " not at HEAD  "
            hist = f"  commit {f.commit[:12]} by {f.author} on {f.date}"
        lines.append(f"{where}: {f.rule_id}: {f.redacted}{extra} [{f.severity} {f.location}]{head} "
                     f"entropy={f.entropy:.2f}{hist}")
    if findings:
        lines.append(f"summary: {summary(findings)}")
    return "\n".join(lines) + ("\n" if lines else "")


def to_sarif(findings: list[Finding], stats: dict, ruleset: RuleSet) -> str:
    used = sorted({f.rule_id for f in findings})
    by_id = ruleset.by_id()
    from repoguard.credentials.structural import all_detectors
    dets = all_detectors()
    desc_of = {d.id: d.description for d in dets}
    rules = []
    for rid in used:
        # a rule file's rule, or a detector's per-hit rule (the vendor-keyword rows: `<row>-keyword`)
        r = by_id.get(rid) or next((x for d in dets if d.rule_for and (x := d.rule_for(rid))), None)
        desc = (r.description if r else desc_of.get(rid, "")) or rid
        rules.append({
            "id": rid, "name": rid,
            "shortDescription": {"text": desc[:120]},
            "fullDescription": {"text": desc},
            "help": {"text": f"{desc} Remove the credential, rotate it, and load it from the "
                             "environment or a secret manager.",
                     "markdown": f"**{rid}**: {desc}"},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["security", "secret", *(r.tags if r else ())],
                           "security-severity": "8.0",
                           "precision": "medium" if r and "keyword-anchored" in r.tags else "high"},
        })
    index = {rid: i for i, rid in enumerate(used)}
    results = []
    for f in findings:
        msg = f"{f.rule_id}: credential {f.redacted} found ({f.severity}, in {f.location})"
        if f.commit:
            msg += f" (introduced in {f.commit[:12]}; {'still' if f.present_at_head else 'not'} present at HEAD)"
        results.append({
            "ruleId": f.rule_id, "ruleIndex": index[f.rule_id], "level": SARIF_LEVEL.get(f.severity, "error"),
            "message": {"text": msg},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": f.path},
                "region": {"startLine": max(1, f.line), "startColumn": max(1, f.column),
                           "endLine": max(1, f.end_line or f.line)}}}],
            "partialFingerprints": {"repoguardFingerprint/v2": f.fingerprint},
            "properties": {"location": f.location, "severity": f.severity,
                           "security-severity": SECURITY_SEVERITY.get(f.severity, "8.0"),
                           **({"checksum": f.checksum} if f.checksum else {}),
                           **({"confidence": "low"} if f.confidence == "low" else {}),
                           **({"commit": f.commit, "author": f.author, "date": f.date,
                               "presentAtHead": f.present_at_head} if f.commit else {})},
        })
    doc = {
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "repoguard", "version": __version__,
                                "informationUri": "https://github.com/repoguard/repoguard",
                                "rules": rules}},
            "results": results,
            "properties": {"stats": stats},
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
