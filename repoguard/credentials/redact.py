"""Redaction for training text: every detected secret becomes `<REDACTED:rule-id>`.

Training examples are chunks of files, and a credential can straddle a chunk boundary (a 4096-bit
PEM key is ~3.2 KB; a chunk may hold only its base64 body, which no rule matches on its own). So
redaction scans the *whole file* and maps each finding's byte span onto the chunks it overlaps
(`redact_range`): every byte of a credential is replaced, whichever chunk holds it.

The rule set is the scan's (`scan_ruleset`): the default rules plus the config's `[scan] rules`
(relative paths against the repository root, as `repoguard scan` resolves them), with their
allowlists. `analyze` records the rule files it used in `OUT/corpus/redaction.json`
(`record_rules`), and every stage that makes training text builds its redactor from that record
(`redactor_for`), so a custom rule's credential is redacted wherever it was tied.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Sequence

from repoguard.credentials.engine import Engine
from repoguard.credentials.findings import Finding
from repoguard.credentials.rules import RuleSet, load_rules
from repoguard.core.errors import InputError

RECORD = "redaction.json"
_LOCK = threading.Lock()
_ENGINES: dict[tuple, Engine] = {}


def scan_ruleset(root: str | os.PathLike, scan_config, *, with_defaults: bool = False) -> RuleSet:
    """The rule set of the scan for `scan_config` (`[scan]`): its rule files (resolved against
    `root`) and the default rules when `use_default_rules` (or `with_defaults`: the redactor
    always adds them; redacting more than the scan reports is the safe side).
    Raises InputError naming a rule file that is missing or invalid."""
    files = scan_config.rule_files(root)
    return load_rules(rule_files=files, use_default=with_defaults or scan_config.use_default_rules or not files)


def engine_for(rule_files: Sequence[str] = (), key: bytes | None = None) -> Engine:
    """The engine over the default rules plus `rule_files` (absolute paths), built once per
    process, rule set and fingerprint key (cached compile). `key`: the repository's fingerprint
    key (credentials.keys), so findings name the secret ids the incidence has; default a
    per-process key."""
    cache_key = (tuple(rule_files), key)
    with _LOCK:
        eng = _ENGINES.get(cache_key)
        if eng is None:
            eng = _ENGINES[cache_key] = Engine.build(load_rules(rule_files=list(rule_files), use_default=True),
                                                     key=key)
        return eng


def default_engine() -> Engine:
    """The engine over the default rules, built once per process (cached compile)."""
    return engine_for(())


def record_rules(out: str | os.PathLike, root: str | os.PathLike, scan_config) -> None:
    """Write `out/corpus/redaction.json`: the rule files (absolute) the redactor must use for
    this corpus (`analyze` calls it after writing the corpus)."""
    from repoguard.core.artefacts import FORMAT_VERSION, atomic_write_json

    atomic_write_json(Path(out) / "corpus" / RECORD, {
        "format_version": FORMAT_VERSION, "rule_files": scan_config.rule_files(root),
        "default_rules": True})


def recorded_rule_files(out: str | os.PathLike) -> list[str] | None:
    """The rule files recorded by `record_rules` in `out`, or None when there is no record (a
    corpus written by something other than `analyze`). Raises InputError when it is corrupt."""
    from repoguard.core.artefacts import read_json

    path = Path(out) / "corpus" / RECORD
    if not path.is_file():
        return None
    doc = read_json(path, what="redaction rules (run `repoguard analyze`)")
    files = doc.get("rule_files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise InputError(f"{path}: corrupt (expected `rule_files`, a list of paths); re-run `repoguard analyze`")
    return files


def redactor_for(out: str | os.PathLike | None = None, root: str | os.PathLike | None = None) -> "Redactor":
    """The redactor for the corpus in `out`: the rule files `analyze` recorded there; without a
    record, the `[scan] rules` of `root/repoguard.toml` when it exists; else the default rules.
    Findings are keyed with `root`'s fingerprint key when `root` is given (secret ids match the
    incidence's). Raises InputError for a missing/invalid rule file or key file."""
    files = recorded_rule_files(out) if out is not None else None
    key = None
    if root is not None:
        from repoguard.credentials.keys import repo_key

        key = repo_key(root)
        if files is None:
            from repoguard.core.config import default_config_path, load_config

            cfg = load_config(default_config_path(Path(root)), required=False)
            files = cfg.scan.rule_files(root)
    return Redactor(engine_for(tuple(files or ()), key))


class Redactor:
    """`(text, path) -> (redacted text, findings)` over one engine; see `redact`."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine or default_engine()

    def __call__(self, text: str, path: str) -> tuple[str, list[Finding]]:
        return redact(text, path, engine=self.engine)


def redact(text: str, path: str, *, engine: Engine | None = None) -> tuple[str, list[Finding]]:
    """Replace each credential in `text` (the content of `path`, repo-relative) by
    `<REDACTED:rule-id>`. Returns (redacted text, findings); finding offsets (`start`, `end`)
    are UTF-8 byte offsets into the original `text`. Path-only findings (e.g. a `.p12` file)
    are returned but replace nothing. Never raises on content (any text, any size).
    `text` should be a whole file: a chunk cut from a file can hold part of a credential that no
    rule matches on its own (use `redact_range` on the file's findings)."""
    eng = engine or default_engine()
    data = text.encode("utf-8", "surrogateescape")
    findings = eng.scan(data, path)
    return redact_range(data, findings, 0, len(data))


def merged_spans(findings: Sequence[Finding]) -> list[tuple[int, int, str]]:
    """The byte spans of `findings` with overlapping ones merged: [(start, end, rule id of the
    first)], sorted. (Overlapping findings of two rules are one redaction: no byte of either
    survives.)"""
    out: list[list] = []
    for f in sorted((f for f in findings if f.end > f.start), key=lambda f: (f.start, -f.end)):
        if out and f.start < out[-1][1]:
            out[-1][1] = max(out[-1][1], f.end)
        else:
            out.append([f.start, f.end, f.rule_id])
    return [(s, e, r) for s, e, r in out]


def redact_range(data: bytes, findings: Sequence[Finding], start: int, end: int) -> tuple[str, list[Finding]]:
    """The bytes [start, end) of `data` (a whole file) with every part of every finding inside
    them replaced by `<REDACTED:rule-id>`; findings are those of the whole file (offsets into
    `data`). Returns (text, the findings overlapping the range with offsets relative to `start`
    and clipped to it, plus path-only findings)."""
    out = bytearray()
    pos = start
    for s, e, rule in merged_spans(findings):
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out += data[pos:s]
        out += f"<REDACTED:{rule}>".encode()
        pos = e
    out += data[pos:end]
    local = [f if f.end <= f.start else dataclasses.replace(f, start=max(f.start, start) - start,
                                                             end=min(f.end, end) - start)
             for f in findings if f.end <= f.start or (f.start < end and f.end > start)]
    return out.decode("utf-8", "surrogateescape"), local
