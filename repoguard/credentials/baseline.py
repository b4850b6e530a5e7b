"""Baselines: known findings that should not fail a scan (detect-secrets' workflow).

An entry is a fingerprint `rule_id:path:hmac(secret)[:32]` (findings.Finding.fingerprint, keyed
with the repository's fingerprint key, credentials.keys): no line and no commit, so an entry
survives line moves, rebases and squash merges, and the file holds neither a secret nor a plain
hash a dictionary could test guesses against. Entries that match no current finding are stale.

File format (JSON, version 2):
    {"version": 2, "tool": "repoguard", "fingerprints": "hmac-sha256", "key_id": "…",
     "entries": [{"fingerprint", "rule_id", "path"}, ...]}

`key_id` names the key (credentials.keys.key_id); a baseline written under another key (another
machine without the team's `$REPOGUARD_KEY_FILE`) is refused with a message saying so, rather
than reporting every finding as new. Version 1 baselines held unsalted SHA-256 fingerprints,
which are offline verifiers of the credentials: they are refused with a message to re-create the
baseline (`--update-baseline`), not migrated (migrating would need the plain hashes again).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from repoguard.core.artefacts import atomic_write_json
from repoguard.credentials.findings import Finding
from repoguard.core.errors import InputError

VERSION = 2


@dataclass
class BaselineResult:
    """`apply_baseline`'s split: `new` findings (not in the baseline), `suppressed` ones (in it), and the
    `stale` baseline entries no finding matched."""

    new: list[Finding]
    suppressed: list[Finding]
    stale: list[dict]


def load_baseline(path: str | Path, *, key_id: str | None = None) -> dict[str, dict]:
    """fingerprint → entry. Raises InputError naming the file when it is unreadable, not a
    repoguard baseline, an unsalted version 1 baseline, or written under a key other than
    `key_id` (when given)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: baseline not found (create it with --update-baseline)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: not a readable JSON baseline ({exc})") from None
    if isinstance(doc, dict) and doc.get("version") == 1 and doc.get("tool") == "repoguard":
        raise InputError(f"{p}: a version 1 baseline (unsalted SHA-256 fingerprints, which let anyone test "
                         "password guesses offline); review the findings and re-create it with "
                         f"`repoguard scan --baseline {p} --update-baseline`, and rotate weak credentials it listed "
                         "if the old file was shared")
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("entries"), list):
        raise InputError(f"{p}: not a repoguard baseline (expected version {VERSION} with `entries`)")
    if key_id is not None and doc.get("key_id") != key_id:
        raise InputError(f"{p}: written with another fingerprint key (key id {doc.get('key_id')}, this repository's "
                         f"is {key_id}); set $REPOGUARD_KEY_FILE to the key the baseline was made with, or "
                         "re-create it with --update-baseline")
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


def write_baseline(path: str | Path, findings: Iterable[Finding], *, key_id: str = "",
                   keep: Iterable[dict] = ()) -> int:
    """Write every finding's fingerprint (atomically), plus the entries `keep` (of a baseline
    being updated for part of the tree), recording `key_id` (the fingerprint key's id,
    credentials.keys.key_id); returns the number of entries."""
    entries = {e["fingerprint"]: e for e in keep}
    entries.update({f.fingerprint: {"fingerprint": f.fingerprint, "rule_id": f.rule_id, "path": f.path}
                    for f in findings})
    atomic_write_json(path, {"version": VERSION, "tool": "repoguard", "fingerprints": "hmac-sha256",
                             "key_id": key_id, "entries": [entries[k] for k in sorted(entries)]})
    return len(entries)
