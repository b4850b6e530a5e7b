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

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple

from repoguard.credentials.priority import STRUCTURAL


class Hit(NamedTuple):
    """A secret found by a detector: `start`/`end` are byte offsets of the value in the text."""

    start: int
    end: int
    secret: bytes


@dataclass(frozen=True)
class Detector:
    """A structural detector (see the module docstring). `priority`: which finding the engine
    keeps when this detector and a rule or another detector claim one span (levels in
    `credentials.priority`; lower wins). `prefilter`: b"" for none, else a regex whose match
    ends `find` takes as its third argument."""

    id: str
    description: str
    triggers: tuple[bytes, ...]
    find: Callable[..., Iterable[Hit]]
    tags: tuple[str, ...] = ("structural",)
    priority: int = STRUCTURAL
    prefilter: bytes = b""


def first_group(m) -> int:
    """Index of the first group of regex match `m` that took part in the match (0 when none):
    detectors whose pattern lists alternative shapes, each capturing the value in its own group."""
    return next((k for k in range(1, (m.lastindex or 0) + 1) if m.group(k) is not None), 0)


def group_hits(rx, data: bytes, ok: Callable[[bytes], bool]) -> Iterator[Hit]:
    """Hits for the first matching group of each `rx` match in `data` whose value `ok` accepts."""
    for m in rx.finditer(data):
        g = first_group(m)
        if g and ok(m.group(g)):
            yield Hit(*m.span(g), m.group(g))


def all_detectors() -> tuple[Detector, ...]:
    """Every structural detector, in a fixed order (ids are unique)."""
    from repoguard.credentials.structural import (config_files, connection_strings, http_auth,
                                                  invocations, jwt, keyword_context, kubernetes,
                                                  named_secrets, private_keys, urls)
    out: list[Detector] = []
    # keyword_context last: the most generic; on a shared span the engine keeps the other finding
    for mod in (urls, http_auth, config_files, kubernetes, connection_strings, private_keys, jwt,
                invocations, named_secrets, keyword_context):
        out += mod.DETECTORS
    assert len({d.id for d in out}) == len(out)
    return tuple(out)
