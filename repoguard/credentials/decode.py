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
# The engine's one Hyperscan pattern for base64 blobs: the last 32 characters of a run, its
# padding and the byte that ends it (or the end of the data); `b64_blob_end` decides which ends
# are worth decoding.
B64_PREFILTER = rb"[A-Za-z0-9+/_-]{32}={0,2}(?:[^A-Za-z0-9+/=_-]|$)"


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


_RUN = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
_DIGITS, _UPPER = b"0123456789", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def b64_blob_end(data: bytes, t: int) -> bool:
    """Is `t` (a match end of the base64 blob prefilter: a run of [A-Za-z0-9+/_-], up to two `=`,
    then a byte outside those or the end of `data`) the end of a blob worth decoding: its whole
    run holds a digit and an upper-case letter (base64 of text mixes them; identifiers, paths
    and hex in lower case do not), and run, padding and end byte are ≥ 33 bytes? Exactly the
    ends `[c]*[0-9][c]*[A-Z][c]*={0,2}(?:[^c=]|$)` (either order, min_length 33) reported."""
    k = t
    term = data[k - 1:k].translate(None, _RUN + b"=") != b""   # the byte that ended the run
    if term:
        k -= 1
    pad = 0
    while pad < 2 and data[k - 1:k] == b"=":
        k, pad = k - 1, pad + 1
    start = k
    while start > 0:                   # back to the run's first byte (a run may be megabytes)
        lo = max(0, start - 4096)
        kept = len(data[lo:start].rstrip(_RUN))
        start = lo + kept
        if kept:
            break
    run = data[start:k]
    return (len(run) + pad + term >= 33 and len(run.translate(None, _DIGITS)) < len(run)
            and len(run.translate(None, _UPPER)) < len(run))


def blob_rank(data: bytes, kind: str, e: int) -> int:
    """Order of a base64 and a hex blob ending at the same offset, as the database with the
    former pattern reported them: at the end of the data (no end byte) base64 first, else hex
    first (the first one read sets where the next may start)."""
    at_end = data[e - 1:e].translate(None, B64_CHARS if kind == "base64" else HEX_CHARS) == b""
    return (kind == "hex") if at_end else (kind == "base64")
