"""JSON Web Tokens with a signature (RFC 7519 / RFC 7515 compact serialization): three base64url
segments whose first two decode to JSON objects, the header naming an `alg` other than `none`,
and a signature of ≥ 16 characters (an unsigned JWT authenticates nothing).
"""
from __future__ import annotations

import base64
import binascii
import json
from typing import Iterator

import re2

from repoguard.credentials.structural.base import Detector, Hit

_JWT = re2.compile(rb"\beyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.([A-Za-z0-9_-]{16,})")


def _json(seg: bytes):
    try:
        return json.loads(base64.urlsafe_b64decode(seg + b"=" * (-len(seg) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


def find(data: bytes, path: str) -> Iterator[Hit]:
    """Each signed JWT in `data` (module doc), the whole token as the hit."""
    for m in _JWT.finditer(data):
        s, e = m.start(), m.end(1)
        head, payload, _ = data[s:e].split(b".")
        h, p = _json(head), _json(payload)
        if not isinstance(h, dict) or not isinstance(p, dict):
            continue
        alg = str(h.get("alg", "")).lower()
        if not alg or alg == "none":
            continue
        yield Hit(s, e, data[s:e])


DETECTORS = (Detector("jwt-signed", "Signed JSON Web Token (header and payload decode to JSON)", (b"eyj",), find),)
