"""Checksums that some token formats carry, named by a rule's `checksum` key (a repoguard
extension to the gitleaks schema). A finding of such a rule records `checksum = "valid"` or
`"invalid"`: a valid checksum means the string was minted by the vendor's generator (one random
string in ~2^32 passes by chance), an invalid one marks a hand-made sample, and triage lowers it.

- `crc32-base62`: GitHub's `ghp_/gho_/ghu_/ghs_/ghr_` and npm's `npm_` tokens end with the CRC-32
  of the 30 random characters after the prefix, base62-encoded (0-9A-Za-z) and left-padded to 6
  characters [GitHub blog, "Behind GitHub's new authentication token formats", 2021-04-05;
  npm blog, "Announcing npm's new access token format", 2021-09-23].
- `pypi-macaroon`: a PyPI token is `pypi-` + base64url of a version-2 macaroon (libmacaroons
  binary format: version byte 2; field = type varint, length varint, bytes; sections end with 0;
  a location (1) and identifier (2), caveat sections, then a 32-byte signature field (6)).
- `bech32`: age secret keys are Bech32 strings with the HRP `age-secret-key-` [BIP 173; age
  specification, "X25519 recipient type"].
"""
from __future__ import annotations

import base64
import binascii
import zlib

_B62 = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def base62(n: int, width: int = 6) -> bytes:
    """`n` ≥ 0 in base62 (0-9A-Za-z), left-padded with '0' to `width` characters."""
    out = bytearray()
    while n:
        n, r = divmod(n, 62)
        out.append(_B62[r])
    return bytes(reversed(out)).rjust(width, b"0")


def crc32_base62(token: bytes) -> bool:
    """True when the last 6 characters of the part after the last `_` are base62(CRC-32) of the
    characters before them (GitHub classic and npm tokens)."""
    body = token.rsplit(b"_", 1)[-1]
    if len(body) < 7:
        return False
    return base62(zlib.crc32(body[:-6]) & 0xFFFFFFFF) == body[-6:]


def _varint(b: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(b) or shift > 28:
            raise ValueError("varint")
        c = b[i]
        n |= (c & 0x7F) << shift
        i += 1
        if not c & 0x80:
            return n, i
        shift += 7


def pypi_macaroon(token: bytes) -> bool:
    """True when `pypi-<base64url>` decodes to a well-formed version-2 macaroon."""
    body = token.split(b"-", 1)[-1]
    try:
        raw = base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
        if raw[:1] != b"\x02":
            return False
        i, sections, fields = 1, 0, []
        while i < len(raw):
            t, i = _varint(raw, i)
            if t == 0:
                sections += 1
                if fields == [] and sections >= 2:  # an empty section ends the caveats
                    break
                fields = []
                continue
            ln, i = _varint(raw, i)
            if i + ln > len(raw):
                return False
            fields.append((t, raw[i:i + ln]))
            i += ln
        t, i = _varint(raw, i)
        ln, i = _varint(raw, i)
        return t == 6 and ln == 32 and i + 32 == len(raw)
    except (binascii.Error, ValueError, IndexError):
        return False


def bech32(token: bytes) -> bool:
    """True when `token` (any case) is a valid Bech32 string (BIP 173 checksum constant 1)."""
    s = token.decode("ascii", "replace").lower()
    hrp, sep, data = s.rpartition("1")
    if not sep or len(data) < 6 or any(c not in _BECH32 for c in data):
        return False
    values = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + [_BECH32.index(c) for c in data]
    gen = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for k in range(5):
            chk ^= gen[k] if (top >> k) & 1 else 0
    return chk == 1


CHECKSUMS = {"crc32-base62": crc32_base62, "pypi-macaroon": pypi_macaroon, "bech32": bech32}


def check(name: str, secret: bytes) -> str:
    """"valid" or "invalid" for the named checksum; raises KeyError for an unknown name."""
    return "valid" if CHECKSUMS[name](secret) else "invalid"
