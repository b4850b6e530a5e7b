"""Credentials outside file contents: in a file's name and in a commit's message.

A token pasted into a file name (`cfg/token_ghp_….txt`) or a commit message (`token ghp_…`) is as
leaked as one in a file: the name is in every clone, every `git log`, and — before this module —
in clear text in the scan report and in example ids. Names and messages are scanned with the
content rules (the path text as if it were a one-line file; path-only rules such as `*.p12`
describe the content, not the name, and are left to the content scan). A name that holds a
credential is redacted wherever repoguard writes it (`redact_name`): `cfg/token_****(40 chars).txt`
in findings, baselines and example ids.

Binary files (a NUL in the first 8000 bytes, git's test) are scanned over their printable runs
(`printable_runs`), as `strings` reads them: a key in a `.py` file that also holds a NUL byte is
still a key.
"""
from __future__ import annotations

import re
from typing import Iterable

from repoguard.credentials.findings import Finding, redact_secret

MESSAGE_PATH = "(commit message)"      # the `path` of a finding in a commit message
IN_NAME = "file name"                  # `Finding.found_in` of a finding in a file's name
IN_MESSAGE = "commit message"
BINARY_SNIFF = 8000                    # git's test: a NUL in the first 8000 bytes is binary
MIN_RUN = 8                            # `strings -n 8`: shorter printable runs are noise in a binary
_RUN = re.compile(rb"[\x20-\x7e\t]{%d,}" % MIN_RUN)
_BLANK = bytes(10 if b == 10 else 0 for b in range(256))    # every byte → NUL, but a newline stays


def is_binary(data: bytes) -> bool:
    """Git's test: a NUL byte in the first 8000 bytes."""
    return b"\0" in data[:BINARY_SNIFF]


def printable_runs(data: bytes) -> bytes:
    """`data` with every byte outside a run of at least `MIN_RUN` printable ASCII characters
    (space to `~`, tab) replaced by NUL; newlines are kept, so offsets, lines and columns are those
    of `data`. Linear time."""
    out = bytearray(data.translate(_BLANK))
    for m in _RUN.finditer(data):
        out[m.start():m.end()] = m.group()
    return bytes(out)


def _tails(data: bytes) -> list[int]:
    """Offsets where `data` is scanned from: 0 and after every `_`. Vendor rules are anchored at
    a word boundary (`\\bghp_…`), and a file name glues words with `_` (`token_ghp_….txt`), which
    is no boundary; each tail starts at one."""
    return [0] + [i + 1 for i, b in enumerate(data) if b == 0x5F and i + 1 < len(data)]


def scan_name(engine, path: str, *, commit: str | None = None) -> list[Finding]:
    """Credentials in the text of `path` itself (its directories and file name), as findings of
    `path` with `found_in` = "file name", line 1, and `start`/`end`/`column` their place in the
    path's UTF-8 bytes. [] for a path the global allowlist drops."""
    data = path.encode("utf-8", "surrogateescape")
    out: dict[tuple, Finding] = {}
    for at in _tails(data):
        for f in engine.scan(data[at:], path, commit=commit):
            if f.end <= f.start:               # a path-only rule's hit is about the content
                continue
            f.start, f.end = f.start + at, f.end + at
            f.line, f.end_line, f.column = 1, 1, len(data[:f.start].decode("utf-8", "replace")) + 1
            f.found_in = IN_NAME
            key = (f.rule_id, f.start, f.end)
            if key not in out and not any(g.start < f.end and f.start < g.end for g in out.values()):
                out[key] = f
    return sorted(out.values(), key=lambda f: (f.start, f.rule_id))


def scan_names(engine, paths: Iterable[str], *, commit: str | None = None) -> list[Finding]:
    """`scan_name` over many paths: one scan of all of them (and their tails, `_tails`) joined
    by newlines finds the few that hold anything, and only those are scanned alone (their own
    path decides allowlists and location), so 100 000 paths cost one scan, not 100 000."""
    paths = list(paths)
    if not paths:
        return []
    owner: list[int] = []
    pieces: list[bytes] = []
    for i, p in enumerate(paths):
        data = p.encode("utf-8", "surrogateescape").replace(b"\n", b" ")
        for at in _tails(data):
            pieces.append(data[at:])
            owner.append(i)
    hits = {owner[f.line - 1] for f in engine.scan(b"\n".join(pieces), "", commit=commit) if f.end > f.start}
    out = []
    for i in sorted(hits):
        out += scan_name(engine, paths[i], commit=commit)
    return out


def redact_name(path: str, findings: Iterable[Finding]) -> str:
    """`path` with the bytes of each finding in it replaced by `****(N chars)` (findings of
    `scan_name` on this path)."""
    data = path.encode("utf-8", "surrogateescape")
    spans = sorted((f.start, f.end) for f in findings if f.end > f.start)
    out, at = [], 0
    for s, e in spans:
        if s < at:
            s = at                         # overlapping findings: redact their union
        if e <= s:
            continue
        out.append(data[at:s])
        out.append(redact_secret(data[s:e]).encode())
        at = e
    out.append(data[at:])
    return b"".join(out).decode("utf-8", "surrogateescape")


def redacted_names(engine, paths: Iterable[str]) -> dict[str, str]:
    """{path: redacted path} for each of `paths` whose name holds a credential (`scan_names`);
    the others are left out (they are written as they are)."""
    by_path: dict[str, list[Finding]] = {}
    for f in scan_names(engine, paths):
        by_path.setdefault(f.path, []).append(f)
    return {p: redact_name(p, fs) for p, fs in by_path.items()}
