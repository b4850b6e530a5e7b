"""Baselines: known findings that should not fail a scan (detect-secrets' workflow).

An entry is a fingerprint `rule_id:path:sha256(secret)[:32]` (findings.Finding.fingerprint):
no line and no commit, so an entry survives line moves, rebases and squash merges, and the file
never contains a secret. Entries that match no current finding are reported as stale.

File format (JSON, version 1):
    {"version": 1, "tool": "repoguard", "entries": [{"fingerprint", "rule_id", "path"}, ...]}
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from repoguard.artefacts import atomic_write_json
from repoguard.credentials.findings import Finding
from repoguard.errors import InputError

VERSION = 1


@dataclass
class BaselineResult:
    new: list[Finding]
    suppressed: list[Finding]
    stale: list[dict]


def load_baseline(path: str | Path) -> dict[str, dict]:
    """fingerprint → entry. Raises InputError naming the file when it is unreadable or not a
    repoguard baseline."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: baseline not found (create it with --update-baseline)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: not a readable JSON baseline ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("entries"), list):
        raise InputError(f"{p}: not a repoguard baseline (expected version {VERSION} with `entries`)")
    out = {}
    for i, e in enumerate(doc["entries"]):
        if not isinstance(e, dict) or not isinstance(e.get("fingerprint"), str):
            raise InputError(f"{p}: entry {i} has no string `fingerprint`")
        out[e["fingerprint"]] = e
    return out


def apply_baseline(findings: Iterable[Finding], baseline: dict[str, dict], *,
                   scanned_paths: set[str] | None = None) -> BaselineResult:
    """Split findings into new and suppressed. Stale entries are those matching no finding; when
    `scanned_paths` is given (partial scans), only entries for those paths can be stale."""
    new, suppressed, hit = [], [], set()
    for f in findings:
        if f.fingerprint in baseline:
            suppressed.append(f)
            hit.add(f.fingerprint)
        else:
            new.append(f)
    stale = [e for fp, e in sorted(baseline.items()) if fp not in hit
             and (scanned_paths is None or e.get("path") in scanned_paths)]
    return BaselineResult(new=new, suppressed=suppressed, stale=stale)


def write_baseline(path: str | Path, findings: Iterable[Finding]) -> int:
    """Write every finding's fingerprint (atomically); returns the number of entries."""
    entries = {f.fingerprint: {"fingerprint": f.fingerprint, "rule_id": f.rule_id, "path": f.path}
               for f in findings}
    atomic_write_json(path, {"version": VERSION, "tool": "repoguard",
                             "entries": [entries[k] for k in sorted(entries)]})
    return len(entries)
