"""Encoded blobs: base64 and hex runs worth decoding, and their decoding.

A secret base64- or hex-encoded in a config (Kubernetes secrets, Docker auths, CI variables) is
invisible to the rules; the engine decodes blobs that could be encoded text and scans the result
again, up to a fixed depth. Blobs that decode to binary (hashes, images) are dropped.
"""
from __future__ import annotations

import base64
import binascii

B64 = rb"[A-Za-z0-9+/_-]{32,1000}={0,2}"
HEX = rb"(?:[0-9a-fA-F]{2}){20,500}"

B64_CHARS = bytes(sorted(set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-=")))
HEX_CHARS = b"0123456789abcdefABCDEF"
# translate(None, d) keeps only the bytes not in d: each must leave something (digit, upper, lower).
NEED_B64 = tuple(bytes(x for x in range(256) if not lo <= x <= hi)
               for lo, hi in ((48, 57), (65, 90), (97, 122)))
_PRINTABLE = bytes([9, 10, 13, *range(32, 127)])


def decode_blob(kind: str, blob: bytes) -> bytes | None:
    """Decoded bytes when they are mostly printable text (so worth scanning), else None."""
    try:
        if kind == "hex":
            raw = binascii.unhexlify(blob)
        else:
            b = blob.rstrip(b"=")
            b = b + b"=" * (-len(b) % 4)
            raw = base64.urlsafe_b64decode(b.replace(b"+", b"-").replace(b"/", b"_"))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 16:
        return None
    return raw if len(raw.translate(None, _PRINTABLE)) <= 0.05 * len(raw) else None
