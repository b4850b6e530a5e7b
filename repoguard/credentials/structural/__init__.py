"""Structural credential detectors: vendor-independent, written in Python where a regex alone
cannot decide (decode base64, parse a manifest, check a JWT header, reject placeholders).

Each module is one idea and exposes `DETECTORS`, a tuple of `Detector`s. A detector has
`triggers` (lower-case byte literals; it runs only on texts holding one of them, found in the
engine's single keyword pass) and `find(data, path) -> Iterable[Hit]`, where a Hit gives the
byte span of the secret value in `data` and the value itself. The engine applies inline allow
markers and global allowlists to hits exactly as to rule matches; detectors reject placeholders
themselves (`placeholders.is_placeholder`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple


class Hit(NamedTuple):
    """A secret found by a detector: `start`/`end` are byte offsets of the value in the text."""

    start: int
    end: int
    secret: bytes


@dataclass(frozen=True)
class Detector:
    id: str
    description: str
    triggers: tuple[bytes, ...]
    find: Callable[[bytes, str], Iterable[Hit]]
    tags: tuple[str, ...] = ("structural",)


def first_group(m) -> int:
    """Index of the first group of regex match `m` that took part in the match (0 when none):
    detectors whose pattern lists alternative shapes, each capturing the value in its own group."""
    return next((k for k in range(1, (m.lastindex or 0) + 1) if m.group(k) is not None), 0)


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
