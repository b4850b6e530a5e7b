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
    """The `scan --format json` document: {"findings", "stats", "summary"} (sorted keys, a final newline)."""
    doc = {"findings": [f.to_json() for f in findings], "stats": stats, "summary": summary(findings)}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def to_text(findings: list[Finding], stats: dict) -> str:
    """One line per finding: `path:line:col: rule: redacted [severity location] ...`; history
    findings add a column `still at HEAD` / `not at HEAD  ` and the introducing commit.
    A `summary:` line sums findings by location and says when all are in tests/fixtures/docs;
    `note:` lines say what was read only in part or not at all (`notes`)."""
    lines = []
    for f in findings:
        where = f"{f.path}:{f.line}:{f.column}"
        extra = f" (in {f.decoded})" if f.decoded else ""
        extra += f" (in the {f.found_in})" if f.found_in else ""
        extra += f" checksum={f.checksum}" if f.checksum else ""
        extra += " confidence=low" if f.confidence == "low" else ""  # shown with --confidence low only
        head = ""
        hist = ""
        if f.commit:
            head = " still at HEAD" if f.present_at_head else " not at HEAD  "
            if f.found_in == "commit message":
                head = " in git log   "          # a message stays in the history: no HEAD to leave
            hist = f"  commit {f.commit[:12]} by {f.author} on {f.date}"
        lines.append(f"{where}: {f.rule_id}: {f.redacted}{extra} [{f.severity} {f.location}]{head} "
                     f"entropy={f.entropy:.2f}{hist}")
    if findings:
        lines.append(f"summary: {summary(findings)}")
    lines += [f"note: {n}" for n in notes(stats)]
    return "\n".join(lines) + ("\n" if lines else "")


# Why a file was not read (`scan.read_regular_file` reasons, and the excluder).
_SKIPPED = {"allowlisted": "left out by path (repoguard's own .repoguard/ files and baseline, scan.exclude, the rules' path allowlist)",
            "symlink": "symlinks are not followed", "outside": "below a symlink out of the repository",
            "special": "not a regular file", "missing": "listed but not on disk", "unreadable": "unreadable"}


def notes(stats: dict) -> list[str]:
    """One sentence per way the scan read less than everything (stats from `Scanner`): binary
    files read over their printable runs, files cut at `max_file_bytes`, files skipped by reason,
    history objects git could not read. [] when everything was read whole."""
    out = []
    if stats.get("binary"):
        out.append(f"{stats['binary']} binary file(s) (a NUL byte in the first 8000 bytes) scanned over "
                   "their printable runs only")
    if stats.get("truncated"):
        cap = stats.get("max_file_bytes")
        out.append(f"{stats['truncated']} file(s) longer than {cap or 'the limit'} bytes scanned up to it only "
                   "(--max-file-bytes, or scan.max_file_bytes in the config)")
    skipped = {k[len("skipped_"):]: v for k, v in stats.items() if k.startswith("skipped_") and v}
    if skipped:
        parts = [f"{n} {_SKIPPED.get(why, why)}" for why, n in sorted(skipped.items())]
        out.append(f"{sum(skipped.values())} file(s) not scanned: " + "; ".join(parts))
    bad = unreadable_objects(stats.get("unreadable") or [])
    if bad:
        shown = ", ".join(f"{sha[:12]} ({where})" for sha, where in list(bad.items())[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        out.append(f"{len(bad)} object(s) git could not read were skipped: {shown}{more}; the rest was scanned")
    return out


def unreadable_objects(rows: list[dict]) -> dict[str, str]:
    """{object: "paths in commit(s) …"} from `stats["unreadable"]` rows (one per commit that
    needed the object), in order of first appearance."""
    by: dict[str, tuple[dict, list[str]]] = {}
    for u in rows:
        paths, commits = by.setdefault(u["object"], ({}, []))
        paths.update(dict.fromkeys(u.get("paths") or ["?"]))
        commits.append(u["commit"][:12])
    return {sha: f"{', '.join(paths)} in commit{'s' if len(cs) > 1 else ''} {', '.join(cs)}"
            for sha, (paths, cs) in by.items()}


def to_sarif(findings: list[Finding], stats: dict, ruleset: RuleSet) -> str:
    """The SARIF 2.1.0 document of `findings` (module doc): one rule per rule id found, described from
    `ruleset` or from the structural detector that reported it; one result per finding, located by
    path, line and column, fingerprinted by its keyed fingerprint."""
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
