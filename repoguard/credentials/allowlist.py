"""Allowlists (gitleaks semantics): when a candidate finding is not reported.

Compiled once per engine: an allowlist's regexes become one RE2 alternation and its stopwords one
Aho-Corasick automaton, so a candidate costs two linear passes over the secret however long the
lists are (gitleaks' generic rule carries ~1,500 stopwords).
"""
from __future__ import annotations

from dataclasses import dataclass

import ahocorasick

from repoguard.credentials.rule_types import Allowlist, compile_re2


@dataclass(frozen=True)
class CompiledAllowlist:
    """An `Allowlist` compiled for `is_allowed`: its regexes as one RE2 alternation over bytes, its
    path regexes as one over str, its lower-cased stopwords as one Aho-Corasick automaton (each None
    when the list is empty)."""

    allowlist: Allowlist
    regex: object | None       # RE2 alternation of the regexes (bytes)
    paths: object | None       # RE2 alternation of the path regexes (str)
    stopwords: object | None   # Aho-Corasick automaton of the lower-cased stopwords


def _alternation(patterns, *, as_bytes: bool):
    if not patterns:
        return None
    return compile_re2("|".join(f"(?:{p})" for p in patterns), as_bytes)


def compile_allowlist(al: Allowlist) -> CompiledAllowlist:
    """Compile `al` once (module doc): a candidate then costs two linear passes however long its lists."""
    auto = None
    if al.stopwords:
        auto = ahocorasick.Automaton()
        for w in al.stopwords:
            auto.add_word(w, w)
        auto.make_automaton()
    return CompiledAllowlist(al, _alternation(al.regexes, as_bytes=True),
                             _alternation(al.paths, as_bytes=False), auto)


def is_allowed(c: CompiledAllowlist, secret: bytes, match: bytes, line: bytes, path: str,
               commit: str | None) -> bool:
    """gitleaks' allowlist check: OR — any configured check passes; AND — all of them do.
    Stopwords match case-insensitively anywhere in the secret; regexes search the secret, the
    whole match or the line (`regexTarget`)."""
    al = c.allowlist
    checks: list[bool] = []
    if al.commits:
        checks.append(commit is not None and commit in al.commits)
    if c.paths is not None:
        checks.append(c.paths.search(path) is not None)
    if c.regex is not None:
        target = {"secret": secret, "match": match, "line": line}[al.regex_target]
        checks.append(c.regex.search(target) is not None)
    if c.stopwords is not None:
        low = secret.decode("utf-8", "replace").lower()
        checks.append(next(c.stopwords.iter(low), None) is not None)
    if not checks:
        return False
    return all(checks) if al.condition == "AND" else any(checks)
