"""Scan output: text, JSON and SARIF 2.1.0 (as GitHub code scanning accepts it).

Secrets appear only redacted (first 4 characters, then `…`). SARIF follows OASIS SARIF 2.1.0
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

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def to_json(findings: list[Finding], stats: dict) -> str:
    doc = {"findings": [f.to_json() for f in findings], "stats": stats}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def to_text(findings: list[Finding], stats: dict) -> str:
    lines = []
    for f in findings:
        where = f"{f.path}:{f.line}:{f.column}"
        extra = f" (in {f.decoded})" if f.decoded else ""
        hist = ""
        if f.commit:
            state = "still at HEAD" if f.present_at_head else "not at HEAD"
            hist = f"  commit {f.commit[:12]} by {f.author} on {f.date} ({state})"
        lines.append(f"{where}: {f.rule_id}: {f.redacted}{extra} entropy={f.entropy:.2f}{hist}")
    return "\n".join(lines) + ("\n" if lines else "")


def to_sarif(findings: list[Finding], stats: dict, ruleset: RuleSet) -> str:
    used = sorted({f.rule_id for f in findings})
    by_id = ruleset.by_id()
    rules = []
    for rid in used:
        r = by_id.get(rid)
        desc = (r.description if r else "") or rid
        rules.append({
            "id": rid, "name": rid,
            "shortDescription": {"text": desc[:120]},
            "fullDescription": {"text": desc},
            "help": {"text": f"{desc} Remove the credential, rotate it, and load it from the "
                             "environment or a secret manager.",
                     "markdown": f"**{rid}**: {desc}"},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["security", "secret", *(r.tags if r else ())],
                           "security-severity": "8.0", "precision": "high"},
        })
    index = {rid: i for i, rid in enumerate(used)}
    results = []
    for f in findings:
        msg = f"{f.rule_id}: credential {f.redacted} found"
        if f.commit:
            msg += f" (introduced in {f.commit[:12]}; {'still' if f.present_at_head else 'not'} present at HEAD)"
        results.append({
            "ruleId": f.rule_id, "ruleIndex": index[f.rule_id], "level": "error",
            "message": {"text": msg},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": f.path},
                "region": {"startLine": max(1, f.line), "startColumn": max(1, f.column),
                           "endLine": max(1, f.end_line or f.line)}}}],
            "partialFingerprints": {"repoguardFingerprint/v1": f.fingerprint},
            **({"properties": {"commit": f.commit, "author": f.author, "date": f.date,
                               "presentAtHead": f.present_at_head}} if f.commit else {}),
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
