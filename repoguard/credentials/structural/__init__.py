"""Structural credential detectors: vendor-independent, written in Python where a regex alone
cannot decide (decode base64, parse a manifest, check a JWT header, reject placeholders).

Each module is one idea and exposes `DETECTORS`, a tuple of `Detector`s. A detector has
`triggers` (lower-case byte literals; it runs only on texts holding one of them, found in the
engine's single keyword pass) and `find(data, path) -> Iterable[Hit]`, where a Hit gives the
byte span of the secret value in `data` and the value itself. The engine applies inline allow
markers and global allowlists to hits exactly as to rule matches; detectors reject placeholders
themselves (`placeholders.is_placeholder`).

A detector may also declare a `prefilter`: a regex (the common subset of Hyperscan and RE2
syntax, matched case-insensitively) that matches wherever the detector can find something. The
engine compiles it into its single Hyperscan database, so a text is read by Hyperscan once for
rules and detectors alike, and calls `find(data, path, ends)` with the end offsets of its
matches (a list, possibly unsorted), skipping texts without any; on the RE2 backend (no
Hyperscan) it calls `find(data, path, None)`, which must then search the whole text.
"""
from __future__ import annotations

from repoguard.credentials.structural.base import Detector, Hit  # noqa: F401  (the package's types)


def all_detectors() -> tuple[Detector, ...]:
    """Every structural detector, in a fixed order (ids are unique)."""
    from repoguard.credentials.structural import (ci_secrets, client_calls, config_files, connection_strings, http_auth,
                                                  invocations, jwt, keyword_context, kubernetes,
                                                  named_secrets, private_keys, urls, vendor_keywords)
    out: list[Detector] = []
    # keyword_context last: the most generic; on a shared span the engine keeps the other finding
    for mod in (urls, http_auth, config_files, ci_secrets, kubernetes, connection_strings, private_keys, jwt,
                invocations, named_secrets, vendor_keywords, client_calls, keyword_context):
        out += mod.DETECTORS
    assert len({d.id for d in out}) == len(out)
    return tuple(out)
